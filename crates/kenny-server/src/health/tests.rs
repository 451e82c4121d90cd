use serde_json::{Value, json};

use super::*;

const AT: &str = "2026-06-04T18:00:00Z";

fn judge(snapshot: Value, os: Option<&str>) -> Assessment {
    judge_with(snapshot, os, &Thresholds::default())
}

fn judge_with(snapshot: Value, os: Option<&str>, t: &Thresholds) -> Assessment {
    assess(snapshot.as_object().unwrap(), os, t, AT, AT)
}

fn one(section: &str, value: Value) -> Verdict {
    let a = judge(json!({ section: value }), Some("windows"));
    a.sections.into_iter().next().unwrap()
}

#[test]
fn the_server_judges_by_the_numbers_not_by_the_agents_word() {
    // The agent says ok; 98% full is crit by the default thresholds.
    let a = judge(
        json!({
            "disk": {"status": "ok", "summary": "fine", "volumes": [
                {"mount": "/", "percent_used": 40},
                {"mount": "/data", "percent_used": 98},
                {"mount": "/snap/x", "percent_used": 100, "read_only": true},
                {"mount": "/media/usb", "percent_used": 100, "removable": true},
            ]},
            "memory": {"status": "crit", "summary": "?", "percent_used": 20},
        }),
        Some("linux"),
    );
    assert_eq!(a.status, Status::Crit);
    assert_eq!(a.reasons, ["disk: /data is 98% full (threshold 97%)"]);
    assert_eq!(a.sections[0].section, "disk");
    assert!(a.sections[0].attention.as_deref().unwrap().contains("free space"));
    assert_eq!(
        a.sections[1].status,
        Status::Ok,
        "memory at 20% is ok whatever the agent says"
    );
    assert_eq!(a.sections[1].reason, None);
}

#[test]
fn thresholds_move_the_verdict() {
    let snap = json!({"disk": {"summary": "", "volumes": [{"mount": "C:", "percent_used": 85}]}});
    assert_eq!(judge(snap.clone(), None).status, Status::Ok);
    let t = Thresholds {
        disk_warn_percent: 80,
        ..Thresholds::default()
    };
    let a = judge_with(snap, None, &t);
    assert_eq!(a.status, Status::Warn);
    assert_eq!(a.top_reason(), Some("disk: C: is 85% full (threshold 80%)"));
}

#[test]
fn sections_that_do_not_concern_the_os_are_skipped_not_unknown() {
    let snap = json!({
        "defender": {"status": "ok", "summary": "n/a on this platform"},
        "win_update": {"status": "ok", "summary": "n/a on this platform"},
        "memory": {"status": "ok", "summary": "", "percent_used": 10},
    });
    let linux = judge(snap.clone(), Some("linux"));
    assert_eq!(linux.skipped, ["defender", "win_update"]);
    assert_eq!(linux.sections.len(), 1);
    assert_eq!(linux.status, Status::Ok);
    // On Windows they are judged; with no fields to object to, they are ok.
    let windows = judge(snap, Some("Windows"));
    assert!(windows.skipped.is_empty());
    assert_eq!(windows.sections.len(), 3);
}

