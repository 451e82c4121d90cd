//! Accounts in storage: users, their hosts, personal access tokens and sign-in sessions.

use serde::Serialize;

use super::db::{Conn, Dialect, args};
use super::{NewSession, Result, Store, StoreError, UserLogin, credential_columns, load_hosts, principal};
use crate::principal::{CredentialKind, Principal, Role};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserRecord {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub disabled: bool,
    /// For `user` accounts: the agent ids it may reach.
    pub hosts: Vec<String>,
    pub created_at: String,
    /// Whether signing in needs a TOTP code.
    pub totp_enabled: bool,
    /// Personal access tokens not revoked: what a "revoke tokens" would stop.
    pub live_tokens: i64,
}

/// A change to a user; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct UserPatch {
    pub role: Option<Role>,
    pub disabled: Option<bool>,
    pub hosts: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenRecord {
    pub id: i64,
    pub label: Option<String>,
    pub created_at: String,
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionRecord {
    pub id: i64,
    pub created_at: String,
    pub expires_at: String,
    pub client: Option<String>,
    pub user_agent: Option<String>,
}

impl Store {
    // ---- users -------------------------------------------------------------

    pub fn create_user(
        &self,
        username: &str,
        password_hash: &str,
        role: Role,
        hosts: &[String],
        now: &str,
    ) -> Result<i64> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                lock_accounts(tx)?;
                let exists: bool = tx.query_one(
                    "SELECT EXISTS(SELECT 1 FROM users WHERE username = ?1)",
                    args![username],
                    |r| r.get(0),
                )?;
                if exists {
                    return Err(StoreError::Conflict(format!(
                        "a user named {username:?} already exists"
                    )));
                }
                let id: i64 = tx.query_one(INSERT_USER, args![username, password_hash, role.as_str(), now], |r| {
                    r.get(0)
                })?;
                for host in hosts {
                    tx.execute(INSERT_HOST, args![id, host])?;
                }
                Ok(id)
            })
        })
    }

    /// Creates an account only if none exists yet.
    pub fn create_first_user(&self, username: &str, password_hash: &str, role: Role, now: &str) -> Result<i64> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                lock_accounts(tx)?;
                let users: i64 = tx.query_one("SELECT COUNT(*) FROM users", args![], |r| r.get(0))?;
                if users > 0 {
                    return Err(StoreError::Conflict(
                        "set-up is already done: an account exists; sign in instead".into(),
                    ));
                }
                tx.query_one(INSERT_USER, args![username, password_hash, role.as_str(), now], |r| {
                    r.get(0)
                })
            })
        })
    }

    pub fn count_superusers(&self) -> Result<i64> {
        self.read_db(|c| {
            c.query_one(
                "SELECT COUNT(*) FROM users WHERE role = 'superuser' AND disabled = 0",
                args![],
                |r| r.get(0),
            )
        })
    }

    pub fn count_users(&self) -> Result<i64> {
        self.read_db(|c| c.query_one("SELECT COUNT(*) FROM users", args![], |r| r.get(0)))
    }

    pub fn user_login(&self, username: &str) -> Result<Option<UserLogin>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT id, username, password_hash, disabled, totp_secret, totp_last_step FROM users WHERE username = ?1",
                args![username],
                |r| {
                    Ok(UserLogin {
                        id: r.get(0)?,
                        username: r.get(1)?,
                        password_hash: r.get(2)?,
                        disabled: r.get(3)?,
                        totp_secret: r.get::<Option<String>>(4)?.map(crate::secrets::Masked::new),
                        totp_last_step: r.get(5)?,
                    })
                },
            )
        })
    }

    pub fn create_session(&self, s: &NewSession<'_>) -> Result<i64> {
        self.write_db(|c| {
            c.query_one(
                "INSERT INTO sessions (user_id, token_hash, csrf_token, created_at, expires_at, client, user_agent)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                args![
                    s.user_id,
                    s.token_hash,
                    s.csrf_token,
                    s.created_at,
                    s.expires_at,
                    s.client,
                    s.user_agent
                ],
                |r| r.get(0),
            )
        })
    }

    /// The principal and CSRF token of a live session (not revoked, not expired at
    /// `now`, its user enabled).
    pub fn session_principal(&self, token_hash: &str, now: &str) -> Result<Option<(Principal, String)>> {
        self.read_db(|c| {
            let row = c.query_opt(
                "SELECT s.id, s.csrf_token, u.id, u.username, u.role FROM sessions s JOIN users u ON u.id = s.user_id
                 WHERE s.token_hash = ?1 AND s.revoked_at IS NULL AND s.expires_at > ?2 AND u.disabled = 0",
                args![token_hash, now],
                |r| {
                    Ok((
                        r.get::<i64>(0)?,
                        r.get::<String>(1)?,
                        r.get::<i64>(2)?,
                        r.get::<String>(3)?,
                        r.get::<String>(4)?,
                    ))
                },
            )?;
            let Some((session_id, csrf, user_id, username, role)) = row else {
                return Ok(None);
            };
            let principal = principal(c, CredentialKind::Session, session_id, user_id, username, &role)?;
            Ok(principal.map(|p| (p, csrf)))
        })
    }

    pub fn revoke_session(&self, session_id: i64, now: &str) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE sessions SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                args![session_id, now],
            )? > 0)
        })
    }

    pub fn first_superuser(&self) -> Result<Option<String>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT username FROM users WHERE role = 'superuser' AND disabled = 0 ORDER BY id LIMIT 1",
                args![],
                |r| r.get(0),
            )
        })
    }

    pub fn user_id(&self, username: &str) -> Result<i64> {
        self.read_db(|c| {
            c.query_opt("SELECT id FROM users WHERE username = ?1", args![username], |r| {
                r.get(0)
            })?
            .ok_or_else(|| {
                StoreError::NotFound(format!(
                    "no user named {username:?}; create it with `kenny-server user add`"
                ))
            })
        })
    }

    // ---- tokens ------------------------------------------------------------

    pub fn create_token(
        &self,
        user_id: i64,
        kind: CredentialKind,
        label: Option<&str>,
        token_hash: &str,
        now: &str,
    ) -> Result<i64> {
        self.write_db(|c| {
            c.query_one(
                "INSERT INTO tokens (user_id, kind, label, token_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
                args![user_id, kind.as_str(), label, token_hash, now],
                |r| r.get(0),
            )
        })
    }

    /// The principal a live token of `kind` belongs to, if any.
    pub fn principal_for_token(&self, kind: CredentialKind, token_hash: &str) -> Result<Option<Principal>> {
        self.read_db(|c| {
            let row = c.query_opt(
                "SELECT t.id, u.id, u.username, u.role FROM tokens t JOIN users u ON u.id = t.user_id
                 WHERE t.token_hash = ?1 AND t.kind = ?2 AND t.revoked_at IS NULL AND u.disabled = 0",
                args![token_hash, kind.as_str()],
                credential_columns,
            )?;
            let Some((token_id, user_id, username, role)) = row else {
                return Ok(None);
            };
            principal(c, kind, token_id, user_id, username, &role)
        })
    }

    /// The principal behind a credential as it stands now, by the credential's id (a
    /// call held for approval runs as its caller): `None` once the token is revoked,
    /// the user disabled or deleted, or for a kind that has no stored credential.
    pub fn principal_for_credential(&self, kind: CredentialKind, credential_id: &str) -> Result<Option<Principal>> {
        let Ok(id) = credential_id.parse::<i64>() else {
            return Ok(None);
        };
        let sql = match kind {
            CredentialKind::Pat => {
                "SELECT t.id, u.id, u.username, u.role FROM tokens t JOIN users u ON u.id = t.user_id
                 WHERE t.id = ?1 AND t.kind = 'pat' AND t.revoked_at IS NULL AND u.disabled = 0"
            }
            CredentialKind::OAuth => {
                "SELECT t.id, u.id, u.username, u.role FROM oauth_tokens t JOIN users u ON u.id = t.user_id
                 WHERE t.id = ?1 AND t.kind = 'access' AND t.revoked_at IS NULL AND u.disabled = 0"
            }
            CredentialKind::Session | CredentialKind::Server => return Ok(None),
        };
        self.read_db(|c| {
            let Some((id, user_id, username, role)) = c.query_opt(sql, args![id], credential_columns)? else {
                return Ok(None);
            };
            principal(c, kind, id, user_id, username, &role)
        })
    }

    pub fn touch_tokens(&self, touched: &[(i64, String)]) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                for (id, at) in touched {
                    tx.execute("UPDATE tokens SET last_used_at = ?2 WHERE id = ?1", args![*id, at])?;
                }
                Ok(())
            })
        })
    }

    pub fn users(&self) -> Result<Vec<UserRecord>> {
        self.read_db(|c| {
            let ids: Vec<i64> = c.query_all("SELECT id FROM users ORDER BY username", args![], |r| r.get(0))?;
            ids.into_iter()
                .map(|id| load_user(c, id)?.ok_or_else(|| StoreError::NotFound("user vanished".into())))
                .collect()
        })
    }

    pub fn user(&self, id: i64) -> Result<Option<UserRecord>> {
        self.read_db(|c| load_user(c, id))
    }

    /// Applies `patch`, refusing to leave no enabled superuser.
    pub fn update_user(&self, id: i64, patch: &UserPatch) -> Result<UserRecord> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                lock_accounts(tx)?;
                let current =
                    load_user(tx, id)?.ok_or_else(|| StoreError::NotFound(format!("no user with id {id}")))?;
                let role = patch.role.unwrap_or(current.role);
                let disabled = patch.disabled.unwrap_or(current.disabled);
                if current.role == Role::Superuser && !current.disabled && (role != Role::Superuser || disabled) {
                    guard_last_superuser(tx, id)?;
                }
                tx.execute(
                    "UPDATE users SET role = ?2, disabled = ?3 WHERE id = ?1",
                    args![id, role.as_str(), disabled],
                )?;
                if role != Role::User || patch.hosts.is_some() {
                    tx.execute("DELETE FROM user_hosts WHERE user_id = ?1", args![id])?;
                }
                if role == Role::User
                    && let Some(hosts) = &patch.hosts
                {
                    for h in hosts {
                        tx.execute(INSERT_HOST, args![id, h])?;
                    }
                }
                load_user(tx, id)?.ok_or_else(|| StoreError::NotFound(format!("no user with id {id}")))
            })
        })
    }

    /// Deletes a user with its tokens and sessions, refusing to remove the last enabled
    /// superuser.
    pub fn delete_user(&self, id: i64) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                lock_accounts(tx)?;
                let current =
                    load_user(tx, id)?.ok_or_else(|| StoreError::NotFound(format!("no user with id {id}")))?;
                if current.role == Role::Superuser && !current.disabled {
                    guard_last_superuser(tx, id)?;
                }
                tx.execute("DELETE FROM users WHERE id = ?1", args![id])?;
                Ok(())
            })
        })
    }

    /// Sets a new password hash and ends the user's sessions (except `keep_session`)
    /// and OAuth grants; with `revoke_tokens`, also every personal access token.
    /// Returns how many tokens were revoked.
    pub fn set_password(
        &self,
        id: i64,
        hash: &str,
        keep_session: Option<i64>,
        revoke_tokens: bool,
        now: &str,
    ) -> Result<usize> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                if tx.execute("UPDATE users SET password_hash = ?2 WHERE id = ?1", args![id, hash])? == 0 {
                    return Err(StoreError::NotFound(format!("no user with id {id}")));
                }
                end_sessions(tx, id, keep_session, now)?;
                revoke_oauth(tx, id, now)?;
                if revoke_tokens { revoke_pats(tx, id, now) } else { Ok(0) }
            })
        })
    }

    /// Ends every session and OAuth grant of a user (e.g. when it is disabled); with
    /// `revoke_tokens`, also revokes its personal access tokens for good. Returns how
    /// many tokens were revoked.
    pub fn end_sessions(&self, user_id: i64, revoke_tokens: bool, now: &str) -> Result<usize> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                end_sessions(tx, user_id, None, now)?;
                revoke_oauth(tx, user_id, now)?;
                if revoke_tokens {
                    revoke_pats(tx, user_id, now)
                } else {
                    Ok(0)
                }
            })
        })
    }

    /// Revokes every live personal access token of a user; returns how many.
    pub fn revoke_user_tokens(&self, user_id: i64, now: &str) -> Result<usize> {
        self.write_db(|c| revoke_pats(c, user_id, now))
    }

    pub fn user_sessions(&self, user_id: i64, now: &str) -> Result<Vec<SessionRecord>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT id, created_at, expires_at, client, user_agent FROM sessions
                 WHERE user_id = ?1 AND revoked_at IS NULL AND expires_at > ?2 ORDER BY id DESC",
                args![user_id, now],
                |r| {
                    Ok(SessionRecord {
                        id: r.get(0)?,
                        created_at: r.get(1)?,
                        expires_at: r.get(2)?,
                        client: r.get(3)?,
                        user_agent: r.get(4)?,
                    })
                },
            )
        })
    }

    /// Ends one of the user's own sessions; false if it has no such live session.
    pub fn revoke_user_session(&self, user_id: i64, session_id: i64, now: &str) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE sessions SET revoked_at = ?3 WHERE id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                args![session_id, user_id, now],
            )? > 0)
        })
    }

    pub fn user_tokens(&self, user_id: i64) -> Result<Vec<TokenRecord>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT id, label, created_at, last_used_at, revoked_at FROM tokens
                 WHERE user_id = ?1 AND kind = 'pat' ORDER BY id DESC",
                args![user_id],
                |r| {
                    Ok(TokenRecord {
                        id: r.get(0)?,
                        label: r.get(1)?,
                        created_at: r.get(2)?,
                        last_used_at: r.get(3)?,
                        revoked_at: r.get(4)?,
                    })
                },
            )
        })
    }

    /// Revokes one of the user's own tokens; false if it has no such live token.
    pub fn revoke_token(&self, user_id: i64, token_id: i64, now: &str) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE tokens SET revoked_at = ?3 WHERE id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                args![token_id, user_id, now],
            )? > 0)
        })
    }
}

