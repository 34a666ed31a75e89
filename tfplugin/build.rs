//! Compiles the protocol definitions in `../proto` into Rust at build time.
//!
//! protox is a protobuf compiler written in Rust, so building needs no system `protoc`. Only server code is
//! generated: the crate is a plugin, never a client. `generate_default_stubs` makes every RPC we do not implement
//! answer UNIMPLEMENTED, which both Terraform and OpenTofu tolerate for optional RPCs.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto");
    let files = ["tfplugin6.proto", "plugin.proto", "health.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={}", proto_dir.join(f).display());
    }
    let fds = protox::compile(files, [&proto_dir]).map_err(|e| {
        format!(
            "compiling the protocol definitions in {}: {e}",
            proto_dir.display()
        )
    })?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .generate_default_stubs(true)
        .compile_fds(fds)
        .map_err(|e| format!("generating Rust code from the protocol definitions: {e}"))?;
    Ok(())
}
