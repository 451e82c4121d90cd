//! OAuth state in storage: registered clients, authorization codes, and the access and
//! refresh tokens of each grant ("family"). Secrets are stored hashed.

use super::db::{Conn, Dialect, args};
use super::{Result, Store, StoreError, credential_columns, principal};
use crate::principal::{CredentialKind, Principal};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
}

/// An authorization code as issued, bound to everything the token request must repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeGrant {
    pub client_id: String,
    pub user_id: i64,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
    pub scope: Option<String>,
    pub family: String,
    pub expires_at: String,
}

/// What became of a code or refresh token presented for new tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exchange<R> {
    /// Redeemed, and the new tokens are stored: the grant they belong to.
    Issued(RefreshGrant),
    /// Live, but the request does not fit the grant (`R` says how). A code is used up
    /// anyway; a refresh token is not.
    Refused(R),
    Unknown,
    Expired,
    /// Used before: the grant's family has now been revoked, including whatever the
    /// first use issued.
    Reused,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshGrant {
    pub client_id: String,
    pub user_id: i64,
    pub resource: String,
    pub scope: Option<String>,
    pub family: String,
}

/// The access and refresh token an exchange stores when it succeeds: minted by the
/// caller beforehand, stored hashed.
#[derive(Debug, Clone)]
pub struct NewTokenPair<'a> {
    pub access_hash: &'a str,
    pub refresh_hash: &'a str,
    pub created_at: &'a str,
    pub access_expires_at: &'a str,
    pub refresh_expires_at: &'a str,
}

/// A live OAuth grant, as its owner sees it in a list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GrantRecord {
    /// The grant's id (its token family).
    pub id: String,
    pub client_id: String,
    /// The name a registered client gave itself (its own choice, not verified).
    pub client_name: Option<String>,
    /// Where the consent sent the person back to.
    pub redirect_uri: Option<String>,
    pub created_at: String,
    /// When tokens were last issued for it (the last refresh).
    pub last_issued_at: String,
    pub expires_at: String,
}

impl Store {
    pub fn create_oauth_client(&self, client: &OAuthClient, now: &str) -> Result<()> {
        let uris = serde_json::to_string(&client.redirect_uris).map_err(|e| StoreError::Internal(e.to_string()))?;
        self.write_db(|c| {
            c.execute(
                "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at) VALUES (?1, ?2, ?3, ?4)",
                args![&client.client_id, client.client_name.as_deref(), uris, now],
            )?;
            Ok(())
        })
    }

    pub fn oauth_client(&self, client_id: &str) -> Result<Option<OAuthClient>> {
        self.read_db(|c| {
            let row = c.query_opt(
                "SELECT client_id, client_name, redirect_uris FROM oauth_clients WHERE client_id = ?1",
                args![client_id],
                |r| Ok((r.get::<String>(0)?, r.get::<Option<String>>(1)?, r.get::<String>(2)?)),
            )?;
            Ok(row.map(|(client_id, client_name, uris)| OAuthClient {
                client_id,
                client_name,
                redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
            }))
        })
    }

