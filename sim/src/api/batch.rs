//! The batch endpoint, `POST /batch/compute/v1`: several API calls in one HTTP request, as gcloud sends them
//! whenever one command makes more than one call (`gcloud compute instances delete a b`, polling their operations).
//!
//! The body is `multipart/mixed` (RFC 2046); each part is `Content-Type: application/http` with an optional
//! `Content-ID` and holds one HTTP/1.1 request. The answer is `multipart/mixed` too, one `application/http` part
//! per call, in request order, each holding an HTTP response and the request's Content-ID prefixed with
//! `response-` (`<x+1>` → `<response-x+1>`), which is how gcloud (apitools) pairs answers with its calls.
//!
//! Each inner call goes through the sim's own pipeline ([`super::handle`]), so it is logged, authorised, matched
//! against failpoints and turned into an operation exactly as if it had been sent alone. As on Google's batch
//! endpoint, the outer request's headers apply to every inner call except its `Content-*` ones, and a header the
//! inner call sets itself wins (gcloud puts the token on the outer request only). Calls run concurrently: Google
//! does not promise any order, and a `wait` inside a batch must not hold up the calls after it.

use super::error::ApiError;
use crate::app::Sim;
use crate::reqlog::Entry;
use crate::state::ids;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Where gcloud sends batches: `batch/compute/v1` at the root of the compute endpoint's host.
pub const PATH: &str = "/batch/compute/v1";

/// Google documents at most 1000 calls per Compute batch; gcloud splits longer lists itself.
const MAX_CALLS: usize = 1000;

/// The API method the outer request is logged under (each inner call is logged under its own method too).
const LOG_API: &str = "batch";

/// Header lines in the order given: (name, value).
type Headers = Vec<(String, String)>;

/// One inner call, parsed.
struct Call {
    content_id: Option<String>,
    method: Method,
    path: String,
    query: Option<String>,
    headers: Headers,
    body: Vec<u8>,
}

/// Serves `POST /batch/compute/v1`.
pub async fn handle(sim: Arc<Sim>, method: Method, headers: HeaderMap, body: Bytes) -> Response {
    let started = std::time::Instant::now();
    let response = match serve(&sim, &method, &headers, &body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    sim.reqlog().record(Entry {
        seq: 0,
        at: ids::now_rfc3339(),
        method: method.to_string(),
        path: PATH.to_string(),
        api: LOG_API.to_string(),
        status: response.status().as_u16(),
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        user_agent: headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    });
    response
}

async fn serve(
    sim: &Arc<Sim>,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    if method != Method::POST {
        return Err(ApiError::new(
            405,
            "httpMethodNotAllowed",
            format!("HTTP method {method} is not supported by this URL"),
        ));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let calls = boundary(content_type)
        .ok_or_else(|| "the Content-Type is not multipart/mixed with a boundary".to_string())
        .and_then(|b| split_parts(body, &b))
        .and_then(|parts| {
            parts
                .into_iter()
                .map(parse_call)
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(malformed)?;
    if calls.is_empty() {
        return Err(malformed("the batch holds no calls".into()));
    }
    if calls.len() > MAX_CALLS {
        return Err(ApiError::new(
            400,
            "badRequest",
            format!(
                "A batch request may hold at most {MAX_CALLS} calls; this one holds {}.",
                calls.len()
            ),
        ));
    }
    // Every call's headers are checked before the first one starts, so a refused batch changes nothing.
    let merged = calls
        .iter()
        .map(|c| merge_headers(headers, &c.headers))
        .collect::<Result<Vec<_>, _>>()?;
    let mut running = Vec::with_capacity(calls.len());
    for (call, inner_headers) in calls.into_iter().zip(merged) {
        let task = tokio::spawn(super::handle(
            sim.clone(),
            call.method,
            call.path,
            call.query,
            inner_headers,
            Bytes::from(call.body),
        ));
        running.push((call.content_id, task));
    }
    let boundary = format!("batch_{}", uuid::Uuid::new_v4().simple());
    let mut out = Vec::new();
    for (content_id, task) in running {
        let response = task.await.map_err(|e| {
            ApiError::new(500, "backendError", format!("a batched call failed: {e}"))
        })?;
        write_part(&mut out, &boundary, content_id.as_deref(), response).await?;
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let content_type = format!("multipart/mixed; boundary={boundary}");
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, content_type)], out).into_response())
}

/// A body the endpoint cannot take apart: 400 for the whole batch, before any call runs.
fn malformed(why: String) -> ApiError {
    ApiError::new(
        400,
        "badRequest",
        format!("Failed to parse batch request, error: {why}."),
    )
}

/// The `boundary` parameter of a `multipart/mixed` Content-Type, quoted or not.
fn boundary(content_type: &str) -> Option<String> {
    let mut fields = content_type.split(';');
    let media = fields.next()?.trim();
    if !media.eq_ignore_ascii_case("multipart/mixed") {
        return None;
    }
    fields.find_map(|param| {
        let (name, value) = param.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("boundary") {
            return None;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        // RFC 2046: 1 to 70 characters.
        (!value.is_empty() && value.len() <= 70).then(|| value.to_string())
    })
}

/// Splits a line off `rest`: the line without its `\n` or `\r\n`, and what follows it.
fn line(rest: &[u8]) -> (&[u8], &[u8]) {
    let (text, after) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[rest.len()..]),
    };
    (text.strip_suffix(b"\r").unwrap_or(text), after)
}

