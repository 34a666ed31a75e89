//! CIDR ranges as GCE firewalls accept them, and the Kubernetes service range (its first address, computed by
//! `ha_master::first_service_ip`, is in every API server certificate).

use ipnet::{IpNet, Ipv4Net};

use super::Problem;

/// The persistent disk types an etcd data disk may have (zonal, attachable read-write to one VM).
pub const DISK_TYPES: [&str; 3] = ["pd-ssd", "pd-balanced", "pd-standard"];

pub fn check_disk_type(s: &str) -> Result<(), Problem> {
    if DISK_TYPES.contains(&s) {
        return Ok(());
    }
    Err((
        format!("Unknown persistent disk type {s:?}"),
        format!(
            "Use one of {}; `pd-ssd` suits etcd best.",
            DISK_TYPES.map(|t| format!("`{t}`")).join(", ")
        ),
    ))
}

pub fn check_cidr(s: &str) -> Result<(), Problem> {
    let net: IpNet = s.parse().map_err(|_| {
        (
            format!("Invalid CIDR range {s:?}"),
            "Write a range as an address and a prefix length, like `10.0.0.0/8` or `203.0.113.7/32`.".to_string(),
        )
    })?;
    if net.trunc() != net {
        return Err((
            format!("CIDR range {s:?} has host bits set"),
            format!(
                "The range's address must be its first address: did you mean `{}`?",
                net.trunc()
            ),
        ));
    }
    Ok(())
}

pub fn check_service_range(s: &str) -> Result<(), Problem> {
    check_cidr(s)?;
    match s.parse::<Ipv4Net>() {
        Ok(n) if n.prefix_len() <= 28 => Ok(()),
        _ => Err((
            format!("Service range {s:?} is not usable"),
            "The service range must be an IPv4 range of at least 16 addresses (prefix /28 or shorter), like `10.0.0.0/16`.".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn disk_types() {
        for ok in super::DISK_TYPES {
            assert!(super::check_disk_type(ok).is_ok());
        }
        let (summary, detail) = super::check_disk_type("ssd").unwrap_err();
        assert!(
            summary.contains("\"ssd\"") && detail.contains("`pd-balanced`"),
            "{detail}"
        );
    }

    use super::*;

    #[test]
    fn cidrs() {
        for ok in ["0.0.0.0/0", "10.0.0.0/8", "203.0.113.7/32", "2001:db8::/32"] {
            assert!(check_cidr(ok).is_ok(), "{ok}");
        }
        assert!(
            check_cidr("10.0.0.0")
                .unwrap_err()
                .1
                .contains("prefix length")
        );
        assert!(check_cidr("10.0.0.0/33").is_err());
        assert!(
            check_cidr("10.0.0.1/8")
                .unwrap_err()
                .1
                .contains("10.0.0.0/8")
        );
    }

    #[test]
    fn service_range() {
        assert!(check_service_range("10.0.0.0/16").is_ok());
        assert!(check_service_range("10.0.0.0/30").is_err());
    }
}
