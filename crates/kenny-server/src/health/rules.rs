//! One rule per telemetry section: the server's own judgement of what the agent
//! reported, by the operator's [`Thresholds`]. The agent's `status` is advice; only
//! a section no rule knows falls back to it.
//!
//! Everything an agent sends is untrusted: numbers are read as numbers, and any text
//! that reaches a reason (a mount point, a service name) is cleaned and shortened,
//! since it ends up in the dashboard and in front of the chat's model.

use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::Status;
use super::thresholds::Thresholds;
use kenny_proto::catalog::Os;

/// What a rule concluded about one section.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Judgement {
    pub status: Status,
    /// Why it is not ok; `None` when it is.
    pub reason: Option<String>,
    /// What to do about it.
    pub attention: Option<String>,
}

impl Judgement {
    fn ok() -> Self {
        Judgement {
            status: Status::Ok,
            reason: None,
            attention: None,
        }
    }

    fn of(status: Status, reason: String, attention: &str) -> Self {
        if status == Status::Ok {
            return Judgement::ok();
        }
        Judgement {
            status,
            reason: Some(reason),
            attention: Some(attention.to_owned()),
        }
    }

    fn unknown(reason: impl Into<String>) -> Self {
        Judgement {
            status: Status::Unknown,
            reason: Some(reason.into()),
            attention: None,
        }
    }
}

/// What a rule may know besides the section.
pub(super) struct Context<'a> {
    pub thresholds: &'a Thresholds,
    /// When the snapshot was taken: ages are measured from here, so a verdict depends
    /// on the snapshot alone and recomputing it later gives the same answer.
    pub collected_at: Option<OffsetDateTime>,
    /// The OS the agent declared, where a rule weighs the same fact differently (no
    /// firewall is normal on a Linux desktop and a fault on Windows).
    pub os: Option<Os>,
}

/// Which PCs a section concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Applies {
    Any,
    Only(Os),
}

pub(super) struct Rule {
    pub section: &'static str,
    pub applies: Applies,
    pub judge: fn(&Map<String, Value>, &Context<'_>) -> Judgement,
}

/// Every section kenny judges itself. Sections not here are taken at the agent's word.
pub(super) const RULES: &[Rule] = &[
    rule("disk", Applies::Any, disk),
    rule("memory", Applies::Any, memory),
    rule("cpu", Applies::Any, cpu),
    rule("processes", Applies::Any, informational),
    rule("uptime", Applies::Any, uptime),
    rule("os", Applies::Any, os_support),
    rule("time_sync", Applies::Any, time_sync),
    rule("thermals", Applies::Any, thermals),
    rule("battery", Applies::Any, battery),
    rule("disk_smart", Applies::Any, disk_smart),
    rule("peripherals", Applies::Any, peripherals),
    rule("printers", Applies::Any, informational),
    rule("network", Applies::Any, network),
    rule("routing", Applies::Any, informational),
    rule("wifi_quality", Applies::Any, wifi_quality),
    rule("net_quality", Applies::Any, net_quality),
    rule("failed_services", Applies::Any, failed_services),
    rule("services", Applies::Any, informational),
    rule("scheduled_tasks", Applies::Any, informational),
    rule("autostart", Applies::Any, informational),
    rule("listening_ports", Applies::Any, listening_ports),
    rule("firewall", Applies::Any, firewall),
    rule("installed_software", Applies::Any, informational),
    rule("app_updates", Applies::Any, app_updates),
    rule("local_accounts", Applies::Any, local_accounts),
    rule("logon_failures", Applies::Any, logon_failures),
    rule("defender", Applies::Only(Os::Windows), defender),
    rule("defender_quarantine", Applies::Only(Os::Windows), informational),
    rule("av_thirdparty", Applies::Only(Os::Windows), av_thirdparty),
    rule("win_update", Applies::Only(Os::Windows), win_update),
    rule("reboot_pending", Applies::Any, reboot_pending),
    rule("encryption", Applies::Any, encryption),
    rule("reliability", Applies::Any, reliability),
    rule("backup_status", Applies::Any, backup_status),
    rule("screen_time", Applies::Any, informational),
    rule("web_activity", Applies::Any, informational),
    rule("browser_extensions", Applies::Any, informational),
    rule("sandbox", Applies::Any, sandbox),
];

const fn rule(
    section: &'static str,
    applies: Applies,
    judge: fn(&Map<String, Value>, &Context<'_>) -> Judgement,
) -> Rule {
    Rule {
        section,
        applies,
        judge,
    }
}

pub(super) fn find(section: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.section == section)
}

/// Text from the agent, made safe to show: one line, no control characters, at most
/// `max` characters.
pub(crate) fn clean(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out.trim().to_owned()
}

fn num(section: &Map<String, Value>, key: &str) -> Option<f64> {
    section.get(key).and_then(Value::as_f64).filter(|n| n.is_finite())
}

fn text<'a>(section: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    section.get(key).and_then(Value::as_str)
}

