//! Counting what a replica sends to the database, for benchmarks and tests
//! ([`crate::PgOptions::count_round_trips`]): the pool's connections are opened on a socket
//! wrapper that counts each burst of messages the driver flushes (one round trip: what the
//! connection sent before it waits for answers; statements pipelined together are one) and reads
//! the frontend protocol's message types to count statements (`Execute`, each simple `Query`)
//! and statements prepared (`Parse`). Counted on the wire, not where the code means to send
//! something, so nothing is missed. Off by default: production connections are opened by the
//! driver itself.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use deadpool_postgres::Connect;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::NoTls;
use tokio_postgres::config::Host;

/// What the pool's connections sent so far (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundTrips {
    /// Bursts of messages sent (each then waits for the database's answers).
    pub round_trips: u64,
    /// Statements executed: extended-protocol `Execute`s and simple `Query`s (a simple query of
    /// several statements, like `BEGIN; SET LOCAL ...`, counts once).
    pub statements: u64,
    /// Statements prepared (`Parse`): a cached statement is prepared once per connection.
    pub prepared: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Wire {
    round_trips: AtomicU64,
    statements: AtomicU64,
    prepared: AtomicU64,
}

impl Wire {
    pub fn snapshot(&self) -> RoundTrips {
        RoundTrips {
            round_trips: self.round_trips.load(Relaxed),
            statements: self.statements.load(Relaxed),
            prepared: self.prepared.load(Relaxed),
        }
    }
}

type Connected = Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>;

/// Opens the pool's connections on a counting socket.
pub(crate) struct CountingConnect {
    pub wire: Arc<Wire>,
}

impl Connect for CountingConnect {
    fn connect(&self, config: &tokio_postgres::Config) -> Pin<Box<dyn Future<Output = Connected> + Send + '_>> {
        let config = config.clone();
        let wire = self.wire.clone();
        Box::pin(async move {
            let (client, connection) = match open(&config).await {
                Ok(socket) => {
                    config
                        .connect_raw(
                            Counted { inner: socket, wire, unflushed: false, parser: Parser::default() },
                            NoTls,
                        )
                        .await?
                }
                // The driver's own connect names what failed (there is no other way to build its error).
                Err(_) => {
                    let (client, connection) = config.connect(NoTls).await?;
                    let task = tokio::spawn(async move {
                        let _ = connection.await;
                    });
                    return Ok((client, task));
                }
            };
            let task = tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::warn!(%error, "database connection error");
                }
            });
            Ok((client, task))
        })
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Io for T {}

/// A socket to the first host that answers (TCP with `TCP_NODELAY`, as the driver sets, or a
/// Unix socket).
async fn open(config: &tokio_postgres::Config) -> io::Result<Box<dyn Io>> {
    let ports = config.get_ports();
    let timeout = config.get_connect_timeout().copied().unwrap_or(Duration::from_secs(30));
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no host");
    for (i, host) in config.get_hosts().iter().enumerate() {
        let port = ports.get(i).or_else(|| ports.first()).copied().unwrap_or(5432);
        let opened: io::Result<Box<dyn Io>> = match host {
            Host::Tcp(name) => {
                match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((name.as_str(), port))).await {
                    Ok(Ok(stream)) => stream.set_nodelay(true).map(|()| Box::new(stream) as Box<dyn Io>),
                    Ok(Err(error)) => Err(error),
                    Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
                }
            }
            #[cfg(unix)]
            Host::Unix(dir) => tokio::net::UnixStream::connect(dir.join(format!(".s.PGSQL.{port}")))
                .await
                .map(|stream| Box::new(stream) as Box<dyn Io>),
            #[allow(unreachable_patterns)]
            _ => Err(io::Error::new(io::ErrorKind::Unsupported, "unsupported host")),
        };
        match opened {
            Ok(socket) => return Ok(socket),
            Err(error) => last = error,
        }
    }
    Err(last)
}

struct Counted {
    inner: Box<dyn Io>,
    wire: Arc<Wire>,
    /// Bytes were written since the last flush.
    unflushed: bool,
    parser: Parser,
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = std::task::ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        if written > 0 {
            this.unflushed = true;
            this.parser.feed(&buf[..written], &this.wire);
        }
        Poll::Ready(Ok(written))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
        if std::mem::take(&mut this.unflushed) {
            this.wire.round_trips.fetch_add(1, Relaxed);
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Splits the frontend byte stream into messages: the startup message (no type byte), then
/// `type, length (4 bytes, itself included), body`.
#[derive(Default)]
struct Parser {
    started: bool,
    /// Header bytes of the message being read (up to 5; 4 for the startup message).
    header: Vec<u8>,
    /// Body bytes still to skip.
    skip: usize,
}

impl Parser {
    fn feed(&mut self, mut bytes: &[u8], wire: &Wire) {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let header_len = if self.started { 5 } else { 4 };
            let n = (header_len - self.header.len()).min(bytes.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() < header_len {
                return;
            }
            let at = header_len - 4;
            let length =
                u32::from_be_bytes([self.header[at], self.header[at + 1], self.header[at + 2], self.header[at + 3]]);
            if self.started {
                match self.header[0] {
                    b'E' | b'Q' => {
                        wire.statements.fetch_add(1, Relaxed);
                    }
                    b'P' => {
                        wire.prepared.fetch_add(1, Relaxed);
                    }
                    _ => {}
                }
            }
            self.started = true;
            self.skip = (length as usize).saturating_sub(4);
            self.header.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Parser, Wire};

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn counts_statements_and_prepares_across_split_writes() {
        let mut stream = Vec::new();
        stream.extend_from_slice(&12u32.to_be_bytes());
        stream.extend_from_slice(&[0, 3, 0, 0, 0, 0, 0, 0]);
        for (kind, body) in
            [(b'P', &b"stmt"[..]), (b'B', b"x"), (b'E', b""), (b'S', b""), (b'Q', b"BEGIN; SET LOCAL x")]
        {
            stream.extend(message(kind, body));
        }
        for chunk in [1, 3, 7, 100] {
            let (wire, mut parser) = (Wire::default(), Parser::default());
            for piece in stream.chunks(chunk) {
                parser.feed(piece, &wire);
            }
            let counted = wire.snapshot();
            assert_eq!((counted.statements, counted.prepared), (2, 1), "chunks of {chunk}");
        }
    }
}
