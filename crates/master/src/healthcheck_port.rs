//! The load balancer's health check on a master whose API is not on port 443 (`api_port`).
//!
//! The check asks kops' health-check sidecar (`manifests::HEALTHCHECK_PORT`), which proxies `/healthz` to
//! `https://127.0.0.1/healthz`: port 443, fixed in the program, with no flag to change it (kubernetes/kops
//! `cmd/kube-apiserver-healthcheck`). A kube-apiserver on 6443 never answers it, so every backend stays unhealthy
//! and a second replica's join waits for a pool that never fills. On such a master a systemd unit, ordered before
//! the kubelet, sends locally made connections to `127.0.0.1:443` on to the API's port (an iptables `nat OUTPUT`
//! `REDIRECT`: loopback to loopback, so no `route_localnet`). Only the sidecar dials that address: nothing on a
//! master listens on 443 when the API does not, and the rule reaches no packet that comes from the network.
//!
//! The unit is idempotent (it deletes the rule before adding it) and leaves nothing behind when stopped. On a
//! master whose API is on 443 nothing is written: the sidecar reaches the API as it is.

/// Where the unit is written.
pub const UNIT: &str = "/etc/systemd/system/ha-apiserver-healthcheck-port.service";
/// The name `systemctl` knows it by.
pub const UNIT_NAME: &str = "ha-apiserver-healthcheck-port.service";
/// The port the sidecar always dials.
pub const SIDECAR_TARGET_PORT: u16 = 443;

/// The nat rule, as `iptables -t nat` takes it after the command (`-A`, `-D`).
fn rule(api_port: u16) -> String {
    format!(
        "OUTPUT -p tcp -d 127.0.0.1 --dport {SIDECAR_TARGET_PORT} -j REDIRECT --to-ports {api_port}"
    )
}

/// The unit for a master whose API listens on `api_port`, or `None` on 443, where nothing is needed.
/// `iptables` is named without a path: systemd looks it up in its fixed search path (`/usr/sbin` on Ubuntu and
/// Debian, `/sbin` elsewhere); `-w` waits for the xtables lock another program (the kubelet, a CNI) may hold.
/// Every image that runs a master has it: the kubelet package `runtime` installs requires it (kubernetes/release,
/// the kubelet spec's `Requires: iptables`), and images made for the contract run the kubelet.
pub fn unit(api_port: u16) -> Option<String> {
    if api_port == SIDECAR_TARGET_PORT {
        return None;
    }
    let rule = rule(api_port);
    Some(format!(
        "[Unit]\n\
         Description=Health-check sidecar's https://127.0.0.1:{SIDECAR_TARGET_PORT} sent to kube-apiserver on port {api_port} (written by terraform-provider-ha)\n\
         Before=kubelet.service\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         RemainAfterExit=yes\n\
         ExecStartPre=-iptables -w -t nat -D {rule}\n\
         ExecStart=iptables -w -t nat -A {rule}\n\
         ExecStop=-iptables -w -t nat -D {rule}\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n"
    ))
}

/// What `runcmd` runs to start the unit at first boot and enable it for every boot after (after the
/// `daemon-reload` that makes systemd read it), or nothing on 443.
pub fn start(api_port: u16) -> Option<Vec<String>> {
    unit(api_port).map(|_| {
        ["systemctl", "enable", "--now", UNIT_NAME]
            .map(String::from)
            .to_vec()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_master_off_443_gets_the_unit() {
        assert_eq!(unit(443), None);
        assert_eq!(start(443), None);
        let u = unit(6443).unwrap();
        assert!(
            u.contains(
                "\nExecStart=iptables -w -t nat -A OUTPUT -p tcp -d 127.0.0.1 --dport 443 -j REDIRECT --to-ports 6443\n"
            ),
            "{u}"
        );
        // Run twice (a restarted unit, a re-run of cloud-init), the rule is there once.
        assert!(
            u.contains("\nExecStartPre=-iptables -w -t nat -D OUTPUT"),
            "{u}"
        );
        assert!(u.contains("\nBefore=kubelet.service\n"), "{u}");
        assert_eq!(
            start(6443).unwrap(),
            ["systemctl", "enable", "--now", UNIT_NAME]
        );
        assert_eq!(UNIT.rsplit('/').next(), Some(UNIT_NAME));
    }
}
