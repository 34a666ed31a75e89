//! Loopback port redirects a guest sets up at boot: an iptables `nat OUTPUT` rule with `-j REDIRECT` for
//! `-d 127.0.0.1`, run by a systemd unit that `runcmd` enables and starts. The sim has no netfilter; it reads the
//! rule from the unit, as the guest's systemd would run it, and the health-check sidecar model uses it to decide
//! whether its fixed `https://127.0.0.1:443` reaches an API server on another port.
//!
//! Only what would really take effect counts: a unit that is written but never started, a rule in the wrong table
//! or chain, for another address, or for UDP redirects nothing. `ExecStartPre`/`ExecStop` lines (the unit's own
//! clean-up) are not rules it adds.

use super::guest_file::GuestFile;

/// Where the guest's systemd reads units written by cloud-init.
const UNIT_DIR: &str = "/etc/systemd/system/";

/// `(from, to)` loopback TCP ports the guest redirects once booted.
pub(crate) fn redirects(files: &[GuestFile], runcmd: &[Vec<String>]) -> Vec<(u16, u16)> {
    files
        .iter()
        .filter(|f| f.path.starts_with(UNIT_DIR) && f.path.ends_with(".service"))
        .filter(|f| started(&f.path[UNIT_DIR.len()..], runcmd))
        .flat_map(|f| exec_starts(&String::from_utf8_lossy(&f.bytes)))
        .filter_map(|argv| redirect(&argv))
        .collect()
}

/// Whether `runcmd` starts the unit (`systemctl start U`, `systemctl enable --now U`, `systemctl restart U`).
fn started(unit: &str, runcmd: &[Vec<String>]) -> bool {
    runcmd.iter().any(|cmd| {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        match args.as_slice() {
            ["systemctl", "start" | "restart", units @ ..] => units.contains(&unit),
            ["systemctl", "enable", rest @ ..] => rest.contains(&"--now") && rest.contains(&unit),
            _ => false,
        }
    })
}

/// The unit's `ExecStart=` command lines, split on whitespace (a `-` prefix, "ignore failure", dropped).
fn exec_starts(unit: &str) -> Vec<Vec<String>> {
    unit.lines()
        .filter_map(|l| l.trim().strip_prefix("ExecStart="))
        .map(|cmd| {
            cmd.trim_start_matches(['-', '@', '+', '!'])
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .filter(|argv| !argv.is_empty())
        .collect()
}

/// `iptables [-w] -t nat -A|-I OUTPUT -p tcp -d 127.0.0.1[/32] --dport F -j REDIRECT --to-ports T`, in any order.
fn redirect(argv: &[String]) -> Option<(u16, u16)> {
    let program = argv.first()?.rsplit('/').next()?;
    if !matches!(program, "iptables" | "iptables-nft" | "iptables-legacy") {
        return None;
    }
    let value = |flags: &[&str]| {
        argv.iter()
            .position(|a| flags.contains(&a.as_str()))
            .and_then(|i| argv.get(i + 1))
            .map(String::as_str)
    };
    let adds = value(&["-A", "--append", "-I", "--insert"]) == Some("OUTPUT");
    let nat = value(&["-t", "--table"]) == Some("nat");
    let tcp = value(&["-p", "--protocol"]) == Some("tcp");
    let loopback = matches!(
        value(&["-d", "--destination"]),
        Some("127.0.0.1" | "127.0.0.1/32")
    );
    let redirects = value(&["-j", "--jump"]) == Some("REDIRECT");
    if !(adds && nat && tcp && loopback && redirects) {
        return None;
    }
    let from = value(&["--dport", "--destination-port"])?.parse().ok()?;
    let to = value(&["--to-ports", "--to-port"])?.parse().ok()?;
    Some((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(body: &str) -> GuestFile {
        GuestFile {
            path: "/etc/systemd/system/hc-port.service".into(),
            bytes: body.as_bytes().to_vec(),
            mode: 0o644,
            owner: "root:root".into(),
            append: false,
        }
    }

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    const RULE: &str = "OUTPUT -p tcp -d 127.0.0.1 --dport 443 -j REDIRECT --to-ports 6443";

    #[test]
    fn a_started_units_loopback_redirect_counts_and_nothing_else_does() {
        let body = format!(
            "[Service]\nType=oneshot\nExecStartPre=-iptables -w -t nat -D {RULE}\nExecStart=iptables -w -t nat -A {RULE}\n"
        );
        let enable = vec![argv(&["systemctl", "enable", "--now", "hc-port.service"])];
        assert_eq!(redirects(&[unit(&body)], &enable), [(443, 6443)]);
        let start = vec![argv(&["systemctl", "start", "hc-port.service"])];
        assert_eq!(redirects(&[unit(&body)], &start), [(443, 6443)]);
        // Written but not started: the guest's systemd never ran it (enable alone waits for the next boot).
        let enable_only = vec![argv(&["systemctl", "enable", "hc-port.service"])];
        assert!(redirects(&[unit(&body)], &enable_only).is_empty());
        assert!(redirects(&[unit(&body)], &[]).is_empty());
        // Rules that would not reach the sidecar's connection.
        for wrong in [
            RULE.replace("OUTPUT", "PREROUTING"),
            RULE.replace("127.0.0.1", "10.0.0.2"),
            RULE.replace("tcp", "udp"),
            RULE.replace("REDIRECT", "ACCEPT"),
        ] {
            let body = format!("[Service]\nExecStart=iptables -t nat -A {wrong}\n");
            assert!(redirects(&[unit(&body)], &enable).is_empty(), "{wrong}");
        }
        let filter_table = format!("[Service]\nExecStart=iptables -A {RULE}\n");
        assert!(redirects(&[unit(&filter_table)], &enable).is_empty());
        let delete = format!("[Service]\nExecStart=iptables -t nat -D {RULE}\n");
        assert!(redirects(&[unit(&delete)], &enable).is_empty());
    }
}
