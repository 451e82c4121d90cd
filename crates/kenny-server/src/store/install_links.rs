//! Install links: one-time URLs that enroll a PC. Only the link token's hash is kept;
//! the enrollment token a link hands out is minted when it is used, in the same
//! transaction that marks it used, so no usable secret rests in the database.

use super::db::{Row, args};
use super::{Result, Store, StoreError};

/// One link as listed (never its token).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstallLinkRow {
    pub id: i64,
    pub agent_id: String,
    pub os: String,
    pub created_by: String,
    pub created_at: String,
    pub expires_at: String,
    pub used_at: Option<String>,
    pub used_from: Option<String>,
    pub revoked_at: Option<String>,
    pub revoked_by: Option<String>,
}

impl InstallLinkRow {
    /// Why the link cannot be used at `now`; `None` while it can. The one judgement the
    /// redemption, the link's page and the listings all make.
    pub fn refusal(&self, now: &str) -> Option<LinkRefusal> {
        match (&self.used_at, &self.revoked_at) {
            (Some(at), _) => Some(LinkRefusal::Used { at: at.clone() }),
            (None, Some(at)) => Some(LinkRefusal::Revoked { at: at.clone() }),
            (None, None) if self.expires_at.as_str() <= now => Some(LinkRefusal::Expired {
                at: self.expires_at.clone(),
            }),
            (None, None) => None,
        }
    }

    /// `active`, `used`, `revoked` or `expired`, as of `now`.
    pub fn state(&self, now: &str) -> &'static str {
        match self.refusal(now) {
            None => "active",
            Some(LinkRefusal::Used { .. }) => "used",
            Some(LinkRefusal::Revoked { .. }) => "revoked",
            Some(LinkRefusal::Expired { .. } | LinkRefusal::Unknown) => "expired",
        }
    }
}

/// Why a link cannot be used; the page a refused caller sees is made from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkRefusal {
    Unknown,
    Used { at: String },
    Revoked { at: String },
    Expired { at: String },
}

/// A link that was just used: the PC it enrolls, for which OS, and whether that PC
/// already existed (its old key was forgotten).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redeemed {
    pub link_id: i64,
    pub agent_id: String,
    pub os: String,
    pub created_by: String,
    pub replaced_existing: bool,
}

const LINK_COLUMNS: &str = "SELECT id, agent_id, os, created_by, created_at, expires_at, used_at, used_from, revoked_at, revoked_by FROM install_links";

fn link_row(r: &Row) -> Result<InstallLinkRow> {
    Ok(InstallLinkRow {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        os: r.get(2)?,
        created_by: r.get(3)?,
        created_at: r.get(4)?,
        expires_at: r.get(5)?,
        used_at: r.get(6)?,
        used_from: r.get(7)?,
        revoked_at: r.get(8)?,
        revoked_by: r.get(9)?,
    })
}

/// What a new link is.
pub struct NewInstallLink<'a> {
    pub token_hash: &'a str,
    pub agent_id: &'a str,
    pub os: &'a str,
    pub created_by: &'a str,
    pub created_at: &'a str,
    pub expires_at: &'a str,
}

