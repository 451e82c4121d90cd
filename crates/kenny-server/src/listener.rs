//! Accepting HTTP connections under limits a hostile client cannot outlast: a cap on
//! open connections, a deadline for each request's headers (which also ends idle
//! keep-alive connections) and one for its body, a deadline for write progress (a
//! client that stops reading cannot keep its connection), a small header buffer, and a
//! read budget a handler can put on its own connection (the agent tunnel does, until
//! the agent has authenticated).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A request's line and headers must fit in this (nginx's default is the same): every
/// open connection may hold this much before proving anything.
const MAX_HEAD_BYTES: usize = 32 * 1024;
/// After shutdown starts, how long open requests (a streamed chat reply) may take.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Refused connections are logged at most this often, with a count.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);
/// Connections the kernel may hold for us before we accept them. A server that
/// restarts is met by every agent at once; the common default of 128 drops the rest of
/// their SYNs and each dropped one costs its agent a one-second retransmit (a 10,000
/// agent reconnect took 19 s instead of 4 s). The kernel caps this at `somaxconn`.
pub const ACCEPT_BACKLOG: u32 = 4096;

/// Binds `addr` with [`ACCEPT_BACKLOG`] (and `SO_REUSEADDR`, so a restart does not wait
/// for the old connections' TIME_WAIT).
pub fn bind(addr: std::net::SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Open connections at most, agent tunnels included; one more is closed at once.
    pub max_connections: usize,
    /// Time a client has to send a request's headers, counted from when it connects
    /// or from the end of the previous response on the same connection. Its body must
    /// then arrive within [`BODY_TIMEOUT_FACTOR`] times as long.
    pub header_timeout: Duration,
}

/// A request body gets this many header timeouts: kenny's requests are small JSON and
/// forms, so a body still arriving after that is a client holding the connection.
pub const BODY_TIMEOUT_FACTOR: u32 = 3;
/// A write that cannot make progress (the client's receive window and the socket's
/// send buffer are full) for this many header timeouts ends the connection: otherwise
/// a client that asks for something large and never reads it keeps its slot for ever.
pub const WRITE_STALL_FACTOR: u32 = 3;

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 4096,
            header_timeout: Duration::from_secs(20),
        }
    }
}

/// Serves `app` until `shutdown` fires; then stops accepting, gives open requests a
/// short grace period and returns. Each request carries `ConnectInfo<SocketAddr>` and
/// its connection's [`ConnReads`] as extensions.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    tls: Option<Arc<crate::tls::Tls>>,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let mut refusals = RefusalLog::default();
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            // Reap finished connections as we go, so the set stays as big as what is open.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        // No queue: a client holding connections open cannot make newcomers wait
        // behind it, they are told at once (and agents retry with backoff).
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refusals.refused(limits.max_connections, Instant::now());
            drop(tcp);
            continue;
        };
        let reads = ConnReads::default();
        let io = LimitedIo::new(tcp, reads.clone(), slot, limits.header_timeout * WRITE_STALL_FACTOR);
        let app = app.clone();
        let body_timeout = limits.header_timeout * BODY_TIMEOUT_FACTOR;
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let mut req = req.map(|body| axum::body::Body::new(DeadlineBody::new(body, body_timeout)));
            req.extensions_mut().insert(ConnectInfo(peer));
            req.extensions_mut().insert(reads.clone());
            app.clone().oneshot(req)
        });
        let shutdown = shutdown.clone();
        let builder = builder.clone();
        let acceptor = tls.as_ref().map(|t| t.acceptor());
        let handshake_timeout = limits.header_timeout;
        connections.spawn(async move {
            let result = match acceptor {
                None => drive(&builder, io, service, &shutdown).await,
                // The handshake runs here, not in the accept loop, and has the headers'
                // deadline: a client that opens TLS and stalls holds only its own slot.
                Some(acceptor) => match tokio::time::timeout(handshake_timeout, acceptor.accept(io)).await {
                    Ok(Ok(stream)) => drive(&builder, stream, service, &shutdown).await,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                },
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    // Every open connection holds a slot until its socket is dropped (an upgraded
    // agent tunnel too), so all slots back means every connection is gone. What is
    // still open after the grace period (a client that never finished its headers) is
    // cut off: it must not keep the server from stopping.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, slots.acquire_many(all)).await;
    connections.shutdown().await;
}

/// Serves one connection, plain or TLS, until it ends or shutdown asks it to finish.
async fn drive<I, S>(
    builder: &http1::Builder,
    io: I,
    service: S,
    shutdown: &CancellationToken,
) -> Result<(), hyper::Error>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming> + Send,
    S::Future: Send + 'static,
    S::ResBody: Send + 'static,
    <S::ResBody as http_body::Body>::Data: Send,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = builder.serve_connection(TokioIo::new(io), service).with_upgrades();
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => result,
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    }
}

