//! terraform-provider-ha: started by Terraform or OpenTofu, never by hand (it says so if you try).

use terraform_provider_ha::provider::HaProvider;
use tfplugin_framework::FrameworkServer;

fn main() -> std::process::ExitCode {
    tfplugin::init_logging("ha");
    tfplugin::serve(FrameworkServer::new(HaProvider::default()))
}