impl Store {
    pub fn create_install_link(&self, link: &NewInstallLink<'_>) -> Result<i64> {
        self.write_db(|c| {
            c.query_one(
                "INSERT INTO install_links (token_hash, agent_id, os, created_by, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                args![
                    link.token_hash,
                    link.agent_id,
                    link.os,
                    link.created_by,
                    link.created_at,
                    link.expires_at
                ],
                |r| r.get(0),
            )
        })
    }

    /// Newest first, at most `limit`.
    pub fn install_links(&self, limit: u32) -> Result<Vec<InstallLinkRow>> {
        self.read_db(|c| {
            c.query_all(
                &format!("{LINK_COLUMNS} ORDER BY id DESC LIMIT ?1"),
                args![limit],
                link_row,
            )
        })
    }

    pub fn install_link(&self, id: i64) -> Result<Option<InstallLinkRow>> {
        self.read_db(|c| c.query_opt(&format!("{LINK_COLUMNS} WHERE id = ?1"), args![id], link_row))
    }

    /// The link a token opens, without using it.
    pub fn install_link_by_token(&self, token_hash: &str) -> Result<Option<InstallLinkRow>> {
        self.read_db(|c| {
            c.query_opt(
                &format!("{LINK_COLUMNS} WHERE token_hash = ?1"),
                args![token_hash],
                link_row,
            )
        })
    }

    /// Revokes a link that is still unused; a used one is a conflict (what it enrolled
    /// stays enrolled: rekey the PC to undo that).
    pub fn revoke_install_link(&self, id: i64, by: &str, now: &str) -> Result<InstallLinkRow> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let used = |row: &InstallLinkRow, at: &str| {
                    StoreError::Conflict(format!(
                        "install link {id} was already used at {at}; to cut the PC it enrolled off, rekey or remove agent {}",
                        row.agent_id
                    ))
                };
                let row = tx
                    .query_opt(&format!("{LINK_COLUMNS} WHERE id = ?1"), args![id], link_row)?
                    .ok_or_else(|| StoreError::NotFound(format!("no install link {id}")))?;
                if let Some(at) = &row.used_at {
                    return Err(used(&row, at));
                }
                if row.revoked_at.is_none() {
                    // Only while still unused: a redemption on another replica between
                    // the read and here wins, and the revocation is refused as above.
                    tx.execute(
                        "UPDATE install_links SET revoked_at = ?2, revoked_by = ?3 WHERE id = ?1 AND used_at IS NULL",
                        args![id, now, by],
                    )?;
                }
                let row = tx.query_one(&format!("{LINK_COLUMNS} WHERE id = ?1"), args![id], link_row)?;
                match (&row.used_at, &row.revoked_at) {
                    (Some(at), None) => Err(used(&row, at)),
                    _ => Ok(row),
                }
            })
        })
    }

    /// Uses a link: in one transaction, marks it used and gives its PC the new
    /// enrollment token (`agent_token_hash`), creating the PC or forgetting the key it
    /// had. Refused, nothing changes.
    pub fn redeem_install_link(
        &self,
        token_hash: &str,
        agent_token_hash: &str,
        from: &str,
        now: &str,
    ) -> Result<std::result::Result<Redeemed, LinkRefusal>> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let Some(row) = tx.query_opt(
                    &format!("{LINK_COLUMNS} WHERE token_hash = ?1"),
                    args![token_hash],
                    link_row,
                )?
                else {
                    return Ok(Err(LinkRefusal::Unknown));
                };
                if let Some(refusal) = row.refusal(now) {
                    return Ok(Err(refusal));
                }
                // Only while unused and unrevoked: two redemptions racing on two
                // replicas (PostgreSQL reads without locking) cannot both win.
                let marked = tx.execute(
                    "UPDATE install_links SET used_at = ?2, used_from = ?3
                     WHERE id = ?1 AND used_at IS NULL AND revoked_at IS NULL",
                    args![row.id, now, from],
                )?;
                if marked == 0 {
                    let again = tx.query_one(&format!("{LINK_COLUMNS} WHERE id = ?1"), args![row.id], link_row)?;
                    return Ok(Err(again.refusal(now).unwrap_or(LinkRefusal::Unknown)));
                }
                let rekeyed = tx.execute(
                    "UPDATE agents SET token_hash = ?2, public_key = NULL, enrolled_at = NULL WHERE agent_id = ?1",
                    args![&row.agent_id, agent_token_hash],
                )?;
                if rekeyed == 0 {
                    tx.execute(
                        "INSERT INTO agents (agent_id, token_hash, created_at) VALUES (?1, ?2, ?3)",
                        args![&row.agent_id, agent_token_hash, now],
                    )?;
                }
                Ok(Ok(Redeemed {
                    link_id: row.id,
                    agent_id: row.agent_id,
                    os: row.os,
                    created_by: row.created_by,
                    replaced_existing: rekeyed > 0,
                }))
            })
        })
    }
}
