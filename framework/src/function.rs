//! Provider-defined functions (`provider::ha::quorum(n)`): pure functions of their arguments.

use tfplugin::types::{Function as WireFunction, FunctionParameter, StringKind};
use tfplugin::value::{Type, Value};

/// A function's failure: a sentence for the user and the index of the argument at fault.
pub type ArgError = (String, usize);

/// A function over number arguments returning a number, the only shape this provider needs so far.
pub struct NumberFunction {
    pub name: &'static str,
    pub summary: &'static str,
    /// Markdown.
    pub description: &'static str,
    pub params: &'static [(&'static str, &'static str)],
    /// Returns the result, or an error sentence and the index of the argument at fault.
    pub call: fn(&[f64]) -> Result<f64, ArgError>,
}

pub type FunctionHandle = std::sync::Arc<NumberFunction>;

impl NumberFunction {
    pub fn to_wire(&self) -> WireFunction {
        WireFunction {
            parameters: self
                .params
                .iter()
                .map(|(name, description)| FunctionParameter {
                    name: name.to_string(),
                    ty: Type::Number,
                    allow_null_value: false,
                    allow_unknown_values: false,
                    description: description.to_string(),
                    description_kind: StringKind::Markdown,
                })
                .collect(),
            variadic_parameter: None,
            return_type: Type::Number,
            summary: self.summary.into(),
            description: self.description.into(),
            description_kind: StringKind::Markdown,
            deprecation_message: String::new(),
        }
    }

    pub fn invoke(&self, args: &[Value]) -> Result<Value, ArgError> {
        let mut nums = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            match a {
                Value::Number(n) => nums.push(
                    n.as_f64()
                        .ok_or_else(|| ("the number is out of range".to_string(), i))?,
                ),
                _ => return Err(("expected a number".into(), i)),
            }
        }
        (self.call)(&nums).map(|r| Value::Number(r.into()))
    }
}
