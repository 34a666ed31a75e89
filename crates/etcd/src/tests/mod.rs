//! Tests against real etcd 3.4 processes with mutual TLS, each member on its own loopback IP (all of
//! 127.0.0.0/8 reaches `lo`), so members use the same ports as on a VM. Processes die with their handle.

mod membership;
mod preflight;
mod tls;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::{Etcd, EtcdTarget, EtcdTls};

/// Fast elections keep membership tests short; same ratio as etcd's defaults (100/1000).
const HEARTBEAT_MS: &str = "50";
const ELECTION_MS: &str = "500";

/// A throwaway CA and its client certificate, as the cluster resource would make them.
pub(super) struct Pki {
    ca_pem: String,
    ca_params: CertificateParams,
    ca_key: KeyPair,
    pub tls: EtcdTls,
}

impl Pki {
    pub fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "etcd-test-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
        let mut pki = Pki {
            ca_pem: ca_pem.clone(),
            ca_params,
            ca_key,
            tls: EtcdTls {
                ca_pem,
                client_cert_pem: String::new(),
                client_key_pem: String::new(),
            },
        };
        let (cert, key) = pki.issue("client", &[], &[ExtendedKeyUsagePurpose::ClientAuth]);
        pki.tls.client_cert_pem = cert;
        pki.tls.client_key_pem = key;
        pki
    }

    /// Another handle on the same CA (its key is not `Clone`), for a test that signs from another thread.
    pub fn new_sharing_ca(other: &Pki) -> Pki {
        Pki {
            ca_pem: other.ca_pem.clone(),
            ca_params: other.ca_params.clone(),
            ca_key: KeyPair::from_pem(&other.ca_key.serialize_pem()).unwrap(),
            tls: other.tls.clone(),
        }
    }

    /// A certificate for `cn` with `sans` (IP literals become IP SANs), signed by the CA: (cert, key) PEM.
    pub fn issue(
        &self,
        cn: &str,
        sans: &[String],
        eku: &[ExtendedKeyUsagePurpose],
    ) -> (String, String) {
        self.issue_until(cn, sans, eku, None)
    }

    /// As `issue`, expiring at `not_after` (valid from a minute ago) when it is given.
    pub fn issue_until(
        &self,
        cn: &str,
        sans: &[String],
        eku: &[ExtendedKeyUsagePurpose],
        not_after: Option<std::time::SystemTime>,
    ) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans.to_vec()).unwrap();
        if let Some(t) = not_after {
            params.not_after = time::OffsetDateTime::from(t);
            params.not_before = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);
        }
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = eku.to_vec();
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        (
            params.signed_by(&key, &issuer).unwrap().pem(),
            key.serialize_pem(),
        )
    }
}

/// One test's cluster: its loopback /24, its files, and its etcd processes.
pub(super) struct Cluster {
    pub pki: Pki,
    pub etcd: Etcd,
    net: [u8; 3],
    dir: PathBuf,
    procs: Vec<(String, Child)>,
    /// Holds `net` for this test; removed on drop.
    net_lock: PathBuf,
}

/// Each test gets its own 127.55.X.0/24 so tests run in parallel. nextest runs every test in a process of its
/// own, so the choice is made across processes: a lock file per X, created exclusively in the machine's temp
/// folder and reclaimed once its owner process is gone (a counter per process, or the pid modulo a small number,
/// gave two concurrent tests the same addresses now and then).
fn take_net() -> (u8, PathBuf) {
    let dir = std::env::temp_dir().join("etcd-backend-test-nets");
    std::fs::create_dir_all(&dir).unwrap();
    for x in 0..=255u8 {
        let file = dir.join(format!("{x}.lock"));
        if let Ok(owner) = std::fs::read_to_string(&file)
            && owner
                .trim()
                .parse::<u32>()
                .is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        {
            let _ = std::fs::remove_file(&file);
        }
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file)
        {
            use std::io::Write as _;
            let _ = write!(f, "{}", std::process::id());
            return (x, file);
        }
    }
    panic!(
        "no free 127.55.X.0/24 for an etcd test under {}",
        dir.display()
    );
}

