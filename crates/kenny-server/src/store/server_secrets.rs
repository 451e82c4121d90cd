//! Secrets the server keeps in its database rather than its data directory, so every
//! replica sharing the database holds the same ones.

use super::db::args;
use super::{Result, Store};

impl Store {
    /// The secret stored under `name`; when there is none yet, `candidate` is stored and
    /// returned. Replicas starting together agree: the first insert wins, and each reads
    /// back what won.
    pub fn server_secret_or(&self, name: &str, candidate: &[u8]) -> Result<Vec<u8>> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO server_secrets (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                args![name, candidate],
            )?;
            c.query_one("SELECT value FROM server_secrets WHERE name = ?1", args![name], |r| {
                r.get(0)
            })
        })
    }
}