    pub fn create_code(&self, code_hash: &str, g: &CodeGrant) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, resource, scope, family, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                args![
                    code_hash,
                    &g.client_id,
                    g.user_id,
                    &g.redirect_uri,
                    &g.code_challenge,
                    &g.resource,
                    g.scope.as_deref(),
                    &g.family,
                    &g.expires_at
                ],
            )?;
            Ok(())
        })
    }

    /// Redeems a code and stores the tokens it buys, in one transaction: a replay of
    /// the code, however it interleaves with this call, either happens first (and this
    /// call finds the code used) or finds the tokens stored and revokes them with the
    /// rest of the grant. A code is used up whatever the outcome; `check` (client,
    /// redirect URI, PKCE, resource) runs once it is, inside the transaction.
    pub fn exchange_code<R>(
        &self,
        code_hash: &str,
        now: &str,
        tokens: &NewTokenPair<'_>,
        check: impl FnOnce(&CodeGrant) -> std::result::Result<(), R>,
    ) -> Result<Exchange<R>> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let sql = format!(
                    "SELECT c.client_id, c.user_id, c.redirect_uri, c.code_challenge, c.resource, c.scope, c.family, c.expires_at,
                            CASE WHEN u.disabled <> 0 THEN COALESCE(c.used_at, 'disabled') ELSE c.used_at END
                     FROM oauth_codes c JOIN users u ON u.id = c.user_id WHERE c.code_hash = ?1{}",
                    row_lock(tx)
                );
                let row = tx.query_opt(&sql, args![code_hash], |r| {
                    Ok((
                        CodeGrant {
                            client_id: r.get(0)?,
                            user_id: r.get(1)?,
                            redirect_uri: r.get(2)?,
                            code_challenge: r.get(3)?,
                            resource: r.get(4)?,
                            scope: r.get(5)?,
                            family: r.get(6)?,
                            expires_at: r.get(7)?,
                        },
                        r.get::<Option<String>>(8)?,
                    ))
                })?;
                Ok(match row {
                    None => Exchange::Unknown,
                    Some((grant, Some(_))) => {
                        revoke_family(tx, &grant.family, now)?;
                        Exchange::Reused
                    }
                    Some((grant, None)) => {
                        tx.execute(
                            "UPDATE oauth_codes SET used_at = ?2 WHERE code_hash = ?1",
                            args![code_hash, now],
                        )?;
                        if grant.expires_at.as_str() <= now {
                            Exchange::Expired
                        } else if let Err(why) = check(&grant) {
                            Exchange::Refused(why)
                        } else {
                            let grant = RefreshGrant {
                                client_id: grant.client_id,
                                user_id: grant.user_id,
                                resource: grant.resource,
                                scope: grant.scope,
                                family: grant.family,
                            };
                            insert_pair(tx, &grant, tokens)?;
                            Exchange::Issued(grant)
                        }
                    }
                })
            })
        })
    }

    /// Uses up a refresh token (they rotate) and stores its successors, in one
    /// transaction, so a replay racing this call revokes what it issues. Presenting one
    /// that was already used is taken as theft: the whole family is revoked. A request
    /// that does not fit the grant (`check` refuses) leaves the token unused, so a
    /// client's malformed request cannot make its own retry look like theft.
    pub fn exchange_refresh<R>(
        &self,
        token_hash: &str,
        now: &str,
        tokens: &NewTokenPair<'_>,
        check: impl FnOnce(&RefreshGrant) -> std::result::Result<(), R>,
    ) -> Result<Exchange<R>> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let sql = format!(
                    "SELECT t.client_id, t.user_id, t.resource, t.scope, t.family, t.expires_at, t.used_at, t.revoked_at, u.disabled
                     FROM oauth_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?1 AND t.kind = 'refresh'{}",
                    row_lock(tx)
                );
                let row = tx.query_opt(&sql, args![token_hash], |r| {
                    Ok((
                        RefreshGrant {
                            client_id: r.get(0)?,
                            user_id: r.get(1)?,
                            resource: r.get(2)?,
                            scope: r.get(3)?,
                            family: r.get(4)?,
                        },
                        r.get::<String>(5)?,
                        r.get::<Option<String>>(6)?,
                        r.get::<Option<String>>(7)?,
                        r.get::<bool>(8)?,
                    ))
                })?;
                Ok(match row {
                    None | Some((_, _, _, Some(_), _)) | Some((_, _, _, _, true)) => Exchange::Unknown,
                    Some((grant, _, Some(_), None, false)) => {
                        revoke_family(tx, &grant.family, now)?;
                        Exchange::Reused
                    }
                    Some((grant, expires_at, None, None, false)) => match check(&grant) {
                        Err(why) => Exchange::Refused(why),
                        Ok(()) => {
                            tx.execute(
                                "UPDATE oauth_tokens SET used_at = ?2 WHERE token_hash = ?1",
                                args![token_hash, now],
                            )?;
                            if expires_at.as_str() <= now {
                                Exchange::Expired
                            } else {
                                insert_pair(tx, &grant, tokens)?;
                                Exchange::Issued(grant)
                            }
                        }
                    },
                })
            })
        })
    }

    /// The user's live grants (a refresh token not used, revoked or expired), newest
    /// first.
    pub fn user_grants(&self, user_id: i64, now: &str) -> Result<Vec<GrantRecord>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT t.family, t.client_id, oc.client_name,
                        (SELECT redirect_uri FROM oauth_codes WHERE family = t.family LIMIT 1),
                        MIN(t.created_at), MAX(t.created_at), MAX(t.expires_at)
                 FROM oauth_tokens t LEFT JOIN oauth_clients oc ON oc.client_id = t.client_id
                 WHERE t.user_id = ?1 AND t.revoked_at IS NULL
                 GROUP BY t.family, t.client_id, oc.client_name
                 HAVING SUM(CASE WHEN t.kind = 'refresh' AND t.used_at IS NULL AND t.expires_at > ?2 THEN 1 ELSE 0 END) > 0
                 ORDER BY MAX(t.created_at) DESC",
                args![user_id, now],
                |r| {
                    Ok(GrantRecord {
                        id: r.get(0)?,
                        client_id: r.get(1)?,
                        client_name: r.get(2)?,
                        redirect_uri: r.get(3)?,
                        created_at: r.get(4)?,
                        last_issued_at: r.get(5)?,
                        expires_at: r.get(6)?,
                    })
                },
            )
        })
    }

    /// Ends one of the user's own grants; false if it has no such live grant.
    pub fn revoke_user_grant(&self, user_id: i64, grant_id: &str, now: &str) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE oauth_tokens SET revoked_at = ?3 WHERE family = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                args![grant_id, user_id, now],
            )? > 0)
        })
    }

    /// The principal behind a live access token issued for `resource`.
    pub fn oauth_principal(&self, token_hash: &str, resource: &str, now: &str) -> Result<Option<Principal>> {
        self.read_db(|c| {
            let row = c.query_opt(
                "SELECT t.id, u.id, u.username, u.role FROM oauth_tokens t JOIN users u ON u.id = t.user_id
                 WHERE t.token_hash = ?1 AND t.kind = 'access' AND t.revoked_at IS NULL AND t.expires_at > ?2
                   AND t.resource = ?3 AND u.disabled = 0",
                args![token_hash, now, resource],
                credential_columns,
            )?;
            let Some((token_id, user_id, username, role)) = row else {
                return Ok(None);
            };
            principal(c, CredentialKind::OAuth, token_id, user_id, username, &role)
        })
    }

    /// RFC 7009: revokes the grant a token belongs to (its whole family). Unknown tokens
    /// are not an error.
    pub fn revoke_oauth_token(&self, token_hash: &str, now: &str) -> Result<bool> {
        self.write_db(|c| {
            let family: Option<String> = c.query_opt(
                "SELECT family FROM oauth_tokens WHERE token_hash = ?1",
                args![token_hash],
                |r| r.get(0),
            )?;
            match family {
                Some(f) => {
                    revoke_family(c, &f, now)?;
                    Ok(true)
                }
                None => Ok(false),
            }
        })
    }
}

