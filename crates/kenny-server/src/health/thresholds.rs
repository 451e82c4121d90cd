//! The numbers the health rules judge by. A superuser changes them on the dashboard's
//! Alerts page or through `PUT /api/health/thresholds`; every field has a default
//! (documented in `docs/health.md`), and a body that names a few fields leaves the rest
//! as they were.

use serde::{Deserialize, Serialize};

/// Every threshold the rules use. `warn` fires at or above its value, `crit` at or
/// above its own; a PC at a warn level but under crit is `warn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Thresholds {
    /// A writable fixed volume this full (percent used) is `warn` ...
    pub disk_warn_percent: u8,
    /// ... and this full, `crit`.
    pub disk_crit_percent: u8,
    pub memory_warn_percent: u8,
    pub memory_crit_percent: u8,
    /// The 15-minute load average per core (Linux, macOS).
    pub cpu_load_per_core_warn: f64,
    pub cpu_load_per_core_crit: f64,
    /// The hottest sensor, in °C.
    pub temperature_warn_c: f64,
    pub temperature_crit_c: f64,
    /// Days before the OS version's end of support from which it is `warn` (past the
    /// end it is `crit`).
    pub os_support_warn_days: i64,
    /// A clock this far off its time source (seconds, where the agent can tell).
    pub time_offset_warn_seconds: f64,
    /// Failed system services.
    pub failed_services_warn: u32,
    pub failed_services_crit: u32,
    /// Failed logons in the agent's window (24 h).
    pub logon_failures_warn: u32,
    pub logon_failures_crit: u32,
    /// More administrators than this is `warn`.
    pub max_admins: u32,
    /// Days without a restart from which a PC is `warn` (updates wait for one).
    pub uptime_warn_days: u32,
    /// Ports that should not listen on anything but loopback (telnet, FTP, VNC, ...).
    pub risky_ports: Vec<u16>,
    /// Windows Defender signatures older than this (days) are `warn`.
    pub defender_signature_max_age_days: u32,
    /// Windows Update not checked for this many days is `warn`.
    pub update_check_max_age_days: u32,
    /// A reliability (stability) index below this (0 to 10) is `warn`.
    pub stability_index_warn: f64,
    /// The newest restore point older than this (days) is `warn`.
    pub backup_max_age_days: u32,
    /// Round trip to the internet reference host (ms) and packet loss (percent).
    pub latency_warn_ms: f64,
    pub packet_loss_warn_percent: f64,
    /// A battery whose full charge is below this share of its design capacity.
    pub battery_health_warn_percent: f64,
    /// A Wi-Fi signal weaker than this (percent) is `warn`.
    pub wifi_signal_warn_percent: f64,
    /// An unencrypted system drive is `warn`; off for fleets where that is accepted
    /// (servers in a locked room).
    pub require_encryption: bool,
    /// A Linux PC with no active firewall is `warn` (on Windows it is always `crit`).
    pub require_firewall_on_linux: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            disk_warn_percent: 90,
            disk_crit_percent: 97,
            memory_warn_percent: 90,
            memory_crit_percent: 97,
            cpu_load_per_core_warn: 2.0,
            cpu_load_per_core_crit: 4.0,
            temperature_warn_c: 85.0,
            temperature_crit_c: 95.0,
            os_support_warn_days: 90,
            time_offset_warn_seconds: 5.0,
            failed_services_warn: 1,
            failed_services_crit: 5,
            logon_failures_warn: 10,
            logon_failures_crit: 50,
            max_admins: 3,
            uptime_warn_days: 60,
            risky_ports: vec![21, 23, 512, 513, 514, 5800, 5900],
            defender_signature_max_age_days: 7,
            update_check_max_age_days: 14,
            stability_index_warn: 5.0,
            backup_max_age_days: 14,
            latency_warn_ms: 150.0,
            packet_loss_warn_percent: 5.0,
            battery_health_warn_percent: 60.0,
            wifi_signal_warn_percent: 40.0,
            require_encryption: true,
            require_firewall_on_linux: false,
        }
    }
}

