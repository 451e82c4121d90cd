//! Leading a cluster's background work: on PostgreSQL, a session advisory lock held on
//! a connection of its own, so exactly one replica holds it, and it is released by the
//! database itself when that replica's connection ends (a crash included). A SQLite
//! store has one server, which always leads.

use std::cell::RefCell;

use super::db::{Conn, PgConn, args};
use super::{Backend, Result, Store};

/// Held while this process leads; dropping it (or losing its connection) ends that.
pub struct Lead {
    conn: Option<RefCell<PgConn>>,
}

impl Store {
    /// Takes the lead for `job` if no other process holds it.
    pub fn try_lead(&self, job: i64) -> Result<Option<Lead>> {
        let Backend::Postgres(pool) = &self.backend else {
            return Ok(Some(Lead { conn: None }));
        };
        let conn = RefCell::new(pool.dedicated()?);
        let won: bool = Conn::Postgres(&conn).query_one("SELECT pg_try_advisory_lock(?1)", args![job], |r| r.get(0))?;
        Ok(won.then_some(Lead { conn: Some(conn) }))
    }
}

impl Lead {
    /// Whether the lead is still held: its connection still answers.
    pub fn still_held(&self) -> bool {
        match &self.conn {
            None => true,
            Some(conn) => Conn::Postgres(conn).batch("SELECT 1").is_ok(),
        }
    }
}
