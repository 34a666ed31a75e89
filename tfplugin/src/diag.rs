//! Diagnostics: the channel for everything a user should read. A gRPC status is only for transport faults.

use std::fmt;

/// How bad a diagnostic is. There is deliberately no "invalid" (0) variant: clients print severity 0 as a bare
/// line and do not fail the command, so it must never be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One step of a path into a value: an attribute of an object, or an element of a list/set/map.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathStep {
    Attribute(String),
    Key(String),
    Index(i64),
}

/// A path to an attribute, e.g. `timeouts.create`. Clients use it to print "with ha_master_replica.a," and the
/// source line that set the value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AttributePath(pub Vec<PathStep>);

impl AttributePath {
    pub fn root() -> Self {
        Self(Vec::new())
    }
    /// A path to a top-level attribute.
    pub fn attr(name: impl Into<String>) -> Self {
        Self(vec![PathStep::Attribute(name.into())])
    }
    pub fn then_attr(mut self, name: impl Into<String>) -> Self {
        self.0.push(PathStep::Attribute(name.into()));
        self
    }
    pub fn then_key(mut self, key: impl Into<String>) -> Self {
        self.0.push(PathStep::Key(key.into()));
        self
    }
    pub fn then_index(mut self, index: i64) -> Self {
        self.0.push(PathStep::Index(index));
        self
    }
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for AttributePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                PathStep::Attribute(a) if i == 0 => write!(f, "{a}")?,
                PathStep::Attribute(a) => write!(f, ".{a}")?,
                PathStep::Key(k) => write!(f, "[{k:?}]")?,
                PathStep::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A message for the user: a sentence-sized summary, a detail that says what to do, and where it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub summary: String,
    pub detail: String,
    pub attribute: Option<AttributePath>,
}

impl Diagnostic {
    pub fn error(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            summary: summary.into(),
            detail: detail.into(),
            attribute: None,
        }
    }
    pub fn warning(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            summary: summary.into(),
            detail: detail.into(),
            attribute: None,
        }
    }
    /// Attaches (or replaces) the attribute path, where it becomes known.
    pub fn at(mut self, path: AttributePath) -> Self {
        self.attribute = if path.is_root() { None } else { Some(path) };
        self
    }
}

/// An ordered list of diagnostics with the helpers every RPC needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a diagnostic unless an identical one is already there (validation may run twice per plan).
    pub fn push(&mut self, d: Diagnostic) {
        if !self.0.contains(&d) {
            self.0.push(d);
        }
    }
    pub fn extend(&mut self, other: Diagnostics) {
        for d in other.0 {
            self.push(d);
        }
    }
    pub fn error(&mut self, summary: impl Into<String>, detail: impl Into<String>) {
        self.push(Diagnostic::error(summary, detail));
    }
    pub fn attr_error(
        &mut self,
        path: AttributePath,
        summary: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.push(Diagnostic::error(summary, detail).at(path));
    }
    pub fn warning(&mut self, summary: impl Into<String>, detail: impl Into<String>) {
        self.push(Diagnostic::warning(summary, detail));
    }
    pub fn has_error(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Self(vec![d])
    }
}