impl Store {
    /// Stores a TOTP secret waiting for its first code.
    pub fn set_totp_pending(&self, user_id: i64, secret: &str) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "UPDATE users SET totp_pending = ?2 WHERE id = ?1",
                args![user_id, secret],
            )?;
            Ok(())
        })
    }

    pub fn totp_pending(&self, user_id: i64) -> Result<Option<String>> {
        self.read_db(|c| {
            c.query_one("SELECT totp_pending FROM users WHERE id = ?1", args![user_id], |r| {
                r.get(0)
            })
        })
    }

    /// Turns the pending secret on, with `step` as its last used step, and replaces the
    /// recovery codes.
    pub fn enable_totp(
        &self,
        user_id: i64,
        verified_secret: &str,
        step: i64,
        recovery_hashes: &[String],
    ) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let changed = tx.execute(
                    "UPDATE users SET totp_secret = totp_pending, totp_pending = NULL, totp_last_step = ?2
                     WHERE id = ?1 AND totp_pending = ?3 AND totp_secret IS NULL",
                    args![user_id, step, verified_secret],
                )?;
                if changed == 0 {
                    return Err(StoreError::Conflict(
                        "the TOTP set-up changed meanwhile, or TOTP is already on; start again".into(),
                    ));
                }
                tx.execute("DELETE FROM recovery_codes WHERE user_id = ?1", args![user_id])?;
                for h in recovery_hashes {
                    tx.execute(
                        "INSERT INTO recovery_codes (user_id, code_hash) VALUES (?1, ?2)",
                        args![user_id, h],
                    )?;
                }
                Ok(())
            })
        })
    }

    pub fn disable_totp(&self, user_id: i64) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                tx.execute(
                    "UPDATE users SET totp_secret = NULL, totp_pending = NULL, totp_last_step = 0 WHERE id = ?1",
                    args![user_id],
                )?;
                tx.execute("DELETE FROM recovery_codes WHERE user_id = ?1", args![user_id])?;
                Ok(())
            })
        })
    }

    /// Records an accepted TOTP step; false if it is not newer than the last (a replay).
    pub fn advance_totp_step(&self, user_id: i64, step: i64) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE users SET totp_last_step = ?2 WHERE id = ?1 AND totp_last_step < ?2",
                args![user_id, step],
            )? > 0)
        })
    }

    /// Uses up a recovery code; false if it is unknown or used.
    pub fn use_recovery_code(&self, user_id: i64, code_hash: &str, now: &str) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE recovery_codes SET used_at = ?3 WHERE user_id = ?1 AND code_hash = ?2 AND used_at IS NULL",
                args![user_id, code_hash, now],
            )? > 0)
        })
    }
}