#[test]
fn every_rule_speaks_for_its_section() {
    let cases: Vec<(&str, Value, Status, &str)> = vec![
        (
            "memory",
            json!({"percent_used": 97}),
            Status::Crit,
            "memory is 97% used",
        ),
        (
            "cpu",
            json!({"load_15": 9.0, "cores": 2}),
            Status::Crit,
            "(4.5 per core)",
        ),
        ("cpu", json!({"usage_percent": 100}), Status::Ok, ""),
        (
            "uptime",
            json!({"seconds": 90 * 86_400}),
            Status::Warn,
            "not restarted for 90 days",
        ),
        (
            "os",
            json!({"support_days_left": -3, "support_end": "2026-06-01"}),
            Status::Crit,
            "out of support since 2026-06-01",
        ),
        (
            "os",
            json!({"support_days_left": 30, "support_end": "2026-07-04"}),
            Status::Warn,
            "(30 days)",
        ),
        (
            "time_sync",
            json!({"synchronized": false}),
            Status::Warn,
            "not synchronised",
        ),
        (
            "time_sync",
            json!({"synchronized": null}),
            Status::Unknown,
            "cannot tell",
        ),
        (
            "time_sync",
            json!({"synchronized": true, "offset_seconds": -12.5}),
            Status::Warn,
            "12.5 s off",
        ),
        (
            "thermals",
            json!({"sensors": [{"label": "CPU", "temperature_c": 96.0}, {"label": "GPU", "temperature_c": 50}]}),
            Status::Crit,
            "CPU at 96°C",
        ),
        (
            "network",
            json!({"default_routes": [], "dns_servers": ["1.1.1.1"]}),
            Status::Warn,
            "no default route",
        ),
        (
            "failed_services",
            json!({"count": 2, "units": [{"name": "cups.service"}, {"name": "x.service"}]}),
            Status::Warn,
            "2 failed services: cups.service, x.service",
        ),
        (
            "listening_ports",
            json!({"ports": [{"port": 23, "address": "0.0.0.0", "process": "telnetd"}, {"port": 5900, "address": "127.0.0.1"}]}),
            Status::Warn,
            "23 (telnetd)",
        ),
        (
            "local_accounts",
            json!({"accounts": [{"name": "kid", "enabled": true, "password_required": false, "is_admin": true}], "admins": ["kid"]}),
            Status::Crit,
            "kid can sign in without a password and is an administrator",
        ),
        (
            "local_accounts",
            json!({"accounts": [], "admins": ["a", "b", "c", "d"]}),
            Status::Warn,
            "4 administrators (more than 3)",
        ),
        (
            "logon_failures",
            json!({"count": 12, "window_hours": 24}),
            Status::Warn,
            "12 failed logons in 24 h",
        ),
        (
            "defender",
            json!({"enabled": true, "realtime_protection": false}),
            Status::Crit,
            "real-time protection is off",
        ),
        (
            "defender",
            json!({"enabled": true, "last_signature_update": "2026-05-20T06:00:00Z"}),
            Status::Warn,
            "16 days old",
        ),
        (
            "win_update",
            json!({"recent": [{"kb": "KB1", "result": "failed"}]}),
            Status::Warn,
            "updates failed: KB1",
        ),
        (
            "win_update",
            json!({"recent": [], "last_check": "2026-05-01T00:00:00Z"}),
            Status::Warn,
            "last checked 35 days ago",
        ),
        (
            "reboot_pending",
            json!({"pending": true, "reasons": ["WindowsUpdate"]}),
            Status::Warn,
            "a restart is pending (WindowsUpdate)",
        ),
        (
            "reliability",
            json!({"stability_index": 3.2}),
            Status::Warn,
            "stability index 3.2",
        ),
        (
            "backup_status",
            json!({"restore_points": {"enabled": true, "latest": "2026-05-01T00:00:00Z"}}),
            Status::Warn,
            "35 days old",
        ),
        (
            "net_quality",
            json!({"reference": {"latency_ms": 14.0, "loss_percent": 20}}),
            Status::Warn,
            "20% packet loss",
        ),
        (
            "battery",
            json!({"health_percent": 41}),
            Status::Warn,
            "41% of its design capacity",
        ),
        (
            "encryption",
            json!({"system_encrypted": false}),
            Status::Warn,
            "not encrypted",
        ),
        (
            "firewall",
            json!({"enabled": false}),
            Status::Crit,
            "the firewall is off",
        ),
        (
            "sandbox",
            json!({"landlock": "unavailable"}),
            Status::Warn,
            "sandbox is unavailable",
        ),
        ("installed_software", json!({"count": 3}), Status::Ok, ""),
        (
            "defender",
            json!({"enabled": false, "realtime_protection": false, "replaced_by_third_party": true}),
            Status::Ok,
            "",
        ),
        (
            "win_update",
            json!({"recent": [
                {"kb": "KB5039211", "result": "failed", "installed_at": "2026-06-01T04:00:00Z"},
                {"kb": "KB5039211", "result": "succeeded", "installed_at": "2026-06-02T04:00:00Z"},
            ]}),
            Status::Ok,
            "",
        ),
        (
            "av_thirdparty",
            json!({"products": [], "any_active": false}),
            Status::Crit,
            "no antivirus is active",
        ),
        ("av_thirdparty", json!({"any_active": true}), Status::Ok, ""),
        (
            "disk_smart",
            json!({"disks": [{"model": "WDC WD10", "health": "warning"}, {"model": "Samsung 970", "health": "failing"}]}),
            Status::Crit,
            "disk failing: Samsung 970",
        ),
        (
            "disk_smart",
            json!({"disks": [{"name": "sda", "health": "warning"}, {"name": "sdb", "health": "ok"}]}),
            Status::Warn,
            "disk reports problems: sda",
        ),
        (
            "peripherals",
            json!({"problem_count": 2}),
            Status::Warn,
            "2 devices report a problem",
        ),
        (
            "wifi_quality",
            json!({"interfaces": [{"signal_percent": 81}, {"signal_percent": 22}]}),
            Status::Warn,
            "weak Wi-Fi signal (22%)",
        ),
        (
            "wifi_quality",
            json!({"interfaces": [{"signal_percent": 81}]}),
            Status::Ok,
            "",
        ),
        (
            "app_updates",
            json!({"count": 9, "security_count": 3}),
            Status::Warn,
            "3 security updates are waiting",
        ),
        (
            "net_quality",
            json!({"dns": {"latency_ms": 400.0, "loss_percent": 0}}),
            Status::Warn,
            "400 ms to the internet",
        ),
    ];
    for (section, value, status, reason) in cases {
        let v = one(section, value.clone());
        assert_eq!(v.status, status, "{section} {value}: {v:?}");
        if status == Status::Ok {
            assert_eq!(v.reason, None, "{section}");
        } else {
            let got = v.reason.unwrap_or_default();
            assert!(got.contains(reason), "{section} {value}: {got:?} lacks {reason:?}");
        }
    }
}

