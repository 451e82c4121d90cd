//! Alerts in storage: each alert from when it opened to when it closed, silences, the
//! channels alerts go to, every delivery (with its retries) and small settings.

use super::db::{Row, Value, args};
use super::{Result, Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRow {
    pub id: i64,
    pub agent_id: String,
    /// A telemetry section, `offline`, or `change:<section>`.
    pub key: String,
    /// warn or crit.
    pub status: String,
    pub reason: String,
    pub attention: Option<String>,
    pub opened_at: String,
    pub updated_at: String,
    pub closed_at: Option<String>,
    /// Opened while silenced, or within the cooldown: nothing was sent.
    pub silenced: bool,
    /// An alert message went out, so its recovery will too.
    pub notified: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SilenceRow {
    pub id: i64,
    pub agent_id: String,
    /// A section, or `*` for every alert of the PC.
    pub section: String,
    pub until: String,
    pub reason: String,
    pub created_by: String,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRow {
    pub id: i64,
    pub name: String,
    /// ntfy, webhook or email.
    pub kind: String,
    /// The kind's settings as JSON (secrets included: never shown back).
    pub config: String,
    pub digest: bool,
    pub enabled: bool,
    pub created_at: String,
    pub digest_sent_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub id: i64,
    pub channel_id: i64,
    pub alert_id: Option<i64>,
    /// alert, recovery, test or digest.
    pub event: String,
    /// The message as JSON, so a retry sends the same.
    pub message: String,
    /// pending, sent or failed.
    pub status: String,
    pub attempts: i64,
    pub next_at: String,
    pub last_error: Option<String>,
    pub created_at: String,
    pub sent_at: Option<String>,
}

const ALERT_COLUMNS: &str = "SELECT id, agent_id, key, status, reason, attention, opened_at, updated_at, closed_at, silenced, notified FROM alerts";
const SILENCE_COLUMNS: &str = "SELECT id, agent_id, section, until, reason, created_by, created_at FROM alert_silences";
const CHANNEL_COLUMNS: &str =
    "SELECT id, name, kind, config, digest, enabled, created_at, digest_sent_at FROM alert_channels";
const DELIVERY_COLUMNS: &str = "SELECT id, channel_id, alert_id, event, message, status, attempts, next_at, last_error, created_at, sent_at FROM alert_deliveries";

impl Store {
    // ---- alerts -------------------------------------------------------------

    pub fn open_alerts(&self) -> Result<Vec<AlertRow>> {
        self.read_db(|c| {
            c.query_all(
                &format!("{ALERT_COLUMNS} WHERE closed_at IS NULL ORDER BY id"),
                args![],
                alert_row,
            )
        })
    }

    /// Alerts opened or closed at or after `since`, newest first: of the PCs in `agents`
    /// (a JSON array of ids), or of every PC when `None`.
    pub fn alerts_since(&self, since: &str, limit: u32, agents: Option<&str>) -> Result<Vec<AlertRow>> {
        // The ids become parameters of their own: taking a JSON array apart in SQL is
        // done differently by each backend.
        let ids: Option<Vec<String>> = agents
            .map(|json| {
                serde_json::from_str(json).map_err(|e| {
                    StoreError::Internal(format!("the PCs to show alerts of are not a JSON array of ids: {e}"))
                })
            })
            .transpose()?;
        let mut values: Vec<Value<'_>> = vec![Value::from(since), Value::from(limit)];
        let only = match &ids {
            None => String::new(),
            Some(ids) if ids.is_empty() => return Ok(Vec::new()),
            Some(ids) => {
                let first = values.len() + 1;
                values.extend(ids.iter().map(Value::from));
                let places: Vec<String> = (first..first + ids.len()).map(|i| format!("?{i}")).collect();
                format!(" AND agent_id IN ({})", places.join(", "))
            }
        };
        self.read_db(|c| {
            c.query_all(
                &format!("{ALERT_COLUMNS} WHERE (opened_at >= ?1 OR closed_at >= ?1){only} ORDER BY id DESC LIMIT ?2"),
                &values,
                alert_row,
            )
        })
    }

    /// When an alert for this PC and key last went out, if ever.
    pub fn last_notified_alert(&self, agent_id: &str, key: &str) -> Result<Option<String>> {
        self.write_db(|c| {
            c.query_opt(
                "SELECT updated_at FROM alerts WHERE agent_id = ?1 AND key = ?2 AND notified = 1 ORDER BY id DESC LIMIT 1",
                args![agent_id, key],
                |r| r.get(0),
            )
        })
    }

    /// Stores a new alert; returns its id.
    pub fn insert_alert(&self, a: &AlertRow) -> Result<i64> {
        self.write_db(|c| {
            c.query_one(
                "INSERT INTO alerts (agent_id, key, status, reason, attention, opened_at, updated_at, closed_at, silenced, notified)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING id",
                args![
                    &a.agent_id,
                    &a.key,
                    &a.status,
                    &a.reason,
                    a.attention.as_deref(),
                    &a.opened_at,
                    &a.updated_at,
                    a.closed_at.as_deref(),
                    a.silenced,
                    a.notified
                ],
                |r| r.get(0),
            )
        })
    }

    /// Saves an alert's current state (status, reason, closing, notified).
    pub fn update_alert(&self, a: &AlertRow) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "UPDATE alerts SET status = ?2, reason = ?3, attention = ?4, updated_at = ?5, closed_at = ?6, silenced = ?7, notified = ?8 WHERE id = ?1",
                args![
                    a.id,
                    &a.status,
                    &a.reason,
                    a.attention.as_deref(),
                    &a.updated_at,
                    a.closed_at.as_deref(),
                    a.silenced,
                    a.notified
                ],
            )?;
            Ok(())
        })
    }

    // ---- silences -----------------------------------------------------------

    pub fn insert_silence(&self, s: &SilenceRow) -> Result<i64> {
        self.write_db(|c| {
            c.query_one(
                "INSERT INTO alert_silences (agent_id, section, until, reason, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 RETURNING id",
                args![&s.agent_id, &s.section, &s.until, &s.reason, &s.created_by, &s.created_at],
                |r| r.get(0),
            )
        })
    }

    /// Silences still in force at `now`, for one PC or all.
    pub fn active_silences(&self, agent_id: Option<&str>, now: &str) -> Result<Vec<SilenceRow>> {
        self.write_db(|c| {
            c.query_all(
                &format!(
                    "{SILENCE_COLUMNS} WHERE until > ?1 AND (CAST(?2 AS TEXT) IS NULL OR agent_id = ?2) ORDER BY agent_id, section, id"
                ),
                args![now, agent_id],
                silence_row,
            )
        })
    }

    pub fn silence(&self, id: i64) -> Result<Option<SilenceRow>> {
        self.write_db(|c| c.query_opt(&format!("{SILENCE_COLUMNS} WHERE id = ?1"), args![id], silence_row))
    }

    /// Ends a silence now.
    pub fn end_silence(&self, id: i64, now: &str) -> Result<()> {
        self.write_db(|c| {
            let n = c.execute(
                "UPDATE alert_silences SET until = ?2 WHERE id = ?1 AND until > ?2",
                args![id, now],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("no silence {id} in force")));
            }
            Ok(())
        })
    }

    // ---- channels -----------------------------------------------------------

    pub fn channels(&self) -> Result<Vec<ChannelRow>> {
        self.write_db(|c| c.query_all(&format!("{CHANNEL_COLUMNS} ORDER BY id"), args![], channel_row))
    }

    pub fn channel(&self, id: i64) -> Result<Option<ChannelRow>> {
        self.write_db(|c| c.query_opt(&format!("{CHANNEL_COLUMNS} WHERE id = ?1"), args![id], channel_row))
    }

    pub fn insert_channel(&self, ch: &ChannelRow) -> Result<i64> {
        self.write_db(|c| {
            c.query_one(
                "INSERT INTO alert_channels (name, kind, config, digest, enabled, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 RETURNING id",
                args![&ch.name, &ch.kind, &ch.config, ch.digest, ch.enabled, &ch.created_at],
                |r| r.get(0),
            )
        })
    }

    pub fn update_channel(&self, ch: &ChannelRow) -> Result<()> {
        self.write_db(|c| {
            let n = c.execute(
                "UPDATE alert_channels SET name = ?2, kind = ?3, config = ?4, digest = ?5, enabled = ?6 WHERE id = ?1",
                args![ch.id, &ch.name, &ch.kind, &ch.config, ch.digest, ch.enabled],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("no channel {}", ch.id)));
            }
            Ok(())
        })
    }

    pub fn delete_channel(&self, id: i64) -> Result<()> {
        self.write_db(|c| {
            if c.execute("DELETE FROM alert_channels WHERE id = ?1", args![id])? == 0 {
                return Err(StoreError::NotFound(format!("no channel {id}")));
            }
            Ok(())
        })
    }

    pub fn set_digest_sent(&self, id: i64, at: &str) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "UPDATE alert_channels SET digest_sent_at = ?2 WHERE id = ?1",
                args![id, at],
            )?;
            Ok(())
        })
    }

    // ---- deliveries ---------------------------------------------------------

    /// Queues a message for every enabled channel; returns how many.
    pub fn queue_deliveries(&self, alert_id: Option<i64>, event: &str, message: &str, now: &str) -> Result<usize> {
        // Parameters in a SELECT list have no column to take their type from on
        // PostgreSQL, hence the casts.
        self.write_db(|c| {
            Ok(c.execute(
                "INSERT INTO alert_deliveries (channel_id, alert_id, event, message, status, next_at, created_at)
                 SELECT id, CAST(?1 AS BIGINT), CAST(?2 AS TEXT), CAST(?3 AS TEXT), 'pending', CAST(?4 AS TEXT), CAST(?4 AS TEXT)
                 FROM alert_channels WHERE enabled = 1",
                args![alert_id, event, message, now],
            )? as usize)
        })
    }

    /// Queues a message for one channel; returns the delivery's id.
    pub fn queue_delivery(&self, channel_id: i64, event: &str, message: &str, now: &str) -> Result<i64> {
        self.write_db(|c| {
            c.query_one(
                "INSERT INTO alert_deliveries (channel_id, event, message, status, next_at, created_at)
                 VALUES (?1, ?2, ?3, 'pending', ?4, ?4) RETURNING id",
                args![channel_id, event, message, now],
                |r| r.get(0),
            )
        })
    }

    /// Pending deliveries due at `now`, oldest first.
    pub fn due_deliveries(&self, now: &str, limit: u32) -> Result<Vec<DeliveryRow>> {
        self.write_db(|c| {
            c.query_all(
                &format!("{DELIVERY_COLUMNS} WHERE status = 'pending' AND next_at <= ?1 ORDER BY next_at, id LIMIT ?2"),
                args![now, limit],
                delivery_row,
            )
        })
    }

    /// The earliest time a pending delivery is due, if any.
    pub fn next_delivery_at(&self) -> Result<Option<String>> {
        self.write_db(|c| {
            c.query_one(
                "SELECT MIN(next_at) FROM alert_deliveries WHERE status = 'pending'",
                args![],
                |r| r.get(0),
            )
        })
    }

    /// Records one attempt: sent, failed for good, or to be tried again at `next_at`.
    pub fn record_attempt(&self, id: i64, status: &str, error: Option<&str>, next_at: &str, now: &str) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "UPDATE alert_deliveries SET status = ?2, attempts = attempts + 1, last_error = ?3, next_at = ?4,
                 sent_at = CASE WHEN ?2 = 'sent' THEN ?5 ELSE sent_at END WHERE id = ?1",
                args![id, status, error, next_at, now],
            )?;
            Ok(())
        })
    }

    /// The newest deliveries, with their channel's name.
    pub fn recent_deliveries(&self, limit: u32) -> Result<Vec<(DeliveryRow, String)>> {
        self.write_db(|c| {
            c.query_all(
                "SELECT d.id, d.channel_id, d.alert_id, d.event, d.message, d.status, d.attempts, d.next_at, d.last_error,
                        d.created_at, d.sent_at, ch.name
                 FROM alert_deliveries d JOIN alert_channels ch ON ch.id = d.channel_id ORDER BY d.id DESC LIMIT ?1",
                args![limit],
                |r| Ok((delivery_row(r)?, r.get(11)?)),
            )
        })
    }

    /// Deletes closed alerts and finished deliveries older than `before`; returns how many.
    pub fn prune_alerts(&self, before: &str) -> Result<usize> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let alerts = tx.execute(
                    "DELETE FROM alerts WHERE closed_at IS NOT NULL AND closed_at < ?1",
                    args![before],
                )?;
                let deliveries = tx.execute(
                    "DELETE FROM alert_deliveries WHERE status != 'pending' AND created_at < ?1",
                    args![before],
                )?;
                Ok((alerts + deliveries) as usize)
            })
        })
    }

    // ---- settings -----------------------------------------------------------

    pub fn setting(&self, key: &str) -> Result<Option<(String, String, String)>> {
        self.write_db(|c| {
            c.query_opt(
                "SELECT value, updated_by, updated_at FROM settings WHERE key = ?1",
                args![key],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        })
    }

    pub fn save_setting(&self, key: &str, value: &str, by: &str, at: &str) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO settings (key, value, updated_by, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by,
                 updated_at = excluded.updated_at",
                args![key, value, by, at],
            )?;
            Ok(())
        })
    }
}