impl Cluster {
    pub fn new() -> Cluster {
        let (x, net_lock) = take_net();
        let net = [127, 55, x];
        let dir = std::env::temp_dir().join(format!(
            "etcd-backend-test-{}-{}",
            std::process::id(),
            net[2]
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki::new();
        // Short timeouts: everything is local, and tests of unreachable members should not wait long.
        let etcd = Etcd::with_timeouts(
            pki.tls.clone(),
            Duration::from_secs(1),
            Duration::from_secs(3),
        );
        Cluster {
            pki,
            etcd,
            net,
            net_lock,
            dir,
            procs: Vec::new(),
        }
    }

    /// Member `n`'s IP: 127.55.X.n.
    pub fn ip(&self, n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(self.net[0], self.net[1], self.net[2], n))
    }

    pub fn target(&self, n: u8, name: &str) -> EtcdTarget {
        EtcdTarget::new(SocketAddr::new(self.ip(n), 2379), name)
    }

    pub fn peer_url(&self, n: u8) -> String {
        format!("https://{}:2380", self.ip(n))
    }

    /// Starts member `name` on IP `n`. `initial_cluster` is `None` for a founding single member.
    pub fn start(&mut self, n: u8, name: &str, initial_cluster: Option<&str>) {
        let ip = self.ip(n);
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        // One certificate serves both ports here; like the masters' peer certs it names the member by DNS and
        // IP, plus 127.0.0.1: etcd checks a peer's client cert against the connection's source address, and
        // on loopback the kernel picks 127.0.0.1 as the source.
        let sans = vec![name.to_string(), ip.to_string(), "127.0.0.1".to_string()];
        let eku = [
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let (cert, key) = self.pki.issue(name, &sans, &eku);
        let write = |file: &str, content: &str| {
            let path = dir.join(file);
            std::fs::write(&path, content).unwrap();
            path.display().to_string()
        };
        let (ca, cert, key) = (
            write("ca.crt", &self.pki.ca_pem),
            write("member.crt", &cert),
            write("member.key", &key),
        );
        let peer = self.peer_url(n);
        let (state, cluster) = match initial_cluster {
            None => ("new", format!("{name}={peer}")),
            Some(list) => ("existing", list.to_string()),
        };
        let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
        let args = [
            format!("--name={name}"),
            format!("--data-dir={}", dir.join("data").display()),
            format!("--listen-peer-urls={peer}"),
            format!("--listen-client-urls=https://{ip}:2379"),
            format!("--advertise-client-urls=https://{ip}:2379"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster={cluster}"),
            format!("--initial-cluster-state={state}"),
            "--initial-cluster-token=etcd-backend-test".to_string(),
            "--client-cert-auth=true".to_string(),
            format!("--trusted-ca-file={ca}"),
            format!("--cert-file={cert}"),
            format!("--key-file={key}"),
            "--peer-client-cert-auth=true".to_string(),
            format!("--peer-trusted-ca-file={ca}"),
            format!("--peer-cert-file={cert}"),
            format!("--peer-key-file={key}"),
            format!("--heartbeat-interval={HEARTBEAT_MS}"),
            format!("--election-timeout={ELECTION_MS}"),
        ];
        let child = Command::new(etcd_binary())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.procs.push((name.to_string(), child));
    }

    /// Stops member `name` (as a VM crash would) without removing it from the cluster.
    pub fn kill(&mut self, name: &str) {
        if let Some(i) = self.procs.iter().position(|(n, _)| n == name) {
            let (_, mut child) = self.procs.remove(i);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until `target` answers a status request, or panics with its log.
    pub async fn wait_ready(&self, target: &EtcdTarget) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            match self.etcd.status(target).await {
                Ok(s) if s.leader_id != 0 => return,
                other if tokio::time::Instant::now() > deadline => {
                    panic!(
                        "{target} not ready: {other:?}\n{}",
                        self.log(&target.server_name)
                    )
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name).join("etcd.log")).unwrap_or_default()
    }

    /// A key-value client to prove the cluster serves writes (the backend itself never touches keys).
    pub async fn put(
        &self,
        target: &EtcdTarget,
        key: &str,
        value: &str,
    ) -> Result<(), etcd_client::Error> {
        let tls = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(&self.pki.tls.ca_pem))
            .identity(etcd_client::Identity::from_pem(
                &self.pki.tls.client_cert_pem,
                &self.pki.tls.client_key_pem,
            ))
            .domain_name(target.server_name.clone());
        let options = etcd_client::ConnectOptions::new()
            .with_tls(tls)
            .with_timeout(Duration::from_secs(3));
        let mut client =
            etcd_client::Client::connect([format!("https://{}", target.endpoint)], Some(options))
                .await?;
        client.put(key, value, None).await.map(|_| ())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.procs {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Keep the logs of a failed test for reading; clean up after a passing one.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        let _ = std::fs::remove_file(&self.net_lock);
    }
}

fn etcd_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ETCD_BIN") {
        return PathBuf::from(path);
    }
    let tools = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(".tools/bin/etcd");
    assert!(
        tools.exists(),
        "etcd not found at {}: run scripts/setup or set ETCD_BIN",
        tools.display()
    );
    tools
}
