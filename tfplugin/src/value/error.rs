//! Codec errors, each naming the path inside the value where it happened (`.timeouts.create`, `.tags[2]`,
//! `.labels["k"]`), because "expected a string" alone does not say which of fifty attributes is wrong.
//!
//! Paths are built on the way out of the recursion (`within_*`), so the success path pays nothing for them.

use std::fmt;

/// Bytes that do not form a value of the expected type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(PathError);

/// A value that cannot be written as the given type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError(PathError);

#[derive(Debug, Clone, PartialEq, Eq)]
struct PathError {
    path: String,
    message: String,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "at {}: {}", self.path, self.message)
        }
    }
}

macro_rules! path_error {
    ($name:ident) => {
        impl $name {
            pub(crate) fn new(message: impl Into<String>) -> Self {
                $name(PathError {
                    path: String::new(),
                    message: message.into(),
                })
            }
            /// Where in the value it happened, e.g. `.timeouts.create`; empty for the whole value.
            pub fn path(&self) -> &str {
                &self.0.path
            }
            pub fn message(&self) -> &str {
                &self.0.message
            }
            pub(crate) fn within_attr(mut self, name: &str) -> Self {
                self.0.path.insert_str(0, &format!(".{name}"));
                self
            }
            pub(crate) fn within_key(mut self, key: &str) -> Self {
                self.0.path.insert_str(0, &format!("[{key:?}]"));
                self
            }
            pub(crate) fn within_index(mut self, i: usize) -> Self {
                self.0.path.insert_str(0, &format!("[{i}]"));
                self
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
        impl std::error::Error for $name {}
    };
}
path_error!(DecodeError);
path_error!(EncodeError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_reads_outside_in() {
        let e = EncodeError::new("value is unknown")
            .within_attr("create")
            .within_index(0)
            .within_attr("timeouts");
        assert_eq!(e.to_string(), "at .timeouts[0].create: value is unknown");
        assert_eq!(DecodeError::new("x").within_key("a b").path(), "[\"a b\"]");
    }
}
