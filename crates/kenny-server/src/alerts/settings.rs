//! The operator's alert settings: when a silent PC counts as offline, how long an
//! alert that cleared stays quiet if it comes back, and the weekly digest's day.

use serde::{Deserialize, Serialize};

use crate::store::{Result, Store};

pub(crate) const KEY: &str = "alerts";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct AlertSettings {
    /// A PC not connected for this long raises an `offline` alert (10 s to 30 days).
    pub offline_after_secs: u64,
    /// An alert that clears and comes back within this is recorded, not sent again
    /// (0 to 7 days), so a flapping PC does not flood anyone.
    pub cooldown_secs: u64,
    /// The day the weekly digest goes to channels that opted in (monday ... sunday).
    pub digest_day: String,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            offline_after_secs: 15 * 60,
            cooldown_secs: 60 * 60,
            digest_day: "monday".into(),
        }
    }
}

pub(crate) const DAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

impl AlertSettings {
    pub(crate) fn validate(&self) -> std::result::Result<(), String> {
        if !(10..=30 * 86_400).contains(&self.offline_after_secs) {
            return Err("offline_after_secs must be 10 to 2592000 (30 days)".into());
        }
        if self.cooldown_secs > 7 * 86_400 {
            return Err("cooldown_secs must be 0 to 604800 (7 days)".into());
        }
        if !DAYS.contains(&self.digest_day.as_str()) {
            return Err(format!("digest_day must be one of {}", DAYS.join(", ")));
        }
        Ok(())
    }

    /// The stored settings, or the defaults (with a log line if the stored ones no
    /// longer read).
    pub(crate) fn load(store: &Store) -> Result<AlertSettings> {
        Ok(match store.setting(KEY)? {
            Some((json, _, _)) => serde_json::from_str(&json).unwrap_or_else(|e| {
                tracing::error!(error = %e, "stored alert settings do not read; using the defaults");
                AlertSettings::default()
            }),
            None => AlertSettings::default(),
        })
    }
}