/// What a delimiter line says: `--boundary` opens a part, `--boundary--` closes the body; anything else
/// (a line that merely starts with the boundary) is content.
#[derive(PartialEq, Debug)]
enum Delimiter {
    Open,
    Close,
}

fn delimiter(text: &[u8], boundary: &str) -> Option<Delimiter> {
    let rest = text
        .strip_prefix(b"--")?
        .strip_prefix(boundary.as_bytes())?;
    // RFC 2046 allows trailing whitespace ("transport padding") after a delimiter.
    let (close, pad) = match rest.strip_prefix(b"--") {
        Some(pad) => (true, pad),
        None => (false, rest),
    };
    if !pad.iter().all(|b| *b == b' ' || *b == b'\t') {
        return None;
    }
    Some(if close {
        Delimiter::Close
    } else {
        Delimiter::Open
    })
}

/// The body parts between delimiter lines (RFC 2046 §5.1.1). The preamble before the first delimiter and the
/// epilogue after the closing one are ignored, and the line break before a delimiter belongs to the delimiter,
/// not to the part before it. Lines may end in `\n` (gcloud) or `\r\n` (the RFC).
fn split_parts<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<&'a [u8]>, String> {
    let mut parts = Vec::new();
    // Start of the current part, once the first delimiter has been seen.
    let mut open: Option<usize> = None;
    let mut at = 0;
    while at < body.len() {
        let (text, after) = line(&body[at..]);
        let next = body.len() - after.len();
        if let Some(d) = delimiter(text, boundary) {
            if let Some(start) = open {
                // The part ends before the line break that precedes this delimiter.
                let mut end = at;
                if end > start && body[end - 1] == b'\n' {
                    end -= 1;
                    if end > start && body[end - 1] == b'\r' {
                        end -= 1;
                    }
                }
                parts.push(&body[start..end]);
            }
            if d == Delimiter::Close {
                return Ok(parts);
            }
            open = Some(next);
        }
        at = next;
    }
    Err(if open.is_some() {
        "the body ends without its closing boundary".into()
    } else {
        "no part starts with the boundary the Content-Type names".into()
    })
}

/// Header lines up to the first empty line, and what follows it. Continuation lines (starting with a space or
/// a tab) extend the header before them.
fn split_head(mut rest: &[u8]) -> Result<(Headers, &[u8]), String> {
    let mut headers = Headers::new();
    while !rest.is_empty() {
        let (text, after) = line(rest);
        rest = after;
        if text.is_empty() {
            break;
        }
        let text = std::str::from_utf8(text).map_err(|_| "a header is not UTF-8".to_string())?;
        if text.starts_with([' ', '\t']) {
            let last = headers
                .last_mut()
                .ok_or_else(|| format!("a continuation line comes first: {text:?}"))?;
            last.1.push(' ');
            last.1.push_str(text.trim());
            continue;
        }
        let (name, value) = text
            .split_once(':')
            .ok_or_else(|| format!("not a header line: {text:?}"))?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    Ok((headers, rest))
}

fn header_of<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// One part: its MIME headers, then an HTTP request (request line, headers, empty line, body).
fn parse_call(part: &[u8]) -> Result<Call, String> {
    let (mime, http) = split_head(part)?;
    let kind = header_of(&mime, "Content-Type").unwrap_or_default();
    if !kind.eq_ignore_ascii_case("application/http") {
        return Err(format!(
            "a part's Content-Type is {kind:?}, not application/http"
        ));
    }
    let content_id = header_of(&mime, "Content-ID").map(str::to_string);
    let (request_line, rest) = line(http);
    let request_line =
        std::str::from_utf8(request_line).map_err(|_| "a request line is not UTF-8".to_string())?;
    let mut words = request_line.split_whitespace();
    let (Some(method), Some(target)) = (words.next(), words.next()) else {
        return Err(format!("not a request line: {request_line:?}"));
    };
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| format!("not an HTTP method: {method:?}"))?;
    let (headers, mut body) = split_head(rest)?;
    // Python's MIME writer ends a body without a newline; a declared length is still the authority.
    if let Some(n) = header_of(&headers, "Content-Length").and_then(|n| n.parse::<usize>().ok()) {
        body = &body[..n.min(body.len())];
    }
    // The target is a path, or a whole URL whose scheme and host are ignored.
    let target = match target.split_once("://") {
        Some((_, after)) => after.find('/').map_or("/", |i| &after[i..]),
        None => target,
    };
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (target.to_string(), None),
    };
    Ok(Call {
        content_id,
        method,
        path,
        query,
        headers,
        body: body.to_vec(),
    })
}

