//! Schemas declared once: attributes with their type, mode, description, default, plan modifiers and validators.
//! The same declaration produces the wire schema, drives planning and runs validation, so they cannot disagree.

use std::sync::Arc;

use tfplugin::types::{self, StringKind};
use tfplugin::value::{Type, Value};

use crate::planmodifier::PlanModifier;
use crate::validator::Validator;

/// Whether the user sets an attribute, the provider does, or either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Required,
    Optional,
    /// Set by the provider only.
    Computed,
    /// Set by the user, or by the provider when the user leaves it out.
    OptionalComputed,
}

#[derive(Clone)]
pub struct Attribute {
    pub name: &'static str,
    pub ty: Type,
    pub mode: Mode,
    /// Markdown.
    pub description: String,
    pub sensitive: bool,
    /// Read from configuration, never planned or stored (crate::write_only).
    pub write_only: bool,
    /// The value planned when the user leaves an Optional+Computed attribute out.
    pub default: Option<Value>,
    pub plan_modifiers: Vec<Arc<dyn PlanModifier>>,
    pub validators: Vec<Arc<dyn Validator>>,
}

impl Attribute {
    fn new(name: &'static str, ty: Type) -> Self {
        Self {
            name,
            ty,
            mode: Mode::Optional,
            description: String::new(),
            sensitive: false,
            write_only: false,
            default: None,
            plan_modifiers: Vec::new(),
            validators: Vec::new(),
        }
    }
    pub fn string(name: &'static str) -> Self {
        Self::new(name, Type::String)
    }
    pub fn bool(name: &'static str) -> Self {
        Self::new(name, Type::Bool)
    }
    pub fn number(name: &'static str) -> Self {
        Self::new(name, Type::Number)
    }
    pub fn typed(name: &'static str, ty: Type) -> Self {
        Self::new(name, ty)
    }
    pub fn required(mut self) -> Self {
        self.mode = Mode::Required;
        self
    }
    pub fn optional(mut self) -> Self {
        self.mode = Mode::Optional;
        self
    }
    pub fn computed(mut self) -> Self {
        self.mode = Mode::Computed;
        self
    }
    pub fn optional_computed(mut self) -> Self {
        self.mode = Mode::OptionalComputed;
        self
    }
    pub fn description(mut self, md: impl Into<String>) -> Self {
        self.description = md.into();
        self
    }
    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }
    /// Write-only (Terraform 1.11+): the resource reads it from configuration at plan and apply, and no plan or
    /// state holds it (`crate::write_only`). For secret material a user supplies. Not computed, no default.
    pub fn write_only(mut self) -> Self {
        self.write_only = true;
        self
    }
    /// A default makes the attribute Optional+Computed: the plan shows the default when the user sets nothing.
    pub fn default(mut self, v: Value) -> Self {
        self.default = Some(v);
        self.mode = Mode::OptionalComputed;
        self
    }
    pub fn modifier(mut self, m: impl PlanModifier + 'static) -> Self {
        self.plan_modifiers.push(Arc::new(m));
        self
    }
    pub fn validator(mut self, v: impl Validator + 'static) -> Self {
        self.validators.push(Arc::new(v));
        self
    }

    pub fn is_computed(&self) -> bool {
        matches!(self.mode, Mode::Computed | Mode::OptionalComputed)
    }

    fn to_wire(&self) -> types::Attribute {
        let mut description = self.description.clone();
        if let Some(d) = &self.default {
            description.push_str(&format!(" Defaults to `{}`.", crate::hcl::literal(d)));
        }
        types::Attribute {
            name: self.name.to_string(),
            ty: self.ty.clone(),
            description,
            description_kind: StringKind::Markdown,
            required: self.mode == Mode::Required,
            optional: matches!(self.mode, Mode::Optional | Mode::OptionalComputed),
            computed: self.is_computed(),
            sensitive: self.sensitive,
            deprecated: false,
            write_only: self.write_only,
        }
    }
}

