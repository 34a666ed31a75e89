//! Accepting connections: TCP on loopback, the TLS handshake (when AutoMTLS is on), and counting authenticated
//! connections for [`Lifetime`]. The result is a stream of ready connections for tonic.
//!
//! The TLS handshake runs in its own task per connection, so a peer that stalls or fails it delays nobody, and only
//! a connection that passed it reaches gRPC. tonic implements its `Connected` trait for rustls streams only with
//! its own TLS features on; we do TLS ourselves, so [`Conn`] implements it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

use super::lifetime::{ConnectionGuard, Lifetime};

/// A peer that has not finished the TLS handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Back-off after a failed `accept` (e.g. out of file descriptors), so the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(20);

/// Byte stream of one connection, TLS or plain.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// An accepted, authenticated connection. It counts as live until tonic drops it.
pub(crate) struct Conn {
    io: Box<dyn Io>,
    _guard: ConnectionGuard,
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Accepts connections on `listener` until the returned stream is dropped. With `tls`, only peers that complete
/// the mutual-TLS handshake come out; without it (the client disabled plugin TLS), every loopback peer does.
pub(crate) fn incoming(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    lifetime: Lifetime,
) -> ReceiverStream<Result<Conn, io::Error>> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(ACCEPT_RETRY).await;
                        continue;
                    }
                },
                // tonic dropped the stream: the server is gone, stop accepting.
                _ = tx.closed() => return,
            };
            // gRPC sends many small frames; Nagle would add latency to each request.
            let _ = tcp.set_nodelay(true);
            let tx = tx.clone();
            let tls = tls.clone();
            let lifetime = lifetime.clone();
            tokio::spawn(async move {
                let io: Box<dyn Io> = match tls {
                    None => Box::new(tcp),
                    Some(acceptor) => {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                            Ok(Ok(stream)) => Box::new(stream),
                            Ok(Err(e)) => {
                                tracing::warn!(%peer, error = %e, "refused a connection: TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::warn!(%peer, "refused a connection: TLS handshake timed out");
                                return;
                            }
                        }
                    }
                };
                tracing::debug!(%peer, "client connected");
                let conn = Conn {
                    io,
                    _guard: lifetime.connection_opened(),
                };
                // Fails only when the server is gone; the connection is then dropped, which is right.
                let _ = tx.send(Ok(conn)).await;
            });
        }
    });
    ReceiverStream::new(rx)
}
