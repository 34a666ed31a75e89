//! Resource ids, known at plan time so references resolve early: a cluster is `<project>/<region>/<name>` and a
//! replica `<project>/<zone>/<name>`, the same strings `terraform import` takes.

pub fn cluster_id(project: &str, region: &str, name: &str) -> String {
    format!("{project}/{region}/{name}")
}

pub fn replica_id(project: &str, zone: &str, name: &str) -> String {
    format!("{project}/{zone}/{name}")
}

/// Splits an id into its three parts, or explains the expected shape.
pub fn parse3<'a>(id: &'a str, shape: &str) -> Result<(&'a str, &'a str, &'a str), String> {
    let parts: Vec<&str> = id.split('/').collect();
    match parts.as_slice() {
        [a, b, c] if !a.is_empty() && !b.is_empty() && !c.is_empty() => Ok((a, b, c)),
        _ => Err(format!("The id {id:?} is not of the form {shape}.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let id = cluster_id("p", "europe-west1", "prod");
        assert_eq!(parse3(&id, "").unwrap(), ("p", "europe-west1", "prod"));
        assert!(
            parse3("p/prod", "<project>/<region>/<name>")
                .unwrap_err()
                .contains("<project>/<region>/<name>")
        );
        assert!(parse3("p//x", "").is_err());
    }
}
