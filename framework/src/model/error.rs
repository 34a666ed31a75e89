//! [`ModelError`]: why a value does not fit a model struct (or the reverse), with the attribute path.
//!
//! Paths are prepended on the way out of the recursion, so errors raised by serde's derived visitors (which know
//! nothing of paths) still end up naming the attribute.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    path: String,
    message: String,
}

impl ModelError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        ModelError {
            path: String::new(),
            message: message.into(),
        }
    }

    /// The attribute path, e.g. `timeouts.create` or `tags[2]`; empty for the whole value.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn within_attr(mut self, name: &str) -> Self {
        let sep = if self.path.is_empty() || self.path.starts_with('[') {
            ""
        } else {
            "."
        };
        self.path = format!("{name}{sep}{}", self.path);
        self
    }

    pub(crate) fn within_index(mut self, i: usize) -> Self {
        let sep = if self.path.is_empty() || self.path.starts_with('[') {
            ""
        } else {
            "."
        };
        self.path = format!("[{i}]{sep}{}", self.path);
        self
    }

    pub(crate) fn within_key(mut self, key: &str) -> Self {
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
        if self.path.is_empty() {
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
