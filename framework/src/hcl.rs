//! Values written as HCL literals, the way a user would type them in configuration. Descriptions say
//! "Defaults to `…`" with this text, so the documentation shows `["0.0.0.0/0"]` rather than Rust's debug form.

use tfplugin::value::Value;

/// The HCL literal of a known value: `"pd-ssd"`, `true`, `20`, `["0.0.0.0/0"]`, `{ env = "prod" }`, `null`.
pub fn literal(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        // A default is always known; say so plainly rather than invent syntax.
        Value::Unknown(_) => "(known after apply)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quoted(s),
        Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
            let items: Vec<String> = items.iter().map(literal).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Map(entries) | Value::Object(entries) => {
            if entries.is_empty() {
                return "{}".into();
            }
            let entries: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{} = {}", key(k), literal(v)))
                .collect();
            format!("{{ {} }}", entries.join(", "))
        }
        Value::Dynamic(typed) => literal(&typed.value),
    }
}

/// A quoted HCL string: quotes and backslashes escaped, and `${`/`%{` doubled so they stay literal text.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A map key: bare when it is an HCL identifier, quoted otherwise.
fn key(k: &str) -> String {
    let identifier = k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if identifier { k.to_string() } else { quoted(k) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    #[test]
    fn writes_values_as_a_user_types_them() {
        let cases = [
            (Value::Bool(true), "true"),
            (Value::Number(20.into()), "20"),
            (s("pd-ssd"), "\"pd-ssd\""),
            (Value::List(vec![s("0.0.0.0/0")]), "[\"0.0.0.0/0\"]"),
            (Value::List(vec![s("a"), s("b")]), "[\"a\", \"b\"]"),
            (Value::Set(vec![]), "[]"),
            (
                Value::Map([("env".to_string(), s("prod")), ("a b".to_string(), s("x"))].into()),
                "{ \"a b\" = \"x\", env = \"prod\" }",
            ),
            (Value::Map(Default::default()), "{}"),
            (Value::Null, "null"),
        ];
        for (value, hcl) in cases {
            assert_eq!(literal(&value), hcl, "{value:?}");
        }
    }

    #[test]
    fn escapes_what_hcl_would_interpret() {
        assert_eq!(literal(&s("a\"b\\c")), r#""a\"b\\c""#);
        assert_eq!(literal(&s("${x} %{y} $z")), r#""$${x} %%{y} $z""#);
        assert_eq!(literal(&s("a\nb")), r#""a\nb""#);
    }
}
