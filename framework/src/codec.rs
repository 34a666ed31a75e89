//! DynamicValue ↔ Value against a schema's type, with failures as provider-bug diagnostics: a client sending
//! bytes that do not match the schema it was given is never the user's fault.

use tfplugin::diag::Diagnostics;
use tfplugin::types::DynamicValue;
use tfplugin::value::{Type, Value, json, msgpack};

pub fn decode(ty: &Type, dv: &DynamicValue, what: &str, diags: &mut Diagnostics) -> Option<Value> {
    let result = match (&dv.msgpack, &dv.json) {
        (Some(b), _) if !b.is_empty() => msgpack::decode(ty, b).map_err(|e| e.to_string()),
        (_, Some(b)) if !b.is_empty() => json::decode(ty, b).map_err(|e| e.to_string()),
        // An absent value is how clients send "null" for some fields (e.g. a destroy's new state).
        _ => Ok(Value::Null),
    };
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            diags.error(
                format!("Could not decode the {what}"),
                format!("The provider could not read the {what} the client sent: {e}. This is a bug in the provider; please report it."),
            );
            None
        }
    }
}

/// [`decode`] for a value the protocol requires to be wholly known (an apply's configuration and prior state, a
/// stored state): an unknown anywhere in it is refused here, before a resource could act on a guess.
pub fn decode_known(
    ty: &Type,
    dv: &DynamicValue,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<Value> {
    let v = decode(ty, dv, what, diags)?;
    if v.is_fully_known() {
        return Some(v);
    }
    diags.error(
        format!("The {what} holds unknown values"),
        format!("The client sent a {what} with values still unknown, where the plugin protocol requires every value to be known. Nothing was changed. This is a bug in the client; run the command again, and report it if it repeats."),
    );
    None
}

pub fn encode(ty: &Type, v: &Value, what: &str, diags: &mut Diagnostics) -> DynamicValue {
    match msgpack::encode(ty, v) {
        Ok(b) => DynamicValue::msgpack(b),
        Err(e) => {
            diags.error(
                format!("Could not encode the {what}"),
                format!("The provider produced a {what} that does not match its schema: {e}. This is a bug in the provider; please report it."),
            );
            DynamicValue::default()
        }
    }
}