impl Thresholds {
    /// Checks that the numbers make sense together; the error names the field and says
    /// what would be accepted.
    pub(crate) fn validate(&self) -> Result<(), String> {
        fn percent_pair(name: &str, warn: u8, crit: u8) -> Result<(), String> {
            if !(1..=100).contains(&warn) || !(1..=100).contains(&crit) {
                return Err(format!("{name}_warn_percent and {name}_crit_percent must be 1 to 100"));
            }
            if warn > crit {
                return Err(format!(
                    "{name}_warn_percent ({warn}) is above {name}_crit_percent ({crit}); warn must not exceed crit"
                ));
            }
            Ok(())
        }
        fn ordered(warn_name: &str, warn: f64, crit_name: &str, crit: f64) -> Result<(), String> {
            if !warn.is_finite() || !crit.is_finite() || warn <= 0.0 || crit <= 0.0 {
                return Err(format!("{warn_name} and {crit_name} must be positive numbers"));
            }
            if warn > crit {
                return Err(format!(
                    "{warn_name} ({warn}) is above {crit_name} ({crit}); warn must not exceed crit"
                ));
            }
            Ok(())
        }
        fn positive(name: &str, value: f64) -> Result<(), String> {
            if value.is_finite() && value >= 0.0 {
                Ok(())
            } else {
                Err(format!("{name} must be a number of 0 or more"))
            }
        }
        percent_pair("disk", self.disk_warn_percent, self.disk_crit_percent)?;
        percent_pair("memory", self.memory_warn_percent, self.memory_crit_percent)?;
        ordered(
            "cpu_load_per_core_warn",
            self.cpu_load_per_core_warn,
            "cpu_load_per_core_crit",
            self.cpu_load_per_core_crit,
        )?;
        ordered(
            "temperature_warn_c",
            self.temperature_warn_c,
            "temperature_crit_c",
            self.temperature_crit_c,
        )?;
        ordered(
            "failed_services_warn",
            f64::from(self.failed_services_warn),
            "failed_services_crit",
            f64::from(self.failed_services_crit),
        )?;
        ordered(
            "logon_failures_warn",
            f64::from(self.logon_failures_warn),
            "logon_failures_crit",
            f64::from(self.logon_failures_crit),
        )?;
        if !(0..=3650).contains(&self.os_support_warn_days) {
            return Err("os_support_warn_days must be 0 to 3650".into());
        }
        positive("time_offset_warn_seconds", self.time_offset_warn_seconds)?;
        for (name, days) in [
            ("uptime_warn_days", self.uptime_warn_days),
            ("defender_signature_max_age_days", self.defender_signature_max_age_days),
            ("update_check_max_age_days", self.update_check_max_age_days),
            ("backup_max_age_days", self.backup_max_age_days),
        ] {
            if !(1..=3650).contains(&days) {
                return Err(format!("{name} must be 1 to 3650"));
            }
        }
        if self.time_offset_warn_seconds <= 0.0 || self.latency_warn_ms <= 0.0 {
            return Err("time_offset_warn_seconds and latency_warn_ms must be more than 0".into());
        }
        if !(0.0..=10.0).contains(&self.stability_index_warn) {
            return Err("stability_index_warn must be 0 to 10".into());
        }
        positive("latency_warn_ms", self.latency_warn_ms)?;
        if !(0.0..=100.0).contains(&self.packet_loss_warn_percent) {
            return Err("packet_loss_warn_percent must be 0 to 100".into());
        }
        if !(0.0..=100.0).contains(&self.battery_health_warn_percent) {
            return Err("battery_health_warn_percent must be 0 to 100".into());
        }
        if !(0.0..=100.0).contains(&self.wifi_signal_warn_percent) {
            return Err("wifi_signal_warn_percent must be 0 to 100".into());
        }
        if self.risky_ports.len() > 64 {
            return Err("risky_ports holds at most 64 ports".into());
        }
        if self.risky_ports.contains(&0) {
            return Err("risky_ports: 0 is not a port".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_valid_and_a_partial_body_keeps_the_rest() {
        Thresholds::default().validate().unwrap();
        let t: Thresholds = serde_json::from_value(json!({"disk_warn_percent": 80})).unwrap();
        assert_eq!(t.disk_warn_percent, 80);
        assert_eq!(t.disk_crit_percent, Thresholds::default().disk_crit_percent);
    }

    #[test]
    fn nonsense_is_refused_with_the_field_named() {
        let bad = |v: serde_json::Value| {
            let t: Thresholds = serde_json::from_value(v).unwrap();
            t.validate().unwrap_err()
        };
        assert!(bad(json!({"disk_warn_percent": 98})).contains("disk_warn_percent (98) is above"));
        assert!(bad(json!({"memory_crit_percent": 0})).contains("memory_warn_percent and memory_crit_percent"));
        assert!(bad(json!({"temperature_warn_c": -1.0})).contains("temperature_warn_c"));
        assert!(bad(json!({"risky_ports": [0]})).contains("risky_ports"));
        let unknown = serde_json::from_value::<Thresholds>(json!({"disk_warn": 1})).unwrap_err();
        assert!(unknown.to_string().contains("disk_warn"), "{unknown}");
    }
}