const INSERT_USER: &str =
    "INSERT INTO users (username, password_hash, role, created_at) VALUES (?1, ?2, ?3, ?4) RETURNING id";
const INSERT_HOST: &str =
    "INSERT INTO user_hosts (user_id, agent_id) VALUES (?1, ?2) ON CONFLICT (user_id, agent_id) DO NOTHING";

/// Changes that check the accounts before writing (the last superuser, a name taken,
/// the first account) take turns. SQLite's write transactions already do; on
/// PostgreSQL two replicas could each read "another superuser is left" and each demote
/// one, so they take one advisory lock until their commit.
fn lock_accounts(c: &Conn) -> Result<()> {
    if c.dialect() == Dialect::Postgres {
        c.batch("SELECT pg_advisory_xact_lock(7306878361936683265)")?;
    }
    Ok(())
}

fn load_user(c: &Conn, id: i64) -> Result<Option<UserRecord>> {
    let row = c.query_opt(
        "SELECT id, username, role, disabled, created_at, CASE WHEN totp_secret IS NULL THEN 0 ELSE 1 END,
                (SELECT COUNT(*) FROM tokens t WHERE t.user_id = users.id AND t.kind = 'pat' AND t.revoked_at IS NULL)
         FROM users WHERE id = ?1",
        args![id],
        |r| {
            Ok((
                r.get::<i64>(0)?,
                r.get::<String>(1)?,
                r.get::<String>(2)?,
                r.get::<bool>(3)?,
                r.get::<String>(4)?,
                r.get::<bool>(5)?,
                r.get::<i64>(6)?,
            ))
        },
    )?;
    let Some((id, username, role, disabled, created_at, totp_enabled, live_tokens)) = row else {
        return Ok(None);
    };
    let role =
        Role::parse(&role).ok_or_else(|| StoreError::Internal(format!("user {id} has an unknown role {role:?}")))?;
    Ok(Some(UserRecord {
        id,
        username,
        role,
        disabled,
        hosts: load_hosts(c, id)?,
        created_at,
        totp_enabled,
        live_tokens,
    }))
}