/// Accepting fails for a connection that was reset before we took it (harmless), or
/// when the process is out of file descriptors: then wait, rather than spin.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in 1s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// One warning for the first refusal, then at most one per interval with a count, so
/// a flood of connections cannot flood the log too.
#[derive(Default)]
struct RefusalLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    fn refused(&mut self, cap: usize, now: Instant) {
        self.unlogged += 1;
        if self.last.is_some_and(|t| now.duration_since(t) < REFUSAL_LOG_EVERY) {
            return;
        }
        tracing::warn!(
            refused = self.unlogged,
            cap,
            "connections refused: the server has --max-connections open already"
        );
        self.last = Some(now);
        self.unlogged = 0;
    }
}

/// How many more bytes a connection may read: unlimited unless a handler set a
/// budget. A read past the budget fails, which ends the connection.
#[derive(Debug, Clone)]
pub struct ConnReads(Arc<AtomicU64>);

const UNLIMITED: u64 = u64::MAX;

impl Default for ConnReads {
    fn default() -> Self {
        ConnReads(Arc::new(AtomicU64::new(UNLIMITED)))
    }
}

impl ConnReads {
    /// From now on, at most `bytes` more may be read.
    pub fn limit(&self, bytes: u64) {
        self.0.store(bytes.min(UNLIMITED - 1), Ordering::Release);
    }

    /// No budget any more.
    pub fn lift(&self) {
        self.0.store(UNLIMITED, Ordering::Release);
    }

    /// Whether a budget was set and is used up.
    pub fn exhausted(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }

    fn remaining(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    fn consume(&self, n: u64) {
        // A concurrent `lift` wins: an unlimited budget is never turned back into one.
        let _ = self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
            (left != UNLIMITED).then(|| left.saturating_sub(n))
        });
    }
}

/// A request body that fails once its deadline has passed, however slowly it trickles
/// in (a per-chunk timeout would let a byte every few seconds through).
struct DeadlineBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

/// What a body still arriving at its deadline fails with.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {}s", .0.as_secs())]
pub struct BodyTooSlow(Duration);

impl DeadlineBody {
    fn new(inner: Incoming, limit: Duration) -> Self {
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(limit)),
            limit,
        }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = hyper::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(BodyTooSlow(self.limit).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The server's side of a connection: the socket, its read budget, its slot under the
/// connection cap (given back when the socket is dropped), and the deadline of a write
/// that is waiting for the client to read.
struct LimitedIo {
    tcp: TcpStream,
    reads: ConnReads,
    _slot: OwnedSemaphorePermit,
    write_stall_limit: Duration,
    /// Set when a write first finds the socket full, cleared by any progress.
    write_stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl LimitedIo {
    fn new(tcp: TcpStream, reads: ConnReads, slot: OwnedSemaphorePermit, write_stall_limit: Duration) -> Self {
        LimitedIo {
            tcp,
            reads,
            _slot: slot,
            write_stall_limit,
            write_stall: None,
        }
    }

    /// Passes a write's outcome on, timing how long it has been blocked: past the limit
    /// the write fails, which ends the connection and frees its slot.
    fn stall_checked<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.write_stall = None;
            return polled;
        }
        let limit = self.write_stall_limit;
        let stall = self
            .write_stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        // Polled with the same context as the write: whichever comes first wakes it.
        if stall.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, WriteStalled(limit))));
        }
        Poll::Pending
    }
}

/// What a write the client has not let through for too long fails with.
#[derive(Debug, thiserror::Error)]
#[error("the client read nothing for {}s; closing its connection", .0.as_secs())]
pub struct WriteStalled(Duration);

/// What a read past the budget fails with.
#[derive(Debug, thiserror::Error)]
#[error("the connection sent more than it may before authenticating")]
pub struct ReadBudgetSpent;