/// A nested block with single nesting, such as `timeouts { create = "30m" }`.
#[derive(Clone)]
pub struct SingleBlock {
    pub name: &'static str,
    pub description: String,
    pub attributes: Vec<Attribute>,
}

#[derive(Clone)]
pub struct Schema {
    pub version: i64,
    /// Markdown.
    pub description: String,
    pub attributes: Vec<Attribute>,
    pub blocks: Vec<SingleBlock>,
}

impl Schema {
    pub fn new(description: impl Into<String>) -> Self {
        Self {
            version: 0,
            description: description.into(),
            attributes: Vec::new(),
            blocks: Vec::new(),
        }
    }
    pub fn attribute(mut self, a: Attribute) -> Self {
        self.attributes.push(a);
        self
    }
    pub fn block(mut self, b: SingleBlock) -> Self {
        self.blocks.push(b);
        self
    }

    pub fn find(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }

    /// The object type of a whole resource (or provider config) value.
    pub fn value_type(&self) -> Type {
        let mut attrs: Vec<(String, Type)> = self
            .attributes
            .iter()
            .map(|a| (a.name.to_string(), a.ty.clone()))
            .collect();
        for b in &self.blocks {
            attrs.push((b.name.to_string(), block_type(&b.attributes)));
        }
        Type::object(attrs)
    }

    pub fn to_wire(&self) -> types::Schema {
        types::Schema {
            version: self.version,
            block: types::Block {
                version: self.version,
                attributes: self.attributes.iter().map(Attribute::to_wire).collect(),
                block_types: self
                    .blocks
                    .iter()
                    .map(|b| types::NestedBlock {
                        type_name: b.name.to_string(),
                        block: types::Block {
                            attributes: b.attributes.iter().map(Attribute::to_wire).collect(),
                            description: b.description.clone(),
                            description_kind: StringKind::Markdown,
                            ..Default::default()
                        },
                        nesting: types::NestingMode::Single,
                        min_items: 0,
                        max_items: 0,
                    })
                    .collect(),
                description: self.description.clone(),
                description_kind: StringKind::Markdown,
                deprecated: false,
            },
        }
    }
}

fn block_type(attrs: &[Attribute]) -> Type {
    Type::object(attrs.iter().map(|a| (a.name.to_string(), a.ty.clone())))
}

/// The conventional `timeouts` block: Go-duration strings per operation, as in Google's provider.
pub fn timeouts_block(ops: &[&'static str], defaults: &str) -> SingleBlock {
    SingleBlock {
        name: "timeouts",
        description: format!(
            "How long each operation may take, as a duration such as `30m` or `1h`. Defaults: {defaults}."
        ),
        attributes: ops
            .iter()
            .map(|op| {
                Attribute::string(op)
                    .optional()
                    .description(format!("Time limit for {op}."))
                    .validator(crate::validator::duration())
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(a: Attribute) -> String {
        a.to_wire().description
    }

    #[test]
    fn the_default_is_described_in_hcl() {
        let list = Attribute::typed("ranges", Type::list(Type::String))
            .default(Value::List(vec![Value::String("0.0.0.0/0".into())]))
            .description("Ranges.");
        assert_eq!(described(list), "Ranges. Defaults to `[\"0.0.0.0/0\"]`.");
        let string = Attribute::string("disk")
            .default(Value::String("pd-ssd".into()))
            .description("Disk.");
        assert_eq!(described(string), "Disk. Defaults to `\"pd-ssd\"`.");
        let flag = Attribute::bool("on")
            .default(Value::Bool(true))
            .description("On.");
        assert_eq!(described(flag), "On. Defaults to `true`.");
        let size = Attribute::number("gb")
            .default(Value::Number(20.into()))
            .description("Size.");
        assert_eq!(described(size), "Size. Defaults to `20`.");
    }
}
