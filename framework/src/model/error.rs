//! [`ModelError`]: why a value does not fit a model struct (or the reverse), with the attribute path.
//!
//! Paths are prepended on the way out of the recursion, so errors raised by serde's derived visitors (which know
//! nothing of paths) still end up naming the attribute.
//!
//! Most errors are a model that does not mirror its schema: a bug in the provider. A few are the user's: a number
//! the schema accepts (cty numbers are arbitrary) that the model's Rust type cannot hold. Those are
//! [`ModelError::is_input`], and [`ModelError::diagnostic`] reports them at their attribute with the fix.

use std::fmt;

use tfplugin::diag::{AttributePath, Diagnostic, PathStep};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    path: String,
    steps: Vec<PathStep>,
    message: String,
    input: bool,
}

impl ModelError {
    /// A value of a shape the model cannot have been written for: a bug in the provider.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        ModelError {
            path: String::new(),
            steps: Vec::new(),
            message: message.into(),
            input: false,
        }
    }

    /// A value the schema allows but the model's type cannot hold, which the user can fix. `message` completes a
    /// sentence whose subject is the attribute: "must be a whole number between 0 and 65535; 70000 is not".
    pub(crate) fn input(message: impl Into<String>) -> Self {
        ModelError {
            input: true,
            ..ModelError::new(message)
        }
    }

    /// The attribute path, e.g. `timeouts.create` or `tags[2]`; empty for the whole value.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the user can fix this in the configuration (else it is a bug in the provider).
    pub fn is_input(&self) -> bool {
        self.input
    }

    /// The attribute path as a diagnostic path; the root for the whole value.
    pub fn attribute_path(&self) -> AttributePath {
        AttributePath(self.steps.clone())
    }

    /// The diagnostic to show: for an input error, one at the attribute saying what it must be and how to fix it;
    /// else `bug_summary` and a request to report the bug.
    pub fn diagnostic(&self, bug_summary: &str) -> Diagnostic {
        if !self.input {
            return Diagnostic::error(
                bug_summary,
                format!("{self}. This is a bug in the provider; please report it."),
            );
        }
        Diagnostic::error(
            "Invalid number",
            format!(
                "{self}. Set it to a value in that range in the configuration (or in the variable or expression \
                 that gives it)."
            ),
        )
        .at(self.attribute_path())
    }

    pub(crate) fn within_attr(mut self, name: &str) -> Self {
        self.steps.insert(0, PathStep::Attribute(name.to_string()));
        let sep = if self.path.is_empty() || self.path.starts_with('[') {
            ""
        } else {
            "."
        };
        self.path = format!("{name}{sep}{}", self.path);
        self
    }

    pub(crate) fn within_index(mut self, i: usize) -> Self {
        self.steps
            .insert(0, PathStep::Index(i64::try_from(i).unwrap_or(i64::MAX)));
        let sep = if self.path.is_empty() || self.path.starts_with('[') {
            ""
        } else {
            "."
        };
        self.path = format!("[{i}]{sep}{}", self.path);
        self
    }

    pub(crate) fn within_key(mut self, key: &str) -> Self {
        self.steps.insert(0, PathStep::Key(key.to_string()));
        let sep = if self.path.is_empty() || self.path.starts_with('[') {
            ""
        } else {
            "."
        };
        self.path = format!("[{key:?}]{sep}{}", self.path);
        self
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.input {
            if self.path.is_empty() {
                write!(f, "The value {}", self.message)
            } else {
                write!(f, "`{}` {}", self.path, self.message)
            }
        } else if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "attribute `{}`: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ModelError {}

impl serde::de::Error for ModelError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ModelError::new(msg.to_string())
    }
}

impl serde::ser::Error for ModelError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ModelError::new(msg.to_string())
    }
}
