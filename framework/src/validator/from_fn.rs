//! A validator from a plain function over a string, so domain rules (names, CIDRs, zones) stay pure functions in
//! the provider's domain layer and the framework only attaches the attribute path.

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Value;

use super::Validator;

/// The check returns `Err((summary, detail))` for a bad value.
pub type StringCheck = fn(&str) -> Result<(), (String, String)>;

pub struct FnValidator {
    description: &'static str,
    check: StringCheck,
}

/// Checks a string attribute, or every string element of a list/set/map attribute.
pub fn string_check(description: &'static str, check: StringCheck) -> FnValidator {
    FnValidator { description, check }
}

impl Validator for FnValidator {
    fn description(&self) -> String {
        self.description.into()
    }

    fn validate(&self, path: &AttributePath, value: &Value, diags: &mut Diagnostics) {
        match value {
            Value::String(s) => {
                if let Err((summary, detail)) = (self.check)(s) {
                    diags.attr_error(path.clone(), summary, detail);
                }
            }
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let Value::String(s) = item
                        && let Err((summary, detail)) = (self.check)(s)
                    {
                        diags.attr_error(path.clone().then_index(i as i64), summary, detail);
                    }
                }
            }
            Value::Map(items) => {
                for (k, item) in items {
                    if let Value::String(s) = item
                        && let Err((summary, detail)) = (self.check)(s)
                    {
                        diags.attr_error(path.clone().then_key(k.clone()), summary, detail);
                    }
                }
            }
            _ => {}
        }
    }
}
