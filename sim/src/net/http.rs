//! Just enough HTTP/1.1 for health checks: one request per connection, `Connection: close`, small bodies.
//!
//! The sim speaks HTTP in three places (the API stand-in's /healthz, the plain health endpoint, and probes of etcd's
//! /health and of backends), all tiny and all on loopback; a full HTTP stack would add nothing but weight.

use std::io;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Upper bound on what we read from a peer: health responses are a few bytes, so anything larger is a misbehaving peer.
const MAX_MESSAGE: usize = 64 * 1024;

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `GET path` on `stream` and reads the whole response.
pub async fn get<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    host: &str,
    path: &str,
) -> io::Result<Response> {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: ha-sim\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = match stream.read(&mut chunk).await {
            Ok(n) => n,
            // Some TLS peers close without close_notify; what arrived before that is still the response.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !buf.is_empty() => 0,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "response too large",
            ));
        }
        if let Some(resp) = parse_complete_response(&buf)? {
            return Ok(resp);
        }
    }
    parse_complete_response(&buf)?
        .or_else(|| parse_response_until_eof(&buf))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a full response",
            )
        })
}

/// The head of an HTTP message: start line, headers, and the offset of the body.
type Head = (String, Vec<(String, String)>, usize);

fn split_head(buf: &[u8]) -> Option<Head> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut lines = head.split("\r\n");
    let start = lines.next()?.to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Some((start, headers, end + 4))
}

fn status_of(start: &str) -> io::Result<u16> {
    start
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {start:?}"),
            )
        })
}

/// A response whose body is complete by Content-Length; None while more bytes are needed.
fn parse_complete_response(buf: &[u8]) -> io::Result<Option<Response>> {
    let Some((start, headers, body_at)) = split_head(buf) else {
        return Ok(None);
    };
    let status = status_of(&start)?;
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok());
    match length {
        Some(len) if buf.len() >= body_at + len => Ok(Some(Response {
            status,
            headers,
            body: String::from_utf8_lossy(&buf[body_at..body_at + len]).into_owned(),
        })),
        _ => Ok(None),
    }
}

/// A response without Content-Length ends at EOF.
fn parse_response_until_eof(buf: &[u8]) -> Option<Response> {
    let (start, headers, body_at) = split_head(buf)?;
    Some(Response {
        status: status_of(&start).ok()?,
        headers,
        body: String::from_utf8_lossy(&buf[body_at..]).into_owned(),
    })
}

/// Reads a request head and returns (method, path). The body, if any, is ignored: health endpoints take none.
pub async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<(String, String)> {
    read_request_head(stream)
        .await
        .map(|(method, path, _)| (method, path))
}

/// A request's method, path and headers (name, value).
pub type RequestHead = (String, String, Vec<(String, String)>);

/// Reads a request head with its headers. The body, if any, is ignored.
pub async fn read_request_head<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<RequestHead> {
    read_head(stream).await.map(|(head, _)| head)
}

/// Reads a request head and its body: `Content-Length` bytes, none without the header (the API stand-in's one
/// write, a JSON patch, is small).
pub async fn read_request_with_body<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> io::Result<(RequestHead, Vec<u8>)> {
    let (head, mut body) = read_head(stream).await?;
    let length = head
        .2
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    if length > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "request body too large",
        ));
    }
    // What the head's reads did not bring; `read_exact` says UnexpectedEof when the client closes early.
    let arrived = body.len().min(length);
    body.resize(length, 0);
    stream.read_exact(&mut body[arrived..]).await?;
    Ok((head, body))
}

/// The head, and what arrived of the body with it.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<(RequestHead, Vec<u8>)> {
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 2048];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "client closed before sending a request",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((start, headers, body_at)) = split_head(&buf) {
            let mut parts = start.split_whitespace();
            let method = parts.next().unwrap_or_default().to_string();
            let path = parts.next().unwrap_or("/").to_string();
            return Ok(((method, path, headers), buf[body_at..].to_vec()));
        }
        if buf.len() > MAX_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
    }
}

/// Writes a complete response and closes the write side.
pub async fn respond<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: u16,
    headers: &[(&str, &str)],
    body: &str,
) -> io::Result<()> {
    respond_as(stream, status, "text/plain; charset=utf-8", headers, body).await
}

/// Writes a JSON response, as Kubernetes answers its API paths.
pub async fn respond_json<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: u16,
    headers: &[(&str, &str)],
    body: &str,
) -> io::Result<()> {
    respond_as(stream, status, "application/json", headers, body).await
}

async fn respond_as<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: u16,
    content_type: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    stream.write_all(out.as_bytes()).await?;
    stream.shutdown().await
}
