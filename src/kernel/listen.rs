//! Accepting connections within bounds, for every listener koord has (TCP for HTTP, unix
//! sockets for gRPC): at most `max` connections at once (beyond, new ones wait in the
//! kernel's backlog), and an accept that fails (out of file descriptors, most likely)
//! backs off instead of spinning, logging once per interval with a count.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A Go listen address (`:9316` means every interface, as in Go's `net.Listen`).
pub fn go_addr(v: &str) -> Result<std::net::SocketAddr, String> {
    let full = match v.starts_with(':') {
        true => format!("0.0.0.0{v}"),
        false => v.to_string(),
    };
    full.parse().map_err(|_| format!("{v:?} is not host:port"))
}

/// Half the open-file limit, at most 8192: the rest stays for storage, cgroups and clients.
pub fn default_max_connections() -> usize {
    (crate::os::tuning::nofile_soft_limit() / 2).clamp(64, 8192) as usize
}

/// For the node-local gRPC sockets (the runtime proxy, the koordlet's hooks): their callers
/// (the kubelet, the proxy) hold a few connections each; an idle HTTP/2 connection costs
/// ~15 KiB, so 256 bound them to a few MiB.
pub fn local_grpc_max_connections() -> usize {
    default_max_connections().min(256)
}

/// The connections of a node-local gRPC socket, bounded as [`local_grpc_max_connections`]
/// says, as tonic serves them; `name` is for the log.
pub fn local_grpc_incoming<L: Listener>(
    listener: L,
    name: &'static str,
) -> impl Stream<Item = io::Result<Conn<L::Io>>> + Send + 'static {
    Acceptor::new(listener, local_grpc_max_connections(), name).into_stream()
}

/// A listener koord accepts on.
pub trait Listener: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Io>>;
}

impl Listener for TcpListener {
    type Io = TcpStream;
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<TcpStream>> {
        TcpListener::poll_accept(self, cx).map_ok(|(s, _)| {
            let _ = s.set_nodelay(true);
            s
        })
    }
}

impl Listener for UnixListener {
    type Io = UnixStream;
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<UnixStream>> {
        UnixListener::poll_accept(self, cx).map_ok(|(s, _)| s)
    }
}

/// Every listener's connections together stay within half the open-file limit: each
/// listener's own cap alone would let them add up past it.
fn fd_budget() -> Arc<Semaphore> {
    static BUDGET: std::sync::OnceLock<Arc<Semaphore>> = std::sync::OnceLock::new();
    BUDGET
        .get_or_init(|| Arc::new(Semaphore::new(default_max_connections())))
        .clone()
}

/// A connection may be closed to make room for a new one once it has been idle this long.
pub const EVICT_IDLE: Duration = Duration::from_secs(10);

/// When a connection last moved a byte, and whether it is asked to close.
struct Activity {
    since: Instant,
    last_ms: AtomicU64,
    evicted: AtomicBool,
    reader: Mutex<Option<Waker>>,
}

impl Activity {
    fn touch(&self) {
        let ms = self.since.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let now = self.since.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }

