//! OAuth state in storage: registered clients, authorization codes, and the access and
//! refresh tokens of each grant ("family"). Secrets are stored hashed.

use rusqlite::{Connection, OptionalExtension, params};

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

/// Why a code or refresh token could not be redeemed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeem<T> {
    Ok(T),
    Unknown,
    Expired,
    /// Used before: the grant's family has now been revoked.
    Reused,
    /// Live, but the request does not fit it (another client or resource); not used up.
    Mismatch,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshGrant {
    pub client_id: String,
    pub user_id: i64,
    pub resource: String,
    pub scope: Option<String>,
    pub family: String,
}

/// A token to store: `kind` is `access` or `refresh`.
#[derive(Debug, Clone)]
pub struct NewOAuthToken<'a> {
    pub token_hash: &'a str,
    pub kind: &'static str,
    pub family: &'a str,
    pub client_id: &'a str,
    pub user_id: i64,
    pub resource: &'a str,
    pub scope: Option<&'a str>,
    pub created_at: &'a str,
    pub expires_at: &'a str,
}

impl Store {
    pub fn create_oauth_client(&self, client: &OAuthClient, now: &str) -> Result<()> {
        let uris = serde_json::to_string(&client.redirect_uris).map_err(|e| StoreError::Internal(e.to_string()))?;
        self.with(|c| {
            c.execute(
                "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![client.client_id, client.client_name, uris, now],
            )?;
            Ok(())
        })
    }

    pub fn oauth_client(&self, client_id: &str) -> Result<Option<OAuthClient>> {
        self.with(|c| {
            let row = c
                .query_row(
                    "SELECT client_id, client_name, redirect_uris FROM oauth_clients WHERE client_id = ?1",
                    [client_id],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<String>>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    },
                )
                .optional()?;
            Ok(row.map(|(client_id, client_name, uris)| OAuthClient {
                client_id,
                client_name,
                redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
            }))
        })
    }

    pub fn create_code(&self, code_hash: &str, g: &CodeGrant) -> Result<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, resource, scope, family, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![code_hash, g.client_id, g.user_id, g.redirect_uri, g.code_challenge, g.resource, g.scope, g.family, g.expires_at],
            )?;
            Ok(())
        })
    }

    /// Marks a code used and returns its grant. A code seen a second time revokes every
    /// token issued from it.
    pub fn redeem_code(&self, code_hash: &str, now: &str) -> Result<Redeem<CodeGrant>> {
        self.with(|c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let row = tx
                .query_row(
                    "SELECT c.client_id, c.user_id, c.redirect_uri, c.code_challenge, c.resource, c.scope, c.family, c.expires_at,
                            CASE WHEN u.disabled THEN COALESCE(c.used_at, 'disabled') ELSE c.used_at END
                     FROM oauth_codes c JOIN users u ON u.id = c.user_id WHERE c.code_hash = ?1",
                    [code_hash],
                    |r| {
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
                            r.get::<_, Option<String>>(8)?,
                        ))
                    },
                )
                .optional()?;
            let outcome = match row {
                None => Redeem::Unknown,
                Some((grant, Some(_))) => {
                    revoke_family(&tx, &grant.family, now)?;
                    Redeem::Reused
                }
                Some((grant, None)) => {
                    tx.execute("UPDATE oauth_codes SET used_at = ?2 WHERE code_hash = ?1", params![code_hash, now])?;
                    if grant.expires_at.as_str() <= now { Redeem::Expired } else { Redeem::Ok(grant) }
                }
            };
            tx.commit()?;
            Ok(outcome)
        })
    }

    pub fn create_oauth_token(&self, t: &NewOAuthToken<'_>) -> Result<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO oauth_tokens (token_hash, kind, family, client_id, user_id, resource, scope, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![t.token_hash, t.kind, t.family, t.client_id, t.user_id, t.resource, t.scope, t.created_at, t.expires_at],
            )?;
            Ok(())
        })
    }

    /// Uses up a refresh token (they rotate). Presenting one that was already used is
    /// taken as theft: the whole family is revoked. A request that does not fit the
    /// grant (`fits` is false) is refused without using the token up, so a client's
    /// malformed request cannot make its own retry look like theft.
    pub fn redeem_refresh(
        &self,
        token_hash: &str,
        now: &str,
        fits: impl FnOnce(&RefreshGrant) -> bool,
    ) -> Result<Redeem<RefreshGrant>> {
        self.with(|c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let row = tx
                .query_row(
                    "SELECT t.client_id, t.user_id, t.resource, t.scope, t.family, t.expires_at, t.used_at, t.revoked_at, u.disabled
                     FROM oauth_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?1 AND t.kind = 'refresh'",
                    [token_hash],
                    |r| {
                        Ok((
                            RefreshGrant {
                                client_id: r.get(0)?,
                                user_id: r.get(1)?,
                                resource: r.get(2)?,
                                scope: r.get(3)?,
                                family: r.get(4)?,
                            },
                            r.get::<_, String>(5)?,
                            r.get::<_, Option<String>>(6)?,
                            r.get::<_, Option<String>>(7)?,
                            r.get::<_, bool>(8)?,
                        ))
                    },
                )
                .optional()?;
            let outcome = match row {
                None => Redeem::Unknown,
                Some((_, _, _, Some(_), _)) | Some((_, _, _, _, true)) => Redeem::Unknown,
                Some((grant, _, Some(_), None, false)) => {
                    revoke_family(&tx, &grant.family, now)?;
                    Redeem::Reused
                }
                Some((grant, _, None, None, false)) if !fits(&grant) => Redeem::Mismatch,
                Some((grant, expires_at, None, None, false)) => {
                    tx.execute("UPDATE oauth_tokens SET used_at = ?2 WHERE token_hash = ?1", params![token_hash, now])?;
                    if expires_at.as_str() <= now { Redeem::Expired } else { Redeem::Ok(grant) }
                }
            };
            tx.commit()?;
            Ok(outcome)
        })
    }

    /// The principal behind a live access token issued for `resource`.
    pub fn oauth_principal(&self, token_hash: &str, resource: &str, now: &str) -> Result<Option<Principal>> {
        self.with(|c| {
            let row = c
                .query_row(
                    "SELECT t.id, u.id, u.username, u.role FROM oauth_tokens t JOIN users u ON u.id = t.user_id
                     WHERE t.token_hash = ?1 AND t.kind = 'access' AND t.revoked_at IS NULL AND t.expires_at > ?2
                       AND t.resource = ?3 AND u.disabled = 0",
                    params![token_hash, now, resource],
                    credential_columns,
                )
                .optional()?;
            let Some((token_id, user_id, username, role)) = row else {
                return Ok(None);
            };
            principal(c, CredentialKind::OAuth, token_id, user_id, username, &role)
        })
    }

    /// RFC 7009: revokes the grant a token belongs to (its whole family). Unknown tokens
    /// are not an error.
    pub fn revoke_oauth_token(&self, token_hash: &str, now: &str) -> Result<bool> {
        self.with(|c| {
            let family: Option<String> = c
                .query_row(
                    "SELECT family FROM oauth_tokens WHERE token_hash = ?1",
                    [token_hash],
                    |r| r.get(0),
                )
                .optional()?;
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

fn revoke_family(c: &Connection, family: &str, now: &str) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE oauth_tokens SET revoked_at = ?2 WHERE family = ?1 AND revoked_at IS NULL",
        params![family, now],
    )
}