/// The outer headers minus `Content-*`, overridden by the call's own (its `Content-Length` describes its own
/// body, which is passed as is).
fn merge_headers(outer: &HeaderMap, inner: &[(String, String)]) -> Result<HeaderMap, ApiError> {
    let mut merged: HeaderMap = outer
        .iter()
        .filter(|(n, _)| !n.as_str().starts_with("content-"))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    for (name, value) in inner {
        let bad = || malformed(format!("a batched call has an invalid header: {name:?}"));
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let value = HeaderValue::from_str(value).map_err(|_| bad())?;
        merged.insert(name, value);
    }
    Ok(merged)
}

/// Appends one answer: the part's headers, then the call's status line, Content-Type and body.
async fn write_part(
    out: &mut Vec<u8>,
    boundary: &str,
    content_id: Option<&str>,
    response: Response,
) -> Result<(), ApiError> {
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| {
            ApiError::new(
                500,
                "backendError",
                format!("reading a batched answer: {e}"),
            )
        })?;
    out.extend_from_slice(format!("--{boundary}\r\nContent-Type: application/http\r\n").as_bytes());
    if let Some(id) = content_id {
        // `<x>` → `<response-x>`; an id without angle brackets is prefixed as it is.
        let id = match id.strip_prefix('<').and_then(|i| i.strip_suffix('>')) {
            Some(inner) => format!("<response-{inner}>"),
            None => format!("response-{id}"),
        };
        out.extend_from_slice(format!("Content-ID: {id}\r\n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "\r\nHTTP/1.1 {} {}\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        )
        .as_bytes(),
    );
    if let Some(ct) = content_type {
        out.extend_from_slice(format!("Content-Type: {ct}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_is_read_quoted_or_not() {
        assert_eq!(
            boundary(r#"multipart/mixed; boundary="===abc==""#).as_deref(),
            Some("===abc==")
        );
        assert_eq!(
            boundary("Multipart/Mixed;boundary=batch_x").as_deref(),
            Some("batch_x")
        );
        assert_eq!(boundary("application/json"), None);
        assert_eq!(boundary("multipart/mixed"), None);
    }

    /// What gcloud 528 sends for `instances delete a b` (LF line endings, body-less DELETEs), plus a POST with a
    /// body and CRLF endings.
    #[test]
    fn parts_and_calls_parse_like_gcloud_sends_them() {
        let body = "preamble\n--==b==\nContent-Type: application/http\nMIME-Version: 1.0\n\
            Content-Transfer-Encoding: binary\nContent-ID: <u+0>\n\n\
            DELETE /compute/v1/projects/p/zones/z/instances/a?alt=json HTTP/1.1\n\
            Content-Type: application/json\ncontent-length: 0\nuser-agent: google-cloud-sdk\n\n\n\
            --==b==\r\nContent-Type: application/http\r\nContent-ID: <u+1>\r\n\r\n\
            POST http://h:1/compute/v1/projects/p/global/firewalls HTTP/1.1\r\n\
            Content-Type: application/json\r\n\r\n{}\r\n--==b==x\r\n\
            --==b==--\nepilogue";
        let parts = split_parts(body.as_bytes(), "==b==").unwrap();
        assert_eq!(parts.len(), 2);
        let a = parse_call(parts[0]).unwrap();
        assert_eq!(a.content_id.as_deref(), Some("<u+0>"));
        assert_eq!(a.method, Method::DELETE);
        assert_eq!(a.path, "/compute/v1/projects/p/zones/z/instances/a");
        assert_eq!(a.query.as_deref(), Some("alt=json"));
        assert!(a.body.is_empty());
        assert_eq!(
            header_of(&a.headers, "User-Agent"),
            Some("google-cloud-sdk")
        );
        let b = parse_call(parts[1]).unwrap();
        assert_eq!(b.method, Method::POST);
        assert_eq!(b.path, "/compute/v1/projects/p/global/firewalls");
        assert_eq!(b.query, None);
        // A line that merely starts with the boundary is content.
        assert_eq!(b.body, b"{}\r\n--==b==x");
    }

    #[test]
    fn broken_bodies_are_refused() {
        assert!(
            split_parts(
                b"--b\nContent-Type: application/http\n\nGET / HTTP/1.1\n",
                "b"
            )
            .is_err()
        );
        assert!(split_parts(b"no delimiter at all", "b").is_err());
        let not_http = split_parts(b"--b\nContent-Type: text/plain\n\nhi\n--b--\n", "b").unwrap();
        assert!(parse_call(not_http[0]).is_err());
        let no_line =
            split_parts(b"--b\nContent-Type: application/http\n\n\n--b--\n", "b").unwrap();
        assert!(parse_call(no_line[0]).is_err());
    }

    #[test]
    fn inner_headers_win_and_content_headers_stay_outside() {
        let mut outer = HeaderMap::new();
        outer.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
        outer.insert(header::USER_AGENT, HeaderValue::from_static("outer"));
        outer.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("multipart/mixed"),
        );
        let merged = merge_headers(&outer, &[("User-Agent".into(), "inner".into())]).unwrap();
        assert_eq!(merged[header::AUTHORIZATION], "Bearer t");
        assert_eq!(merged[header::USER_AGENT], "inner");
        assert!(merged.get(header::CONTENT_TYPE).is_none());
    }
}