    /// Ends the connection: its next read sees end of file, its writes fail.
    fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        let waker = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// An accepted connection; its slots are given back when it is dropped.
pub struct Conn<S> {
    io: S,
    activity: Arc<Activity>,
    _slot: Option<OwnedSemaphorePermit>,
    _budget: Option<OwnedSemaphorePermit>,
}

impl<S> Conn<S> {
    pub fn get_ref(&self) -> &S {
        &self.io
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Conn<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.activity.evicted.load(Ordering::SeqCst) {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        match &r {
            Poll::Ready(Ok(())) if buf.filled().len() > before => self.activity.touch(),
            Poll::Pending => {
                *self
                    .activity
                    .reader
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
            }
            _ => {}
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Conn<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.activity.evicted.load(Ordering::SeqCst) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.activity.evicted.load(Ordering::SeqCst) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for Conn<S> {
    type ConnectInfo = S::ConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Accepts on `listener` within the bounds above; `name` says which listener in logs.
/// When every slot is taken, the connection idle the longest (at least `evict_idle`) is
/// closed to make room: idle clients cannot keep out the ones with work to do.
pub struct Acceptor<L> {
    listener: L,
    slots: Arc<Semaphore>,
    name: &'static str,
    failures: u64,
    logged: Option<Instant>,
    /// The connections handed out (those since closed are pruned as the list grows).
    open: Vec<std::sync::Weak<Activity>>,
    max: usize,
    evict_idle: Duration,
}

impl<L: Listener> Acceptor<L> {
    pub fn new(listener: L, max_connections: usize, name: &'static str) -> Acceptor<L> {
        Acceptor {
            listener,
            slots: Arc::new(Semaphore::new(max_connections.max(1))),
            name,
            failures: 0,
            logged: None,
            open: Vec::new(),
            max: max_connections.max(1),
            evict_idle: EVICT_IDLE,
        }
    }

    /// How long a connection must be idle before it may be closed for a new one.
    pub fn evict_after(mut self, idle: Duration) -> Self {
        self.evict_idle = idle;
        self
    }

    /// A permit of `sem`, closing idle connections while none is free.
    async fn permit(&mut self, sem: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
        loop {
            if let Ok(p) = sem.clone().try_acquire_owned() {
                return Some(p);
            }
            self.evict_one();
            let wait = (self.evict_idle / 4).clamp(Duration::from_millis(10), BACKOFF_MAX);
            // The semaphore is never closed, so a permit always comes.
            if let Ok(p) = tokio::time::timeout(wait, sem.clone().acquire_owned()).await {
                return p.ok();
            }
        }
    }

    fn evict_one(&mut self) {
        self.open.retain(|w| w.strong_count() > 0);
        let idlest = self
            .open
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter(|a| !a.evicted.load(Ordering::SeqCst))
            .max_by_key(|a| a.idle());
        if let Some(a) = idlest.filter(|a| a.idle() >= self.evict_idle) {
            tracing::debug!(
                listener = self.name,
                idle_ms = a.idle().as_millis() as u64,
                "closing an idle connection to make room"
            );
            a.evict();
        }
    }

    /// The next connection: waits for a free slot first, and never returns an error.
    pub async fn accept(&mut self) -> Conn<L::Io> {
        let slot = self.permit(&self.slots.clone()).await;
        let budget = self.permit(&fd_budget()).await;
        let mut delay = BACKOFF_MIN;
        loop {
            match futures::future::poll_fn(|cx| self.listener.poll_accept(cx)).await {
                Ok(io) => {
                    self.failures = 0;
                    let activity = Arc::new(Activity {
                        since: Instant::now(),
                        last_ms: AtomicU64::new(0),
                        evicted: AtomicBool::new(false),
                        reader: Mutex::new(None),
                    });
                    // At most `max` are open, so pruning at twice that keeps the list
                    // bounded at a cost of O(1) per accept.
                    if self.open.len() >= 2 * self.max {
                        self.open.retain(|w| w.strong_count() > 0);
                    }
                    self.open.push(Arc::downgrade(&activity));
                    return Conn {
                        io,
                        activity,
                        _slot: slot,
                        _budget: budget,
                    };
                }
                Err(err) => {
                    self.note_failure(&err);
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    fn note_failure(&mut self, err: &io::Error) {
        self.failures += 1;
        if self.logged.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
            self.logged = Some(Instant::now());
            tracing::warn!(listener = self.name, %err, failures = self.failures, "accept failed; backing off");
        }
    }

    /// The connections as a stream (what tonic serves from).
    pub fn into_stream(self) -> impl Stream<Item = io::Result<Conn<L::Io>>> + Send + 'static {
        futures::stream::unfold(self, |mut a| async move {
            let conn = a.accept().await;
            Some((Ok(conn), a))
        })
    }
}

/// Listens on a unix socket at `path` with `mode` whatever the umask: bound under a
/// temporary name, narrowed, then renamed into place, so no one can connect through a
/// wider mode in between. A stale socket at `path` is replaced. Missing directories are
/// made 0755 whatever the umask, and every directory above the socket must be root's or
/// ours and writable by no one else (unless sticky): in a directory others may write, a
/// stranger could put their own socket in its place.
pub fn bind_unix(path: &Path, mode: u32) -> io::Result<UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    crate::os::files::check_ancestors(path)
        .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()))?;
    let tmp = dir.join(format!(
        ".{}.{}.bind",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[tokio::test]
    async fn connections_beyond_the_cap_wait_for_a_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = bind_unix(&path, 0o600).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let mut acceptor = Acceptor::new(listener, 2, "test");
        let _c1 = UnixStream::connect(&path).await.unwrap();
        let _c2 = UnixStream::connect(&path).await.unwrap();
        let _c3 = UnixStream::connect(&path).await.unwrap();
        let a1 = acceptor.accept().await;
        let _a2 = acceptor.accept().await;
        let third = tokio::time::timeout(Duration::from_millis(200), acceptor.accept()).await;
        assert!(
            third.is_err(),
            "a third connection is not taken while two are open"
        );
        drop(a1);
        let third = tokio::time::timeout(Duration::from_secs(5), acceptor.accept()).await;
        assert!(third.is_ok(), "a freed slot takes the waiting connection");
    }

    #[tokio::test]
    async fn idle_connections_make_room_for_new_ones() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = bind_unix(&path, 0o600).unwrap();
        let mut acceptor =
            Acceptor::new(listener, 2, "test").evict_after(Duration::from_millis(300));
        let mut idle = UnixStream::connect(&path).await.unwrap();
        let mut busy = UnixStream::connect(&path).await.unwrap();
        let _waiting = UnixStream::connect(&path).await.unwrap();
        let mut a_idle = acceptor.accept().await;
        let mut a_busy = acceptor.accept().await;
        // The idle side sees end of file once evicted; the busy one keeps talking.
        let served = tokio::spawn(async move {
            let mut b = [0u8; 1];
            a_idle.read(&mut b).await.unwrap()
        });
        let busy_served = tokio::spawn(async move {
            let mut b = [0u8; 1];
            for _ in 0..40 {
                a_busy.read_exact(&mut b).await.unwrap();
            }
        });
        let pinger = tokio::spawn(async move {
            for _ in 0..40 {
                busy.write_all(b"x").await.unwrap();
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let third = tokio::time::timeout(Duration::from_secs(5), acceptor.accept()).await;
        assert!(third.is_ok(), "the idle connection was closed to make room");
        assert_eq!(
            served.await.unwrap(),
            0,
            "the idle connection read end of file"
        );
        let mut b = [0u8; 1];
        assert_eq!(
            idle.read(&mut b).await.unwrap(),
            0,
            "and its client sees it closed"
        );
        pinger.await.unwrap();
        busy_served.await.unwrap();
    }

    #[tokio::test]
    async fn a_socket_is_never_placed_where_others_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("a").join("b");
        bind_unix(&made.join("s.sock"), 0o600).unwrap();
        for d in [dir.path().join("a"), made.clone()] {
            let mode = std::fs::metadata(&d).unwrap().mode() & 0o777;
            assert_eq!(mode & 0o022, 0, "{} made {mode:o}", d.display());
        }
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = bind_unix(&open.join("s.sock"), 0o600).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        assert!(!open.join("s.sock").exists());
    }
}