fn guard_last_superuser(c: &Conn, id: i64) -> Result<()> {
    let others: i64 = c.query_one(
        "SELECT COUNT(*) FROM users WHERE role = 'superuser' AND disabled = 0 AND id != ?1",
        args![id],
        |r| r.get(0),
    )?;
    if others == 0 {
        return Err(StoreError::Conflict(
            "this is the last enabled superuser; make another user superuser first".into(),
        ));
    }
    Ok(())
}

fn revoke_oauth(c: &Conn, user_id: i64, now: &str) -> Result<()> {
    c.execute(
        "UPDATE oauth_tokens SET revoked_at = ?2 WHERE user_id = ?1 AND revoked_at IS NULL",
        args![user_id, now],
    )?;
    // Codes not yet exchanged would otherwise mint a fresh grant afterwards.
    c.execute(
        "UPDATE oauth_codes SET used_at = ?2 WHERE user_id = ?1 AND used_at IS NULL",
        args![user_id, now],
    )?;
    Ok(())
}

fn revoke_pats(c: &Conn, user_id: i64, now: &str) -> Result<usize> {
    Ok(c.execute(
        "UPDATE tokens SET revoked_at = ?2 WHERE user_id = ?1 AND kind = 'pat' AND revoked_at IS NULL",
        args![user_id, now],
    )? as usize)
}

fn end_sessions(c: &Conn, user_id: i64, keep: Option<i64>, now: &str) -> Result<()> {
    c.execute(
        "UPDATE sessions SET revoked_at = ?3
         WHERE user_id = ?1 AND revoked_at IS NULL AND (CAST(?2 AS BIGINT) IS NULL OR id != ?2)",
        args![user_id, keep, now],
    )?;
    Ok(())
}
