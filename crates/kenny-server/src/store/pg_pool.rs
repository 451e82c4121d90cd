//! A small pool of PostgreSQL connections, used as SQLite's connections are: one
//! blocking call at a time per connection, from whatever thread the store is called on.
//! The connections' sockets are driven by one runtime thread the pool owns, so a call
//! made from inside the server's runtime never starts a runtime of its own there. A
//! connection that broke (the server restarted, the network dropped) is discarded, not
//! given back.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::db::PgConn;
use super::{Result, StoreError};

/// Connections per replica at most: the blocking pool's threads beyond this wait their
/// turn rather than exhausting the PostgreSQL server's `max_connections` (100 by
/// default) across several replicas.
const MAX_CONNECTIONS: usize = 16;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct PgPool {
    config: tokio_postgres::Config,
    /// The runtime thread's handle: connections are made and driven there.
    driver: tokio::runtime::Handle,
    state: Mutex<PoolState>,
    returned: Condvar,
}

struct PoolState {
    idle: Vec<PgConn>,
    /// Connections open, idle or lent out.
    open: usize,
}

impl PgPool {
    /// Parses `url` and opens a first connection, so a wrong address or password stops
    /// the start with PostgreSQL's own words.
    pub(super) fn connect(url: &str) -> Result<PgPool> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::Internal(format!(
                "--database-url is not a PostgreSQL URL ({e}); write postgres://user:password@host:port/database"
            ))
        })?;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("kenny-server");
        let driver = spawn_driver()?;
        let first = open(&driver, &config)?;
        Ok(PgPool {
            config,
            driver,
            state: Mutex::new(PoolState {
                idle: vec![first],
                open: 1,
            }),
            returned: Condvar::new(),
        })
    }

    /// Runs `f` on a pooled connection.
    #[expect(clippy::expect_used, reason = "the connection leaves `Lent` only when it is dropped")]
    pub(super) fn with<T>(&self, f: impl FnOnce(&RefCell<PgConn>) -> Result<T>) -> Result<T> {
        let lent = Lent {
            pool: self,
            conn: Some(RefCell::new(self.take()?)),
        };
        f(lent.conn.as_ref().expect("lent until dropped"))
    }

    /// A connection of its own, outside the pool, for a session that must outlive
    /// store calls (an advisory lock held while this replica leads).
    pub(super) fn dedicated(&self) -> Result<PgConn> {
        open(&self.driver, &self.config)
    }

    fn take(&self) -> Result<PgConn> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(conn);
            }
            if state.open < MAX_CONNECTIONS {
                state.open += 1;
                drop(state);
                return open(&self.driver, &self.config).inspect_err(|_| {
                    self.state.lock().unwrap_or_else(|p| p.into_inner()).open -= 1;
                });
            }
            state = self.returned.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give_back(&self, conn: PgConn, discard: bool) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if discard || conn.is_unusable() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        self.returned.notify_one();
    }
}

/// A connection lent to one store call; given back when the call ends, even by a
/// panic, so the pool never loses a slot. One a panic left behind may be in the middle
/// of a transaction: it is closed rather than lent again.
struct Lent<'a> {
    pool: &'a PgPool,
    conn: Option<RefCell<PgConn>>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.give_back(conn.into_inner(), std::thread::panicking());
        }
    }
}

/// The thread that drives every connection of the pool; it runs as long as the
/// process (a store is opened once).
fn spawn_driver() -> Result<tokio::runtime::Handle> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StoreError::Internal(format!("could not start the PostgreSQL driver: {e}")))?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("kenny-postgres".into())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .map_err(|e| StoreError::Internal(format!("could not start the PostgreSQL driver thread: {e}")))?;
    Ok(handle)
}

fn open(driver: &tokio::runtime::Handle, config: &tokio_postgres::Config) -> Result<PgConn> {
    let config = config.clone();
    let connecting = driver.spawn(async move {
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        // The connection ends when its client is dropped, or with the socket.
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "a PostgreSQL connection ended with an error");
            }
        });
        Ok::<_, tokio_postgres::Error>(client)
    });
    let client = futures_executor::block_on(connecting)
        .map_err(|e| StoreError::Internal(format!("the PostgreSQL driver failed: {e}")))?
        .map_err(|e| {
            StoreError::Internal(format!(
                "could not connect to PostgreSQL ({e}); check --database-url and that the server accepts connections"
            ))
        })?;
    Ok(PgConn::new(client))
}