/// On PostgreSQL, the row an exchange reads is locked until its commit, so a replay on
/// another replica waits and then sees it used (SQLite's write transaction already
/// serializes the two).
fn row_lock(c: &Conn) -> &'static str {
    match c.dialect() {
        Dialect::Postgres => " FOR UPDATE",
        Dialect::Sqlite => "",
    }
}

fn insert_pair(c: &Conn, g: &RefreshGrant, t: &NewTokenPair<'_>) -> Result<()> {
    for (hash, kind, expires_at) in [
        (t.access_hash, "access", t.access_expires_at),
        (t.refresh_hash, "refresh", t.refresh_expires_at),
    ] {
        c.execute(
            "INSERT INTO oauth_tokens (token_hash, kind, family, client_id, user_id, resource, scope, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            args![
                hash,
                kind,
                &g.family,
                &g.client_id,
                g.user_id,
                &g.resource,
                g.scope.as_deref(),
                t.created_at,
                expires_at
            ],
        )?;
    }
    Ok(())
}

fn revoke_family(c: &Conn, family: &str, now: &str) -> Result<u64> {
    c.execute(
        "UPDATE oauth_tokens SET revoked_at = ?2 WHERE family = ?1 AND revoked_at IS NULL",
        args![family, now],
    )
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::principal::Role;

    const NOW: &str = "2030-01-01T00:00:00.000Z";
    const LATER: &str = "2030-01-01T00:01:00.000Z";
    const RESOURCE: &str = "http://127.0.0.1:1/mcp";

    fn pair<'a>(access: &'a str, refresh: &'a str) -> NewTokenPair<'a> {
        NewTokenPair {
            access_hash: access,
            refresh_hash: refresh,
            created_at: NOW,
            access_expires_at: LATER,
            refresh_expires_at: LATER,
        }
    }

    fn store_with_code(dir: &std::path::Path) -> Store {
        let store = Store::open(dir).unwrap();
        let user = store.create_user("kim", "x", Role::Operator, &[], NOW).unwrap();
        let grant = CodeGrant {
            client_id: "c".into(),
            user_id: user,
            redirect_uri: "http://127.0.0.1:9/cb".into(),
            code_challenge: "x".into(),
            resource: RESOURCE.into(),
            scope: None,
            family: "family-1".into(),
            expires_at: LATER.into(),
        };
        store.create_code("code-1", &grant).unwrap();
        store
    }

    /// Set by the replay's connection while it waits for the first exchange's
    /// transaction to end.
    static REPLAY_WAITING: AtomicBool = AtomicBool::new(false);

    fn replay_waits(attempts: i32) -> bool {
        REPLAY_WAITING.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1));
        attempts < 60_000
    }

    /// The hole: redeeming a code and storing its tokens were two transactions, so a
    /// replay arriving between them revoked the (still empty) grant and was told so,
    /// and then the first use stored tokens that kept working. Here the replay arrives
    /// while the first use is in flight, held inside its transaction, and waits for it;
    /// it then finds the tokens stored and revokes them.
    #[test]
    fn a_code_replayed_while_its_first_use_is_in_flight_revokes_what_that_use_issues() {
        let dir = tempfile::tempdir().unwrap();
        let first = store_with_code(dir.path());
        // The replay comes in on its own connection, as another request would.
        let replay = std::sync::Arc::new(Store::open(dir.path()).unwrap());
        replay
            .with(|c| {
                c.busy_handler(Some(replay_waits))?;
                Ok(())
            })
            .unwrap();
        let mut replayed = None;
        let outcome = first
            .exchange_code("code-1", NOW, &pair("access-1", "refresh-1"), |_grant| {
                let r = replay.clone();
                replayed = Some(std::thread::spawn(move || {
                    r.exchange_code("code-1", NOW, &pair("access-2", "refresh-2"), |_| Ok::<(), ()>(()))
                }));
                let deadline = Instant::now() + Duration::from_secs(30);
                while !REPLAY_WAITING.load(Ordering::SeqCst) {
                    assert!(Instant::now() < deadline, "the replay never reached the database");
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok::<(), ()>(())
            })
            .unwrap();
        assert!(matches!(outcome, Exchange::Issued(_)), "{outcome:?}");
        let replayed = replayed.unwrap().join().unwrap().unwrap();
        assert_eq!(replayed, Exchange::Reused);
        assert_eq!(
            first.oauth_principal("access-1", RESOURCE, NOW).unwrap(),
            None,
            "the first use's access token is revoked"
        );
        let refresh = first.exchange_refresh("refresh-1", NOW, &pair("a3", "r3"), |_| Ok::<(), ()>(()));
        assert_eq!(refresh.unwrap(), Exchange::Unknown, "and so is its refresh token");
        assert_eq!(
            first.oauth_principal("access-2", RESOURCE, NOW).unwrap(),
            None,
            "the replay got nothing"
        );
    }

    #[test]
    fn a_refresh_token_replayed_after_its_rotation_revokes_the_successors() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_code(dir.path());
        let ok = |_: &_| Ok::<(), ()>(());
        assert!(matches!(
            store.exchange_code("code-1", NOW, &pair("a1", "r1"), ok).unwrap(),
            Exchange::Issued(_)
        ));
        let ok = |_: &_| Ok::<(), ()>(());
        assert!(matches!(
            store.exchange_refresh("r1", NOW, &pair("a2", "r2"), ok).unwrap(),
            Exchange::Issued(_)
        ));
        assert!(store.oauth_principal("a2", RESOURCE, NOW).unwrap().is_some());
        let ok = |_: &_| Ok::<(), ()>(());
        assert_eq!(
            store.exchange_refresh("r1", NOW, &pair("a3", "r3"), ok).unwrap(),
            Exchange::Reused
        );
        assert_eq!(store.oauth_principal("a2", RESOURCE, NOW).unwrap(), None);
        assert_eq!(store.oauth_principal("a3", RESOURCE, NOW).unwrap(), None);
    }

    #[test]
    fn a_refused_code_is_used_up_and_a_refused_refresh_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_code(dir.path());
        let wrong = |_: &_| Err::<(), _>("wrong client");
        assert_eq!(
            store.exchange_code("code-1", NOW, &pair("a1", "r1"), wrong).unwrap(),
            Exchange::Refused("wrong client")
        );
        assert_eq!(
            store.oauth_principal("a1", RESOURCE, NOW).unwrap(),
            None,
            "nothing issued"
        );
        let ok = |_: &_| Ok::<(), ()>(());
        assert_eq!(
            store.exchange_code("code-1", NOW, &pair("a2", "r2"), ok).unwrap(),
            Exchange::Reused
        );
    }

    #[test]
    fn grants_are_listed_and_revoked_by_their_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_code(dir.path());
        let ok = |_: &_| Ok::<(), ()>(());
        store.exchange_code("code-1", NOW, &pair("a1", "r1"), ok).unwrap();
        let kim = store.user_id("kim").unwrap();
        let grants = store.user_grants(kim, NOW).unwrap();
        assert_eq!(grants.len(), 1);
        assert_eq!(
            (grants[0].id.as_str(), grants[0].redirect_uri.as_deref()),
            ("family-1", Some("http://127.0.0.1:9/cb"))
        );
        assert!(
            store.user_grants(kim, LATER).unwrap().is_empty(),
            "expired grants are not live"
        );
        let other = store.create_user("eve", "x", Role::Operator, &[], NOW).unwrap();
        assert!(!store.revoke_user_grant(other, "family-1", NOW).unwrap(), "not hers");
        assert!(store.oauth_principal("a1", RESOURCE, NOW).unwrap().is_some());
        assert!(store.revoke_user_grant(kim, "family-1", NOW).unwrap());
        assert_eq!(store.oauth_principal("a1", RESOURCE, NOW).unwrap(), None);
        assert!(store.user_grants(kim, NOW).unwrap().is_empty());
        assert!(!store.revoke_user_grant(kim, "family-1", NOW).unwrap(), "already ended");
    }
}
