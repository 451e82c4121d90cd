//! A small pool of blocking PostgreSQL connections, used as SQLite's connections are:
//! from blocking threads, one call at a time per connection. A connection that broke
//! (the server restarted, the network dropped) is discarded, not given back.

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
    config: postgres::Config,
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
        let mut config: postgres::Config = url.parse().map_err(|e| {
            StoreError::Internal(format!(
                "--database-url is not a PostgreSQL URL ({e}); write postgres://user:password@host:port/database"
            ))
        })?;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("kenny-server");
        let first = open(&config)?;
        Ok(PgPool {
            config,
            state: Mutex::new(PoolState {
                idle: vec![first],
                open: 1,
            }),
            returned: Condvar::new(),
        })
    }

    /// Runs `f` on a pooled connection.
    pub(super) fn with<T>(&self, f: impl FnOnce(&RefCell<PgConn>) -> Result<T>) -> Result<T> {
        let conn = RefCell::new(self.take()?);
        let result = f(&conn);
        self.give_back(conn.into_inner());
        result
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
                return open(&self.config).inspect_err(|_| {
                    self.state.lock().unwrap_or_else(|p| p.into_inner()).open -= 1;
                });
            }
            state = self.returned.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give_back(&self, conn: PgConn) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if conn.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        self.returned.notify_one();
    }
}

fn open(config: &postgres::Config) -> Result<PgConn> {
    let client = config.connect(postgres::NoTls).map_err(|e| {
        StoreError::Internal(format!(
            "could not connect to PostgreSQL ({e}); check --database-url and that the server accepts connections"
        ))
    })?;
    Ok(PgConn::new(client))
}