fn alert_row(r: &Row) -> Result<AlertRow> {
    Ok(AlertRow {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        key: r.get(2)?,
        status: r.get(3)?,
        reason: r.get(4)?,
        attention: r.get(5)?,
        opened_at: r.get(6)?,
        updated_at: r.get(7)?,
        closed_at: r.get(8)?,
        silenced: r.get(9)?,
        notified: r.get(10)?,
    })
}

fn silence_row(r: &Row) -> Result<SilenceRow> {
    Ok(SilenceRow {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        section: r.get(2)?,
        until: r.get(3)?,
        reason: r.get(4)?,
        created_by: r.get(5)?,
        created_at: r.get(6)?,
    })
}

fn channel_row(r: &Row) -> Result<ChannelRow> {
    Ok(ChannelRow {
        id: r.get(0)?,
        name: r.get(1)?,
        kind: r.get(2)?,
        config: r.get(3)?,
        digest: r.get(4)?,
        enabled: r.get(5)?,
        created_at: r.get(6)?,
        digest_sent_at: r.get(7)?,
    })
}

fn delivery_row(r: &Row) -> Result<DeliveryRow> {
    Ok(DeliveryRow {
        id: r.get(0)?,
        channel_id: r.get(1)?,
        alert_id: r.get(2)?,
        event: r.get(3)?,
        message: r.get(4)?,
        status: r.get(5)?,
        attempts: r.get(6)?,
        next_at: r.get(7)?,
        last_error: r.get(8)?,
        created_at: r.get(9)?,
        sent_at: r.get(10)?,
    })
}
