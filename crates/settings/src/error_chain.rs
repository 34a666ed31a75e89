//! An error with every cause beneath it on one line, as users read it in a diagnostic: "error sending request" or
//! "adding etcd learner … failed" alone does not say why; their sources do. A cause already quoted in the text
//! above it is not repeated.

pub fn explain(e: &(dyn std::error::Error + 'static)) -> String {
    with_causes(e.to_string(), e.source())
}

/// `text` followed by `cause` and every cause beneath it, each once: for callers that say the error itself in
/// their own words (the etcd backend gives etcd's gRPC message instead of tonic's status text).
pub fn with_causes(mut text: String, cause: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut cause = cause;
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);
    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;
    #[derive(Debug, thiserror::Error)]
    #[error("quoting: inner")]
    struct Quoting(#[source] Inner);

    #[test]
    fn causes_follow_once() {
        assert_eq!(super::explain(&Outer(Inner)), "outer: inner");
        assert_eq!(super::explain(&Quoting(Inner)), "quoting: inner");
    }
}