fn list<'a>(section: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    section.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn level(value: f64, warn: f64, crit: f64) -> Status {
    if value >= crit {
        Status::Crit
    } else if value >= warn {
        Status::Warn
    } else {
        Status::Ok
    }
}

fn days_since(ctx: &Context<'_>, rfc3339: Option<&str>) -> Option<f64> {
    let then = crate::clock::parse(rfc3339?)?;
    let now = ctx.collected_at?;
    Some((now - then).as_seconds_f64() / 86_400.0)
}

fn informational(_: &Map<String, Value>, _: &Context<'_>) -> Judgement {
    Judgement::ok()
}

fn disk(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let t = ctx.thresholds;
    let mut worst = Judgement::ok();
    let mut over = Vec::new();
    let volumes = list(s, "volumes");
    if volumes.is_empty() {
        return Judgement::unknown("the agent listed no volumes");
    }
    for v in volumes.iter().filter_map(Value::as_object) {
        // Read-only images are full by design, and a full USB stick is not the PC's health.
        if v.get("read_only") == Some(&Value::Bool(true)) || v.get("removable") == Some(&Value::Bool(true)) {
            continue;
        }
        let Some(percent) = num(v, "percent_used") else {
            continue;
        };
        let status = level(percent, f64::from(t.disk_warn_percent), f64::from(t.disk_crit_percent));
        if status > Status::Ok {
            over.push((status, percent, clean(text(v, "mount").unwrap_or("?"), 120)));
        }
        worst.status = worst.status.max(status);
    }
    if over.is_empty() {
        return worst;
    }
    over.sort_by(|a, b| b.1.total_cmp(&a.1));
    let listed: Vec<String> = over.iter().map(|(_, p, m)| format!("{m} is {p:.0}% full")).collect();
    let bar = if worst.status == Status::Crit {
        t.disk_crit_percent
    } else {
        t.disk_warn_percent
    };
    Judgement::of(
        worst.status,
        format!("{} (threshold {bar}%)", listed.join(", ")),
        "free space (old downloads, temp files, the recycle bin) or add storage",
    )
}

fn memory(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let t = ctx.thresholds;
    let Some(percent) = num(s, "percent_used") else {
        return Judgement::unknown("the agent reported no memory use");
    };
    let status = level(
        percent,
        f64::from(t.memory_warn_percent),
        f64::from(t.memory_crit_percent),
    );
    Judgement::of(
        status,
        format!("memory is {percent:.0}% used"),
        "see which programs use the most memory (diag_processes) and close or restart them",
    )
}

fn cpu(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let t = ctx.thresholds;
    let cores = num(s, "cores").filter(|c| *c >= 1.0);
    // Windows has no load average; one busy sample is not a problem worth an alert.
    let (Some(load), Some(cores)) = (num(s, "load_15"), cores) else {
        return Judgement::ok();
    };
    let per_core = load / cores;
    let status = level(per_core, t.cpu_load_per_core_warn, t.cpu_load_per_core_crit);
    Judgement::of(
        status,
        format!("15-minute load {load:.2} on {cores:.0} cores ({per_core:.1} per core)"),
        "see which processes keep the CPU busy (diag_processes)",
    )
}

