//! List `filter` expressions: a conjunction of comparisons, as GCE's list methods take them:
//! `name = "m1"`, `(labels.role = "master") AND (status != "TERMINATED")`, `name eq m1`.
//!
//! Fields are paths into the resource's JSON (`labels.role`, `status`, `networkTier`); values compare as
//! strings, exactly (GCE's `eq`/`ne` take regular expressions; the sim compares literally). `OR` and other
//! operators are refused with 400, so a client never silently gets a wider list than it asked for.

use serde_json::Value;

#[derive(Debug, PartialEq)]
pub struct Term {
    path: Vec<String>,
    equal: bool,
    value: String,
}

/// Splits `(a) AND (b)` / `(a) (b)` into its parenthesised terms; an expression without parentheses is one term.
fn groups(f: &str) -> Result<Vec<&str>, String> {
    let f = f.trim();
    if !f.contains('(') {
        return if f.contains(')') {
            Err("unbalanced ')'".into())
        } else {
            Ok(vec![f])
        };
    }
    let (mut out, mut depth, mut start, mut between) = (Vec::new(), 0usize, 0, String::new());
    for (i, c) in f.char_indices() {
        match c {
            '(' if depth == 0 => {
                start = i + 1;
                depth = 1;
            }
            '(' => depth += 1,
            ')' if depth == 0 => return Err("unbalanced ')'".into()),
            ')' => {
                depth -= 1;
                if depth == 0 {
                    out.push(&f[start..i]);
                }
            }
            c if depth == 0 => between.push(c),
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    match between.split_whitespace().find(|w| *w != "AND") {
        Some(w) => Err(format!(
            "unsupported operator '{w}' between terms (only AND)"
        )),
        None => Ok(out),
    }
}

fn term(t: &str) -> Result<Term, String> {
    let t = t.trim();
    let ops = [("!=", false), ("=", true), (" ne ", false), (" eq ", true)];
    let (at, op, equal) = ops
        .iter()
        .filter_map(|(op, eq)| t.find(op).map(|i| (i, *op, *eq)))
        .min_by_key(|(i, _, _)| *i)
        .ok_or_else(|| format!("'{t}' is not a comparison"))?;
    let field = t[..at].trim();
    let value = t[at + op.len()..].trim().trim_matches('"').to_string();
    let valid = !field.is_empty()
        && field.split('.').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if !valid {
        return Err(format!("'{field}' is not a field"));
    }
    Ok(Term {
        path: field.split('.').map(str::to_string).collect(),
        equal,
        value,
    })
}

pub fn parse(f: &str) -> Result<Vec<Term>, String> {
    if f.trim().is_empty() {
        return Ok(Vec::new());
    }
    groups(f)?.into_iter().map(term).collect()
}

/// Whether `item` satisfies every term. A missing field compares as unequal to any value.
pub fn matches(terms: &[Term], item: &Value) -> bool {
    terms.iter().all(|t| {
        let found = t.path.iter().try_fold(item, |v, p| v.get(p));
        let text = match found {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(v) => Some(v.to_string()),
        };
        (text.as_deref() == Some(t.value.as_str())) == t.equal
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_select_like_gce() {
        let vm = json!({"name": "m1", "status": "RUNNING", "labels": {"role": "master", "cluster": "prod"}, "id": "7"});
        let cases = [
            ("", true),
            ("name = \"m1\"", true),
            ("name eq m1", true),
            ("name != m1", false),
            (
                "(labels.role = \"master\") AND (labels.cluster = \"prod\")",
                true,
            ),
            (
                "(labels.role = \"master\") (labels.cluster = \"dev\")",
                false,
            ),
            ("(labels.missing = \"x\")", false),
            ("(labels.missing != \"x\")", true),
            ("id = 7", true),
            ("status ne TERMINATED", true),
        ];
        for (f, want) in cases {
            let terms = parse(f).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert_eq!(matches(&terms, &vm), want, "{f}");
        }
        for bad in [
            "(name = a) OR (name = b)",
            "name",
            "(name = a",
            "name = a)",
            " = a",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
