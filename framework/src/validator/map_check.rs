//! A validator from a plain function over a whole `map(string)`, for rules about keys and about the map as a whole
//! (GCE labels: key syntax, reserved keys, how many), which a per-element string check cannot see.

use std::collections::BTreeMap;

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

use super::Validator;

/// One problem: the key it is about (`None`: the attribute as a whole), a summary and a detail.
pub type MapProblem = (Option<String>, String, String);
/// The check returns every problem it finds, so the user fixes them in one round.
pub type MapCheck = fn(&BTreeMap<String, String>) -> Vec<MapProblem>;

pub struct MapValidator {
    description: &'static str,
    check: MapCheck,
}

/// Checks a `map(string)` attribute as a whole; each problem is reported at `attribute["key"]`.
pub fn map_check(description: &'static str, check: MapCheck) -> MapValidator {
    MapValidator { description, check }
}

impl Validator for MapValidator {
    fn description(&self) -> String {
        self.description.into()
    }

    fn validate(&self, path: &AttributePath, value: &Value, diags: &mut Diagnostics) {
        let Value::Map(entries) = value else { return };
        // Keys are always known; a value not yet known (or null) is checked as empty, which no value rule
        // refuses, so its key is still checked now and the value again at apply.
        let map: BTreeMap<String, String> = entries
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => (k.clone(), s.clone()),
                _ => (k.clone(), String::new()),
            })
            .collect();
        for (key, summary, detail) in (self.check)(&map) {
            let at = match key {
                Some(k) => path.clone().then_key(k),
                None => path.clone(),
            };
            diags.attr_error(at, summary, detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_uppercase_keys(m: &BTreeMap<String, String>) -> Vec<MapProblem> {
        let mut out: Vec<MapProblem> = m
            .keys()
            .filter(|k| k.chars().any(char::is_uppercase))
            .map(|k| {
                (
                    Some(k.clone()),
                    "upper".to_string(),
                    "lowercase it".to_string(),
                )
            })
            .collect();
        if m.len() > 2 {
            out.push((None, "too many".into(), "fewer".into()));
        }
        out
    }

    #[test]
    fn reports_each_problem_at_its_key_and_the_whole_map_at_the_attribute() {
        let v = |s: &str| Value::String(s.into());
        let value = Value::Map(
            [
                ("Team".to_string(), v("x")),
                ("ok".to_string(), Value::Unknown(Default::default())),
                ("Env".to_string(), v("y")),
            ]
            .into(),
        );
        let mut diags = Diagnostics::default();
        map_check("test", no_uppercase_keys).validate(
            &AttributePath::attr("labels"),
            &value,
            &mut diags,
        );
        let paths: Vec<String> = diags
            .iter()
            .map(|d| {
                d.attribute
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(paths, [r#"labels["Env"]"#, r#"labels["Team"]"#, "labels"]);
    }
}