fn uptime(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let Some(seconds) = num(s, "seconds") else {
        return Judgement::ok();
    };
    let days = seconds / 86_400.0;
    let status = if days >= f64::from(ctx.thresholds.uptime_warn_days) {
        Status::Warn
    } else {
        Status::Ok
    };
    Judgement::of(
        status,
        format!("not restarted for {days:.0} days"),
        "restart the PC so installed updates take effect",
    )
}

fn os_support(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let Some(days_left) = num(s, "support_days_left") else {
        return Judgement::ok();
    };
    let end = clean(text(s, "support_end").unwrap_or("its end of support"), 20);
    if days_left < 0.0 {
        Judgement::of(
            Status::Crit,
            format!("this OS version is out of support since {end}: no more security updates"),
            "upgrade to a supported version",
        )
    } else if days_left < ctx.thresholds.os_support_warn_days as f64 {
        Judgement::of(
            Status::Warn,
            format!("support for this OS version ends {end} ({days_left:.0} days)"),
            "plan the upgrade to a supported version",
        )
    } else {
        Judgement::ok()
    }
}

fn time_sync(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    if let Some(offset) = num(s, "offset_seconds")
        && offset.abs() >= ctx.thresholds.time_offset_warn_seconds
    {
        return Judgement::of(
            Status::Warn,
            format!("the clock is {:.1} s off its time source", offset.abs()),
            "check the time service and its network access",
        );
    }
    match s.get("synchronized") {
        Some(Value::Bool(true)) => Judgement::ok(),
        Some(Value::Bool(false)) => Judgement::of(
            Status::Warn,
            "the clock is not synchronised with a time source".into(),
            "turn on network time (timedatectl set-ntp true, or Windows Time)",
        ),
        _ => Judgement::unknown("the agent cannot tell whether the clock is synchronised"),
    }
}

