//! The server's Ed25519 identity, which agents pin: where it is kept (a file in the
//! data directory next to a SQLite store, the database itself for PostgreSQL) and how
//! it is loaded or made on first use.

use std::path::Path;

use anyhow::Context;
use ed25519_dalek::SigningKey;
use rand::RngCore;
use rand::rngs::OsRng;

use crate::secrets;
use crate::store::Store;

/// Under this name the server key is kept in a PostgreSQL store.
const SERVER_KEY_SECRET: &str = "server_ed25519_key";

/// The server's Ed25519 identity for `store`. A SQLite server keeps it in its data
/// directory, next to the database file. In PostgreSQL it is kept in the database,
/// where every replica finds the same one (agents pin it); a data directory's key file
/// is adopted by the first replica that starts on an empty database, so a server moved
/// from SQLite keeps the identity its agents know.
pub fn server_key(store: &Store, data_dir: &Path) -> anyhow::Result<SigningKey> {
    if store.path().is_some() {
        return secrets::load_or_create_server_key(data_dir).context("loading the server key");
    }
    let file = data_dir.join(secrets::SERVER_KEY_FILE);
    let candidate = if file.exists() {
        secrets::load_or_create_server_key(data_dir).context("reading the server key file to adopt it")?
    } else {
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        SigningKey::from_bytes(&seed)
    };
    let stored = store
        .server_secret_or(SERVER_KEY_SECRET, candidate.as_bytes())
        .context("loading the server key from the database")?;
    let seed = <[u8; 32]>::try_from(stored.as_slice()).map_err(|_| {
        anyhow::anyhow!("the server key stored in the database is damaged ({} bytes, not 32); restore the database from a backup (agents pin this key)", stored.len())
    })?;
    let key = SigningKey::from_bytes(&seed);
    if file.exists() && key.verifying_key() != candidate.verifying_key() {
        tracing::warn!(
            file = %file.display(),
            "the data directory holds a server key that differs from the database's; the database's is used (agents enrolled with the file's key will not trust this server)"
        );
    }
    Ok(key)
}