impl AsyncRead for LimitedIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let left = this.reads.remaining();
        if left == 0 {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, ReadBudgetSpent)));
        }
        if left >= buf.remaining() as u64 {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.tcp).poll_read(cx, buf))?;
            this.reads.consume((buf.filled().len() - before) as u64);
            return Poll::Ready(Ok(()));
        }
        // Under a budget smaller than the caller's buffer: read no more than is left.
        let mut chunk = [0u8; 4096];
        let n = (left as usize).min(chunk.len());
        let mut limited = ReadBuf::new(&mut chunk[..n]);
        ready!(Pin::new(&mut this.tcp).poll_read(cx, &mut limited))?;
        buf.put_slice(limited.filled());
        this.reads.consume(limited.filled().len() as u64);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for LimitedIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.tcp).poll_write(cx, data);
        this.stall_checked(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs);
        this.stall_checked(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn pair(slots: &Arc<Semaphore>) -> (LimitedIo, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let io = LimitedIo::new(
            tcp,
            ConnReads::default(),
            slots.clone().try_acquire_owned().unwrap(),
            Duration::from_secs(60),
        );
        (io, client)
    }

    /// A reconnect storm: hundreds of agents connect before the server accepts any of
    /// them. Each must be queued by the kernel at once; with a backlog of 128 most
    /// would have their SYN dropped and retry a second later.
    #[tokio::test]
    async fn a_burst_of_connections_is_queued_not_dropped() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4096);
        let burst = 600.min(somaxconn.saturating_sub(8));
        assert!(
            burst > 128,
            "somaxconn {somaxconn} is too small to tell a deep backlog from the default"
        );
        let connects: Vec<_> = (0..burst)
            .map(|_| {
                tokio::spawn(tokio::time::timeout(
                    Duration::from_millis(800),
                    TcpStream::connect(addr),
                ))
            })
            .collect();
        let mut queued = Vec::new();
        for c in connects {
            queued.push(
                c.await
                    .unwrap()
                    .expect("a connection waited for a SYN retransmit")
                    .unwrap(),
            );
        }
        assert_eq!(queued.len(), burst);
        // Nothing was accepted yet; all of them are in the queue.
        let (_first, _) = listener.accept().await.unwrap();
    }

    #[tokio::test]
    async fn a_budget_stops_reads_at_its_size_and_lifting_it_restores_them() {
        let slots = Arc::new(Semaphore::new(1));
        let (mut io, mut client) = pair(&slots).await;
        assert_eq!(slots.available_permits(), 0, "an open connection holds its slot");
        client.write_all(&[7u8; 10_000]).await.unwrap();
        io.reads.limit(6000);
        let mut got = vec![0u8; 10_000];
        let mut read = 0;
        let err = loop {
            match io.read(&mut got[read..]).await {
                Ok(n) => read += n,
                Err(e) => break e,
            }
        };
        assert_eq!(read, 6000, "exactly the budget was read");
        assert!(io.reads.exhausted());
        assert!(err.get_ref().is_some_and(|e| e.is::<ReadBudgetSpent>()), "{err}");
        io.reads.lift();
        io.read_exact(&mut got[..4000]).await.unwrap();
        drop(io);
        assert_eq!(slots.available_permits(), 1, "the slot comes back with the socket");
    }

    #[tokio::test]
    async fn a_client_that_never_reads_loses_its_connection_and_slot() {
        let slots = Arc::new(Semaphore::new(1));
        let (io, client) = pair(&slots).await;
        let mut io = LimitedIo {
            write_stall_limit: Duration::from_millis(200),
            ..io
        };
        let chunk = vec![0u8; 64 * 1024];
        // Writes go through until the socket buffers on both sides are full; then no
        // progress is possible and the stalled write fails.
        let err = loop {
            if let Err(e) = io.write_all(&chunk).await {
                break e;
            }
        };
        assert!(err.get_ref().is_some_and(|e| e.is::<WriteStalled>()), "{err}");
        drop(io);
        assert_eq!(slots.available_permits(), 1, "the slot is free again");
        drop(client);
    }

    #[test]
    fn a_lifted_budget_is_not_brought_back_by_a_late_count() {
        let reads = ConnReads::default();
        reads.consume(100);
        assert_eq!(reads.remaining(), UNLIMITED);
        reads.limit(50);
        reads.consume(80);
        assert!(reads.exhausted());
        reads.lift();
        reads.consume(10);
        assert!(!reads.exhausted());
    }

    #[test]
    fn refusals_are_logged_once_per_interval() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        log.refused(4, t0);
        assert_eq!((log.unlogged, log.last), (0, Some(t0)));
        log.refused(4, t0 + Duration::from_secs(1));
        log.refused(4, t0 + Duration::from_secs(2));
        assert_eq!(log.unlogged, 2, "counted, not logged");
        log.refused(4, t0 + REFUSAL_LOG_EVERY);
        assert_eq!(log.unlogged, 0);
    }
}