fn thermals(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let t = ctx.thresholds;
    let hottest = list(s, "sensors")
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|sensor| {
            Some((
                num(sensor, "temperature_c")?,
                text(sensor, "label").unwrap_or("a sensor"),
            ))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let Some((celsius, label)) = hottest else {
        return Judgement::ok();
    };
    let status = level(celsius, t.temperature_warn_c, t.temperature_crit_c);
    Judgement::of(
        status,
        format!("{} at {celsius:.0}°C", clean(label, 40)),
        "check the fans and vents for dust, and what keeps the PC busy",
    )
}

fn network(s: &Map<String, Value>, _: &Context<'_>) -> Judgement {
    let routes = s.get("default_routes").and_then(Value::as_array);
    let dns = s.get("dns_servers").and_then(Value::as_array);
    match (routes, dns) {
        (Some(r), _) if r.is_empty() => Judgement::of(
            Status::Warn,
            "no default route: the PC cannot reach the internet".into(),
            "check the network cable or Wi-Fi and the router (net_config)",
        ),
        (_, Some(d)) if d.is_empty() => Judgement::of(
            Status::Warn,
            "no DNS servers configured".into(),
            "check the network settings (net_config)",
        ),
        _ => Judgement::ok(),
    }
}

fn failed_services(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let t = ctx.thresholds;
    let Some(count) = num(s, "count") else {
        return Judgement::ok();
    };
    let names: Vec<String> = list(s, "units")
        .iter()
        .filter_map(|u| u.as_object().and_then(|u| text(u, "name")).or(u.as_str()))
        .take(3)
        .map(|n| clean(n, 60))
        .collect();
    let status = level(
        count,
        f64::from(t.failed_services_warn),
        f64::from(t.failed_services_crit),
    );
    let named = if names.is_empty() {
        String::new()
    } else {
        format!(": {}", names.join(", "))
    };
    Judgement::of(
        status,
        format!("{count:.0} failed services{named}"),
        "look at why they failed (diag_services, diag_eventlog) and restart or disable them",
    )
}

fn listening_ports(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let risky: Vec<String> = list(s, "ports")
        .iter()
        .filter_map(Value::as_object)
        .filter(|p| {
            let port = num(p, "port").unwrap_or(0.0);
            let address = text(p, "address").unwrap_or("");
            let loopback = address.starts_with("127.") || address == "::1";
            !loopback && ctx.thresholds.risky_ports.iter().any(|r| f64::from(*r) == port)
        })
        .map(|p| {
            let process = text(p, "process")
                .map(|n| format!(" ({})", clean(n, 40)))
                .unwrap_or_default();
            format!("{:.0}{process}", num(p, "port").unwrap_or(0.0))
        })
        .collect();
    if risky.is_empty() {
        return Judgement::ok();
    }
    Judgement::of(
        Status::Warn,
        format!("risky ports open to the network: {}", risky.join(", ")),
        "turn off the service, or limit it to this PC or the local network in the firewall",
    )
}

fn local_accounts(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let mut status = Status::Ok;
    let mut reasons = Vec::new();
    for account in list(s, "accounts").iter().filter_map(Value::as_object) {
        let enabled = account.get("enabled") != Some(&Value::Bool(false));
        let name = clean(text(account, "name").unwrap_or("?"), 40);
        if enabled && account.get("password_required") == Some(&Value::Bool(false)) {
            let admin = account.get("is_admin") == Some(&Value::Bool(true));
            status = status.max(if admin { Status::Crit } else { Status::Warn });
            reasons.push(format!(
                "{name} can sign in without a password{}",
                if admin { " and is an administrator" } else { "" }
            ));
        }
        if enabled && account.get("builtin_guest") == Some(&Value::Bool(true)) {
            status = status.max(Status::Warn);
            reasons.push(format!("the guest account {name} is enabled"));
        }
    }
    let admins = list(s, "admins").len();
    if admins > ctx.thresholds.max_admins as usize {
        status = status.max(Status::Warn);
        reasons.push(format!(
            "{admins} administrators (more than {})",
            ctx.thresholds.max_admins
        ));
    }
    Judgement::of(
        status,
        reasons.join("; "),
        "review the accounts: set passwords, disable what is not used, take away admin rights nobody needs",
    )
}

fn logon_failures(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let t = ctx.thresholds;
    let Some(count) = num(s, "count") else {
        return Judgement::ok();
    };
    let hours = num(s, "window_hours").unwrap_or(24.0);
    let status = level(
        count,
        f64::from(t.logon_failures_warn),
        f64::from(t.logon_failures_crit),
    );
    Judgement::of(
        status,
        format!("{count:.0} failed logons in {hours:.0} h"),
        "see which accounts are targeted; someone may be guessing passwords",
    )
}

fn defender(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    // Defender steps back (passive or off) when another antivirus registers itself;
    // whether that one works is `av_thirdparty`'s to judge.
    if s.get("replaced_by_third_party") == Some(&Value::Bool(true)) {
        return Judgement::ok();
    }
    if s.get("enabled") == Some(&Value::Bool(false)) {
        return Judgement::of(
            Status::Crit,
            "Microsoft Defender is off".into(),
            "turn Defender on, or check that another antivirus is installed and running",
        );
    }
    if s.get("realtime_protection") == Some(&Value::Bool(false)) {
        return Judgement::of(
            Status::Crit,
            "real-time protection is off".into(),
            "turn real-time protection back on in Windows Security",
        );
    }
    if let Some(threats) = num(s, "threats_found").filter(|n| *n > 0.0) {
        return Judgement::of(
            Status::Crit,
            format!("{threats:.0} threats found"),
            "review and remove them in Windows Security",
        );
    }
    if let Some(age) = days_since(ctx, text(s, "last_signature_update"))
        && age > f64::from(ctx.thresholds.defender_signature_max_age_days)
    {
        return Judgement::of(
            Status::Warn,
            format!("virus definitions are {age:.0} days old"),
            "let Windows Update run, or update Defender's definitions",
        );
    }
    Judgement::ok()
}

fn win_update(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let recent: Vec<&Map<String, Value>> = list(s, "recent").iter().filter_map(Value::as_object).collect();
    // A failure that a later try of the same update fixed is history, not a problem.
    let fixed_later = |failed: &Map<String, Value>| {
        let (Some(kb), Some(at)) = (text(failed, "kb"), text(failed, "installed_at")) else {
            return false;
        };
        recent.iter().any(|u| {
            text(u, "kb") == Some(kb)
                && text(u, "result") == Some("succeeded")
                && text(u, "installed_at").is_some_and(|later| later > at)
        })
    };
    let failed: Vec<String> = recent
        .iter()
        .filter(|u| text(u, "result") == Some("failed") && !fixed_later(u))
        .map(|u| clean(text(u, "kb").or(text(u, "title")).unwrap_or("an update"), 40))
        .collect();
    if !failed.is_empty() {
        return Judgement::of(
            Status::Warn,
            format!("updates failed: {}", failed.join(", ")),
            "run Windows Update again and look at why it failed",
        );
    }
    if let Some(age) = days_since(ctx, text(s, "last_check"))
        && age > f64::from(ctx.thresholds.update_check_max_age_days)
    {
        return Judgement::of(
            Status::Warn,
            format!("Windows Update last checked {age:.0} days ago"),
            "check that the Windows Update service runs and can reach the internet",
        );
    }
    Judgement::ok()
}

fn reboot_pending(s: &Map<String, Value>, _: &Context<'_>) -> Judgement {
    if s.get("pending") != Some(&Value::Bool(true)) {
        return Judgement::ok();
    }
    let why: Vec<String> = list(s, "reasons")
        .iter()
        .filter_map(Value::as_str)
        .take(3)
        .map(|r| clean(r, 40))
        .collect();
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join(", "))
    };
    Judgement::of(
        Status::Warn,
        format!("a restart is pending{why}"),
        "restart the PC when nobody is using it",
    )
}

