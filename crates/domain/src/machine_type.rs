//! Machine type syntax. GCE has predefined types (`e2-standard-4`, `n1-highmem-8`, `e2-medium`, `f1-micro`) and
//! custom ones (`custom-4-16384`, `n2-custom-8-32768`, with `-ext` for extended memory). A malformed one is caught
//! here, at validate; whether a predefined type exists in a zone is asked of Compute Engine at plan
//! (`ops::placement::check_machine_type`, on `predefined_name`), since on GCE a type a zone lacks stops a master
//! before the call that needs it fails. Custom types are made to measure and are not asked.

use super::Problem;

pub fn check_machine_type(t: &str) -> Result<(), Problem> {
    // A URL or partial URL (`zones/europe-west1-b/machineTypes/e2-standard-2`) names the type at its end.
    let name = t.rsplit('/').next().unwrap_or(t);
    if t.contains('/') && !t.contains("machineTypes/") {
        return Err(bad(t));
    }
    if is_predefined(name) || is_custom(name) {
        Ok(())
    } else {
        Err(bad(t))
    }
}

/// The name to ask Compute Engine about, for a well-formed predefined type (`e2-standard-4`, or a URL ending in
/// one); `None` for a custom type or a malformed one (validate refuses those).
pub fn predefined_name(t: &str) -> Option<&str> {
    let name = t.rsplit('/').next().unwrap_or(t);
    (check_machine_type(t).is_ok() && is_predefined(name)).then_some(name)
}

/// The refusal of a predefined type that a zone does not offer, at the attribute that names it.
pub fn not_offered(name: &str, zone: &str) -> Problem {
    (
        format!("Machine type {name} does not exist in zone {zone}"),
        format!(
            "Compute Engine offers no machine type `{name}` in {zone}, so a master there could not be created (or, in a roll, would be stopped and not started again). Nothing was planned. `gcloud compute machine-types list --zones {zone}` lists the types it offers; a custom type such as `n2-custom-4-16384` is made to measure."
        ),
    )
}

fn bad(t: &str) -> Problem {
    (
        format!("Unknown machine type syntax {t:?}"),
        "Use a predefined type such as `e2-standard-2`, `n2-highmem-4` or `e2-medium`, or a custom one such as `custom-4-16384` or `n2-custom-4-16384` (vCPUs, then memory in MB). `gcloud compute machine-types list` shows them.".into(),
    )
}

fn is_series(s: &str) -> bool {
    // e2, n1, n2, n2d, c2, c3, c3d, m1, t2d, a2, g2, ...
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 4
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter().any(|c| c.is_ascii_digit())
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 6 && s.bytes().all(|c| c.is_ascii_digit()) && !s.starts_with('0')
}

fn is_predefined(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    match parts.as_slice() {
        ["f1", "micro"] | ["g1", "small"] => true,
        [series, "micro" | "small" | "medium"] => is_series(series),
        [series, class, cpus] => {
            is_series(series)
                && matches!(
                    *class,
                    "standard"
                        | "highmem"
                        | "highcpu"
                        | "megamem"
                        | "ultramem"
                        | "hypermem"
                        | "highgpu"
                        | "ultragpu"
                        | "megagpu"
                )
                && is_number(cpus)
        }
        [series, class, cpus, "lssd" | "nolssd" | "metal"] => {
            is_predefined(&format!("{series}-{class}-{cpus}"))
        }
        _ => false,
    }
}

fn is_custom(name: &str) -> bool {
    let name = name.strip_suffix("-ext").unwrap_or(name);
    let parts: Vec<&str> = name.split('-').collect();
    match parts.as_slice() {
        ["custom", cpus, mem] => is_number(cpus) && is_number(mem),
        [series, "custom", cpus, mem] => is_series(series) && is_number(cpus) && is_number(mem),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_real_types() {
        for ok in [
            "e2-standard-2",
            "n1-standard-1",
            "n2d-highmem-96",
            "e2-medium",
            "f1-micro",
            "g1-small",
            "custom-4-16384",
            "n2-custom-8-32768",
            "n2-custom-8-65536-ext",
            "c3-standard-4-lssd",
            "zones/europe-west1-b/machineTypes/e2-standard-2",
        ] {
            assert!(check_machine_type(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn only_well_formed_predefined_types_are_asked_about() {
        let cases: &[(&str, Option<&str>)] = &[
            ("e2-standard-3", Some("e2-standard-3")),
            (
                "zones/europe-west1-b/machineTypes/e2-medium",
                Some("e2-medium"),
            ),
            ("c3-standard-4-lssd", Some("c3-standard-4-lssd")),
            ("n2-custom-8-32768", None),
            ("custom-4-16384", None),
            ("e2-standard", None),
        ];
        for (t, want) in cases {
            assert_eq!(predefined_name(t), *want, "{t}");
        }
        let (summary, detail) = not_offered("e2-standard-3", "us-central1-a");
        assert_eq!(
            summary,
            "Machine type e2-standard-3 does not exist in zone us-central1-a"
        );
        assert!(detail.contains("--zones us-central1-a"), "{detail}");
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "large",
            "e2-standard",
            "e2_standard_2",
            "E2-standard-2",
            "e2-huge-4",
            "custom-4",
            "e2-standard-02",
            "x/y",
        ] {
            let (summary, _) = check_machine_type(bad).unwrap_err();
            assert!(summary.contains("machine type"), "{bad}");
        }
    }
}