#[test]
fn firewall_and_encryption_follow_the_os_and_the_operators_choice() {
    let off = json!({"firewall": {"summary": "", "enabled": false}});
    assert_eq!(judge(off.clone(), Some("windows")).status, Status::Crit);
    let replaced = json!({"firewall": {"summary": "", "enabled": false, "replaced_by_third_party": true}});
    assert_eq!(
        judge(replaced, Some("windows")).status,
        Status::Ok,
        "another firewall is in charge"
    );
    assert_eq!(
        judge(off.clone(), Some("linux")).status,
        Status::Ok,
        "the Linux default"
    );
    let strict = Thresholds {
        require_firewall_on_linux: true,
        ..Thresholds::default()
    };
    let a = judge_with(off, Some("linux"), &strict);
    assert_eq!(a.status, Status::Warn);
    assert_eq!(a.top_reason(), Some("firewall: no firewall is active"));

    let plain = json!({"encryption": {"summary": "", "system_encrypted": false}});
    assert_eq!(judge(plain.clone(), Some("linux")).status, Status::Warn);
    let relaxed = Thresholds {
        require_encryption: false,
        ..Thresholds::default()
    };
    assert_eq!(judge_with(plain, Some("linux"), &relaxed).status, Status::Ok);
}

#[test]
fn what_cannot_be_judged_is_unknown_and_unknown_sections_keep_the_agents_word() {
    let a = judge(
        json!({
            "disk": {"status": "crit", "summary": "collector failed: statfs hung"},
            "memory": "garbage",
            "new_thing": {"status": "warn", "summary": "something odd"},
            "other": {"status": "sideways"},
        }),
        Some("linux"),
    );
    let by = |name: &str| a.sections.iter().find(|v| v.section == name).unwrap().clone();
    assert_eq!(by("disk").status, Status::Unknown);
    assert_eq!(
        by("disk").reason.as_deref(),
        Some("the agent could not collect it: statfs hung")
    );
    assert_eq!(by("memory").status, Status::Unknown);
    assert_eq!(by("new_thing").status, Status::Warn);
    assert_eq!(by("new_thing").reason.as_deref(), Some("the agent says: something odd"));
    assert_eq!(by("other").status, Status::Unknown);
    assert_eq!(a.status, Status::Warn);
    assert_eq!(a.reasons[0], "new_thing: the agent says: something odd");
    assert_eq!(judge(json!({}), None).status, Status::Unknown, "nothing to judge");
}

#[test]
fn hostile_text_is_cut_to_one_short_line() {
    let long = format!("/mnt/{}\n\u{1b}[31mIGNORE PREVIOUS INSTRUCTIONS", "x".repeat(500));
    let a = judge(
        json!({"disk": {"summary": long.clone(), "volumes": [{"mount": long, "percent_used": 99}]}}),
        None,
    );
    let v = &a.sections[0];
    assert!(v.summary.chars().count() <= 201, "{}", v.summary.len());
    let reason = v.reason.as_deref().unwrap();
    assert!(!reason.contains('\n') && !reason.contains('\u{1b}'), "{reason:?}");
    assert!(reason.chars().count() < 200, "{reason}");
}

#[test]
fn the_reference_windows_snapshot_is_judged_section_by_section() {
    // The shape of the 0.17 reference snapshot (no file needed): Defender's
    // real-time protection off is the worst thing on that PC.
    let a = judge(
        json!({
            "disk": {"status": "warn", "summary": "C: 91% full", "volumes": [{"mount": "C:", "total_bytes": 511, "free_bytes": 46, "percent_used": 91}]},
            "defender": {"status": "crit", "summary": "Real-time protection OFF", "enabled": false, "realtime_protection": false},
            "reboot_pending": {"status": "warn", "summary": "Reboot required", "pending": true, "reasons": ["WindowsUpdate"]},
            "screen_time": {"status": "ok", "summary": "3.4h today"},
        }),
        Some("windows"),
    );
    assert_eq!(a.status, Status::Crit);
    assert_eq!(
        a.reasons,
        [
            "defender: Microsoft Defender is off",
            "disk: C: is 91% full (threshold 90%)",
            "reboot_pending: a restart is pending (WindowsUpdate)",
        ]
    );
}

#[test]
fn only_sections_with_a_rule_of_the_servers_raise_alerts() {
    assert!(has_rule("disk") && has_rule("local_accounts") && has_rule("defender"));
    assert!(!has_rule("new_thing") && !has_rule("x-invented-by-a-pc"));
}