fn reliability(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let Some(index) = num(s, "stability_index") else {
        return Judgement::ok();
    };
    let status = if index < ctx.thresholds.stability_index_warn {
        Status::Warn
    } else {
        Status::Ok
    };
    Judgement::of(
        status,
        format!("stability index {index:.1} of 10"),
        "look at the recent crashes and errors (diag_eventlog)",
    )
}

fn backup_status(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let Some(points) = s.get("restore_points").and_then(Value::as_object) else {
        return Judgement::ok();
    };
    if points.get("enabled") == Some(&Value::Bool(false)) {
        return Judgement::of(
            Status::Warn,
            "system restore is off".into(),
            "turn on system protection for the system drive",
        );
    }
    if let Some(age) = days_since(ctx, text(points, "latest"))
        && age > f64::from(ctx.thresholds.backup_max_age_days)
    {
        return Judgement::of(
            Status::Warn,
            format!("the newest restore point is {age:.0} days old"),
            "create a restore point, and check the backup schedule",
        );
    }
    Judgement::ok()
}

fn net_quality(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let t = ctx.thresholds;
    let Some(reference) = s.get("reference").or_else(|| s.get("dns")).and_then(Value::as_object) else {
        return Judgement::ok();
    };
    let latency = num(reference, "latency_ms");
    let loss = num(reference, "loss_percent").unwrap_or(0.0);
    if loss >= t.packet_loss_warn_percent {
        return Judgement::of(
            Status::Warn,
            format!("{loss:.0}% packet loss to the internet"),
            "check the Wi-Fi signal, the cable and the router",
        );
    }
    match latency {
        Some(ms) if ms >= t.latency_warn_ms => Judgement::of(
            Status::Warn,
            format!("{ms:.0} ms to the internet"),
            "check the Wi-Fi signal and what uses the connection",
        ),
        _ => Judgement::ok(),
    }
}

fn battery(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let Some(health) = num(s, "health_percent") else {
        return Judgement::ok();
    };
    let status = if health < ctx.thresholds.battery_health_warn_percent {
        Status::Warn
    } else {
        Status::Ok
    };
    Judgement::of(
        status,
        format!("the battery holds {health:.0}% of its design capacity"),
        "plan a battery replacement",
    )
}

fn encryption(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    match s.get("system_encrypted") {
        Some(Value::Bool(false)) if ctx.thresholds.require_encryption => Judgement::of(
            Status::Warn,
            "the system drive is not encrypted".into(),
            "turn on BitLocker or device encryption (LUKS on Linux) so a stolen PC does not leak its data",
        ),
        _ => Judgement::ok(),
    }
}

fn firewall(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    // Another registered firewall turns Windows Firewall off by design.
    if s.get("enabled") != Some(&Value::Bool(false)) || s.get("replaced_by_third_party") == Some(&Value::Bool(true)) {
        return Judgement::ok();
    }
    match ctx.os {
        Some(Os::Windows) | None => {
            Judgement::of(Status::Crit, "the firewall is off".into(), "turn the firewall back on")
        }
        // Most Linux desktops ship with no firewall rules at all.
        Some(_) if ctx.thresholds.require_firewall_on_linux => Judgement::of(
            Status::Warn,
            "no firewall is active".into(),
            "turn on ufw or firewalld, or load an nftables ruleset",
        ),
        Some(_) => Judgement::ok(),
    }
}

fn av_thirdparty(s: &Map<String, Value>, _: &Context<'_>) -> Judgement {
    if s.get("any_active") != Some(&Value::Bool(false)) {
        return Judgement::ok();
    }
    Judgement::of(
        Status::Crit,
        "no antivirus is active".into(),
        "turn Microsoft Defender back on, or renew and start the installed antivirus",
    )
}

fn disk_smart(s: &Map<String, Value>, _: &Context<'_>) -> Judgement {
    let named = |health: &str| -> Vec<String> {
        list(s, "disks")
            .iter()
            .filter_map(Value::as_object)
            .filter(|d| text(d, "health") == Some(health))
            .take(3)
            .map(|d| clean(text(d, "model").or(text(d, "name")).unwrap_or("a disk"), 40))
            .collect()
    };
    let failing = named("failing");
    if !failing.is_empty() {
        return Judgement::of(
            Status::Crit,
            format!("disk failing: {}", failing.join(", ")),
            "copy what matters off this disk now and replace it",
        );
    }
    let warning = named("warning");
    if !warning.is_empty() {
        return Judgement::of(
            Status::Warn,
            format!("disk reports problems: {}", warning.join(", ")),
            "check the backups and plan to replace the disk",
        );
    }
    Judgement::ok()
}

fn peripherals(s: &Map<String, Value>, _: &Context<'_>) -> Judgement {
    match num(s, "problem_count") {
        Some(n) if n >= 1.0 => Judgement::of(
            Status::Warn,
            format!("{n:.0} devices report a problem"),
            "look at the devices with a problem (a missing driver, a device that failed to start)",
        ),
        _ => Judgement::ok(),
    }
}

fn wifi_quality(s: &Map<String, Value>, ctx: &Context<'_>) -> Judgement {
    let weakest = list(s, "interfaces")
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|i| num(i, "signal_percent"))
        .reduce(f64::min);
    match weakest {
        Some(signal) if signal < ctx.thresholds.wifi_signal_warn_percent => Judgement::of(
            Status::Warn,
            format!("weak Wi-Fi signal ({signal:.0}%)"),
            "move the PC or the router closer, or add an access point",
        ),
        _ => Judgement::ok(),
    }
}

fn app_updates(s: &Map<String, Value>, _: &Context<'_>) -> Judgement {
    match num(s, "security_count") {
        Some(n) if n >= 1.0 => Judgement::of(
            Status::Warn,
            format!("{n:.0} security updates are waiting"),
            "install the pending updates (package_update)",
        ),
        _ => Judgement::ok(),
    }
}

fn sandbox(s: &Map<String, Value>, _: &Context<'_>) -> Judgement {
    match text(s, "landlock") {
        Some("enforced") | None => Judgement::ok(),
        Some(other) => Judgement::of(
            Status::Warn,
            format!(
                "kenny's command sandbox is {} on this PC: shell commands run without Landlock",
                clean(other, 20)
            ),
            "update the kernel to one with Landlock (5.13 or newer) to confine commands",
        ),
    }
}
