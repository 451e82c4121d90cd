//! The firewall section: whether a firewall filters the traffic coming into this PC, and which one is in charge.
//!
//! Windows: `Get-NetFirewallProfile -PolicyStore ActiveStore` (the settings in force,
//! Group Policy included) and the state of the firewall service (`mpssvc`); `enabled` is
//! true when the service runs and every profile is on. The firewalls registered with
//! Security Center (`root/SecurityCenter2:FirewallProduct`) tell a Windows Firewall that
//! another firewall turned off from one that is simply off.
//!
//! Linux: the front-ends first, which say what is meant to filter without needing root:
//! firewalld (running per `systemctl is-active`, or its pid file under `/run`), then ufw
//! (`ENABLED=yes` in `/etc/ufw/ufw.conf`). The kernel's own rules can only be listed by
//! root (`nft -j list ruleset`, else `iptables-save`, else `iptables-legacy-save`); they
//! count the rules and, when no front-end is on, tell whether anything filters incoming
//! traffic. `KENNY_ETC_ROOT` and `KENNY_RUN_ROOT` stand in for `/etc` and `/run`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::command::{self, Output, RunError, first_line};
use super::files::{etc_root, read_small, read_text, root_from_env};
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, not_collected_here, section as section_of};
use crate::tools::psjson;
use crate::tools::systemd::is_running as systemd_running;

/// Each Linux tool gets this long (up to four run one after the other, within the
/// collection's 15 s); `nft` on a large ruleset takes well under a second.
const TOOL_TIMEOUT: Duration = Duration::from_secs(3);
/// Windows has three profiles; anything beyond a handful is not a real profile list.
const MAX_PROFILES: usize = 8;
/// Text from the PC (profile names, error lines) is cut to this many characters.
const MAX_TEXT: usize = 200;

static WINDOWS_QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$service = Get-Service -Name mpssvc -ErrorAction SilentlyContinue
$state = if ($service) { [string]$service.Status } else { $null }
# With the service stopped the active store cannot be read, and nothing is filtered anyway.
$profiles = @()
if ($state -eq 'Running') {
    $profiles = @(Get-NetFirewallProfile -PolicyStore ActiveStore |
        Select-Object Name, Enabled, DefaultInboundAction, DefaultOutboundAction)
}
# A firewall registered with Security Center turns Windows Firewall off on purpose.
# Windows Server has no Security Center: Others stays null there.
$others = $null
try {
    $others = @(Get-CimInstance -Namespace root/SecurityCenter2 -ClassName FirewallProduct |
        Select-Object displayName, productState)
} catch { }
[pscustomobject]@{ Service = $state; Profiles = $profiles; Others = $others } | ConvertTo-Json -Compress -Depth 3
"#,
    limit: Duration::from_secs(10),
    parse: parse_windows,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&WINDOWS_QUERY)
}

fn cut(text: &str) -> String {
    super::format::clip(text, MAX_TEXT)
}

// ---------------------------------------------------------------------------------------
// Windows

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Value::Object(top) = value else {
        return Err("Get-NetFirewallProfile printed no result object".to_owned());
    };
    let service = psjson::text(&top, "Service");
    let rows = psjson::rows_of(top.get("Profiles").cloned().unwrap_or(Value::Null))?;
    let count = rows.len();
    let profiles: Vec<Value> = rows.iter().take(MAX_PROFILES).map(windows_profile).collect();
    let others = psjson::rows_of(top.get("Others").cloned().unwrap_or(Value::Null))?;
    let third_party: Vec<String> = others
        .iter()
        .filter(|row| third_party_active(row))
        .filter_map(|row| psjson::text(row, "displayName"))
        .take(MAX_PROFILES)
        .map(|name| cut(name.trim()))
        .collect();
    Ok(windows_section(service.as_deref(), &profiles, count, &third_party))
}

/// `productState` of a Security Center product: the second byte has 0x10 set when the
/// product is on (the layout `defender` decodes for antivirus products).
fn third_party_active(row: &Map<String, Value>) -> bool {
    psjson::number(row, "productState").is_some_and(|state| (state >> 8) & 0x10 != 0)
}

fn windows_profile(row: &Map<String, Value>) -> Value {
    let name = psjson::text(row, "Name").map_or_else(|| "unknown".to_owned(), |n| cut(&n.to_lowercase()));
    json!({
        "name": name,
        "enabled": gpo_boolean(row.get("Enabled")),
        "default_inbound": action(row.get("DefaultInboundAction"), "block"),
        "default_outbound": action(row.get("DefaultOutboundAction"), "allow"),
    })
}

/// `Enabled` is a GpoBoolean: False (0), True (1), NotConfigured (2). Not configured in
/// the active store means the built-in default, which is on.
fn gpo_boolean(value: Option<&Value>) -> Option<bool> {
    match value? {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_i64()? {
            0 => Some(false),
            1 | 2 => Some(true),
            _ => None,
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "false" | "0" => Some(false),
            "true" | "1" | "notconfigured" | "2" => Some(true),
            _ => None,
        },
        _ => None,
    }
}

/// `DefaultInboundAction`/`DefaultOutboundAction`: NotConfigured (0), Allow (2), Block
/// (4). Not configured means Windows' default for that direction (`default`): block
/// inbound, allow outbound.
fn action(value: Option<&Value>, default: &'static str) -> Value {
    let code = match value {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "notconfigured" => Some(0),
            "allow" => Some(2),
            "block" => Some(4),
            other => other.parse().ok(),
        },
        _ => None,
    };
    match code {
        Some(0) => default.into(),
        Some(2) => "allow".into(),
        Some(4) => "block".into(),
        _ => Value::Null,
    }
}

fn windows_section(service: Option<&str>, profiles: &[Value], count: usize, third_party: &[String]) -> Section {
    let running = service.is_some_and(|s| s.eq_ignore_ascii_case("running"));
    let off: Vec<&str> = profiles
        .iter()
        .filter(|p| p["enabled"] != Value::Bool(true))
        .filter_map(|p| p["name"].as_str())
        .collect();
    let enabled = running && count > 0 && off.is_empty();
    let replaced = !enabled && !third_party.is_empty();
    let (status, summary, reason) = if replaced {
        let summary = format!("Windows Firewall is off; {} filters instead", third_party.join(", "));
        let why =
            "another firewall registered with Windows Security Center is on and turned Windows Firewall off".to_owned();
        (Status::Ok, summary, Some(why))
    } else if !running {
        let state = service.map_or_else(|| "missing".to_owned(), |s| cut(&s.to_lowercase()));
        let why = format!("the Windows Firewall service (mpssvc) is {state}: nothing is filtered");
        (Status::Crit, why.clone(), Some(why))
    } else if count == 0 {
        let why = "Windows reported no firewall profiles".to_owned();
        (Status::Crit, why.clone(), Some(why))
    } else if !off.is_empty() {
        let why = format!("the firewall is off for {}", profile_list(&off));
        (Status::Crit, why.clone(), Some(why))
    } else if let Some(open) = open_inbound(profiles) {
        // Allowing everything inbound by default leaves the firewall on in name only.
        let summary = format!("Windows Firewall is on, but {open} allows inbound traffic by default");
        let why = "inbound connections that no rule blocks are let in".to_owned();
        (Status::Warn, summary, Some(why))
    } else {
        let summary = "Windows Firewall is on for every profile".to_owned();
        (Status::Ok, summary, None)
    };
    section_of(
        status,
        summary,
        json!({
            "backend": "windows",
            "enabled": enabled,
            "service": service.map(|s| cut(&s.to_lowercase())),
            "profiles": profiles,
            "count": count,
            "truncated": count > profiles.len(),
            "replaced_by_third_party": replaced,
            "third_party": third_party,
            "reason": reason,
        }),
    )
}

fn open_inbound(profiles: &[Value]) -> Option<String> {
    let open: Vec<&str> = profiles
        .iter()
        .filter(|p| p["default_inbound"] == "allow")
        .filter_map(|p| p["name"].as_str())
        .collect();
    (!open.is_empty()).then(|| profile_list(&open))
}

/// `the public profile`, `the private and public profiles`.
fn profile_list(names: &[&str]) -> String {
    match names {
        [] => "no profile".to_owned(),
        [one] => format!("the {one} profile"),
        [first @ .., last] => format!("the {} and {last} profiles", first.join(", ")),
    }
}

// ---------------------------------------------------------------------------------------
// Linux

fn run_root() -> PathBuf {
    root_from_env("KENNY_RUN_ROOT", "/run")
}

pub(super) async fn section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    let etc = etc_root();
    let run = run_root();
    let firewalld = if firewalld_installed(&etc) {
        match firewalld_running(&run).await {
            Some(true) => Firewalld::Running,
            Some(false) => Firewalld::Stopped,
            None => Firewalld::Unknown,
        }
    } else {
        Firewalld::Absent
    };
    let facts = Facts {
        ufw: ufw_enabled(&etc),
        firewalld,
        kernel: if is_root() {
            kernel_rules().await
        } else {
            Kernel::NotRoot
        },
    };
    Ok(judge(&facts))
}

fn is_root() -> bool {
    #[cfg(unix)]
    {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() == 0 }
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// What the Linux sources said.
#[derive(Debug)]
struct Facts {
    /// `None`: ufw is not installed; else whether ufw.conf turns it on.
    ufw: Option<bool>,
    firewalld: Firewalld,
    kernel: Kernel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Firewalld {
    Absent,
    Running,
    Stopped,
    /// Installed, but neither systemd nor a pid file says whether it runs.
    Unknown,
}

impl Firewalld {
    fn as_json(self) -> Value {
        match self {
            Firewalld::Absent => Value::Null,
            Firewalld::Running => "running".into(),
            Firewalld::Stopped => "stopped".into(),
            Firewalld::Unknown => "unknown".into(),
        }
    }
}

/// The rules loaded in the kernel.
#[derive(Debug)]
enum Kernel {
    /// Only root may list them.
    NotRoot,
    /// Neither nft nor iptables is installed, so nothing can have loaded rules.
    NoTools,
    Read(Rules),
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
struct Rules {
    backend: &'static str,
    count: u64,
    /// An input hook with a drop policy or any rule: something looks at incoming traffic.
    filters_input: bool,
}

fn ufw_enabled(etc: &Path) -> Option<bool> {
    let (text, _) = read_text(&etc.join("ufw/ufw.conf"), 64 * 1024).ok()?;
    let value = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.trim() == "ENABLED")
        .map(|(_, v)| v.trim().trim_matches(|c| c == '"' || c == '\'').to_ascii_lowercase())
        .next_back();
    // ufw's own default, when the line is missing, is off.
    Some(value.as_deref() == Some("yes"))
}

fn firewalld_installed(etc: &Path) -> bool {
    etc.join("firewalld/firewalld.conf").is_file()
}

async fn firewalld_running(run: &Path) -> Option<bool> {
    if systemd_running() {
        // is-active prints the state and exits non-zero for anything but active.
        if let Ok(out) = command::run("systemctl", &["is-active", "firewalld"], TOOL_TIMEOUT).await
            && !out.stdout.trim().is_empty()
        {
            return Some(unit_active(&out.stdout));
        }
    }
    pid_file_alive(&run.join("firewalld.pid"), Path::new("/proc"))
}

fn unit_active(state: &str) -> bool {
    matches!(state.trim(), "active" | "reloading")
}

/// Whether the process a pid file names still exists; `None` without a readable pid file.
fn pid_file_alive(pid_file: &Path, proc: &Path) -> Option<bool> {
    let pid: u32 = read_small(pid_file)?.parse().ok()?;
    Some(proc.join(pid.to_string()).is_dir())
}

/// The first tool that shows rules wins: nft sees iptables-nft's rules too, and
/// `iptables-legacy-save` is only asked when the others see nothing.
async fn kernel_rules() -> Kernel {
    let mut failures = Vec::new();
    let mut empty: Option<Rules> = None;
    let tools: [(&str, &[&str], &'static str); 3] = [
        ("nft", &["-j", "list", "ruleset"], "nftables"),
        ("iptables-save", &[], "iptables"),
        ("iptables-legacy-save", &[], "iptables"),
    ];
    for (program, args, backend) in tools {
        let read = match command::run(program, args, TOOL_TIMEOUT).await {
            Ok(out) if out.success && !out.truncated => parse_rules(backend, &out.stdout),
            Ok(out) => Err(first_line(&out)),
            Err(RunError::Missing) => continue,
            Err(e) => Err(e.describe(program)),
        };
        match read {
            Ok(rules) if rules.count > 0 || rules.filters_input => return Kernel::Read(rules),
            Ok(rules) => {
                empty.get_or_insert(rules);
            }
            Err(why) => failures.push(format!("{program}: {}", cut(&why))),
        }
    }
    match empty {
        Some(rules) => Kernel::Read(rules),
        None if failures.is_empty() => Kernel::NoTools,
        None => Kernel::Failed(failures.join("; ")),
    }
}

fn parse_rules(backend: &'static str, text: &str) -> Result<Rules, String> {
    if backend == "nftables" {
        nft_rules(text)
    } else {
        Ok(iptables_rules(text))
    }
}

/// `nft -j list ruleset`: `{"nftables": [{"metainfo": ..}, {"table": ..}, {"chain": ..},
/// {"rule": ..}, ..]}` (libnftables-json(5)).
fn nft_rules(text: &str) -> Result<Rules, String> {
    let value: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("nft printed something that is not its JSON ruleset ({e})"))?;
    let items = value
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or("nft's JSON has no `nftables` list")?;
    let key = |o: &Value| {
        (
            o.get("family").and_then(Value::as_str).unwrap_or_default().to_owned(),
            o.get("table").and_then(Value::as_str).unwrap_or_default().to_owned(),
        )
    };
    let input_chains: Vec<((String, String), String, bool)> = items
        .iter()
        .filter_map(|item| item.get("chain"))
        .filter(|c| c.get("hook").and_then(Value::as_str) == Some("input"))
        .filter(|c| c.get("type").and_then(Value::as_str).is_none_or(|t| t == "filter"))
        .map(|c| {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let drops = c.get("policy").and_then(Value::as_str) == Some("drop");
            (key(c), name, drops)
        })
        .collect();
    let rules: Vec<&Value> = items.iter().filter_map(|item| item.get("rule")).collect();
    // Rules that only accept (libvirt's, Tailscale's, "established, accept") filter
    // nothing: the input hook filters when its policy drops, or when one of its rules
    // drops or rejects, or jumps into a table that has such a rule.
    let verdict_in = |r: &Value, words: &[&str]| {
        r.get("expr")
            .and_then(Value::as_array)
            .is_some_and(|exprs| exprs.iter().any(|e| words.iter().any(|w| e.get(*w).is_some())))
    };
    let filters_input = input_chains.iter().any(|(table, name, drops)| {
        let table_blocks = rules
            .iter()
            .any(|r| key(r) == *table && verdict_in(r, &["drop", "reject"]));
        *drops
            || rules.iter().any(|r| {
                key(r) == *table
                    && r.get("chain").and_then(Value::as_str) == Some(name)
                    && (verdict_in(r, &["drop", "reject"]) || (table_blocks && verdict_in(r, &["jump", "goto"])))
            })
    });
    Ok(Rules {
        backend: "nftables",
        count: rules.len() as u64,
        filters_input,
    })
}

/// `iptables-save`: `*table`, `:CHAIN POLICY [packets:bytes]`, `-A CHAIN ...`, `COMMIT`.
fn iptables_rules(text: &str) -> Rules {
    let mut table = "";
    let mut count = 0;
    let mut input_drops = false;
    let mut input_jumps = false;
    let mut filter_blocks = false;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('*') {
            table = name;
        } else if let Some(rule) = line.strip_prefix("-A ") {
            count += 1;
            if table != "filter" {
                continue;
            }
            let target = rule.split(" -j ").nth(1).and_then(|t| t.split_whitespace().next());
            let blocks = matches!(target, Some("DROP" | "REJECT"));
            filter_blocks |= blocks;
            if rule.split_whitespace().next() == Some("INPUT") {
                // Only accepting (libvirt's, Tailscale's) filters nothing.
                input_drops |= blocks;
                input_jumps |= target.is_some_and(|t| !matches!(t, "ACCEPT" | "RETURN" | "LOG" | "DROP" | "REJECT"));
            }
        } else if let Some(chain) = line.strip_prefix(":INPUT ") {
            input_drops |= table == "filter" && chain.split_whitespace().next() == Some("DROP");
        }
    }
    let filters_input = input_drops || (input_jumps && filter_blocks);
    Rules {
        backend: "iptables",
        count,
        filters_input,
    }
}

/// What the section concludes.
struct Verdict {
    backend: &'static str,
    /// `None`: cannot be told, and `reason` says why.
    enabled: Option<bool>,
    status: Status,
    summary: String,
    reason: Option<String>,
}

fn judge(facts: &Facts) -> Section {
    let rules = match &facts.kernel {
        Kernel::Read(rules) => Some(rules),
        _ => None,
    };
    let rules_count = rules.map(|r| r.count);
    let v = verdict(facts, rules);
    section_of(
        v.status,
        v.summary,
        json!({
            "backend": v.backend,
            "enabled": v.enabled,
            "rules_count": rules_count,
            "ufw": facts.ufw.map(|on| if on { "on" } else { "off" }),
            "firewalld": facts.firewalld.as_json(),
            "reason": v.reason,
        }),
    )
}

/// A running front-end is in charge; without one, rules in the kernel that look at
/// incoming traffic are.
fn verdict(facts: &Facts, rules: Option<&Rules>) -> Verdict {
    let loaded = rules.map_or_else(String::new, |r| format!(" ({} rules loaded)", r.count));
    let unreadable = match &facts.kernel {
        Kernel::NotRoot => Some("the kernel's rules can be listed by root only".to_owned()),
        Kernel::Failed(why) => Some(format!("the kernel's rules could not be read: {why}")),
        _ => None,
    };
    let on = |backend: &'static str, summary: String, reason: Option<String>| Verdict {
        backend,
        enabled: Some(true),
        status: Status::Ok,
        summary,
        reason,
    };
    if facts.firewalld == Firewalld::Running {
        on("firewalld", format!("firewalld is running{loaded}"), unreadable)
    } else if facts.ufw == Some(true) {
        on("ufw", format!("ufw is on{loaded}"), unreadable)
    } else if let Some(r) = rules.filter(|r| r.filters_input) {
        let summary = format!("{} rules filter incoming traffic{loaded}", r.backend);
        on(r.backend, summary, None)
    } else {
        off_or_unknown(facts, rules)
    }
}

/// No front-end is on and no rule is known to filter incoming traffic.
fn off_or_unknown(facts: &Facts, rules: Option<&Rules>) -> Verdict {
    let mut frontends = Vec::new();
    match facts.firewalld {
        Firewalld::Unknown => frontends.push("firewalld is installed but whether it runs cannot be told"),
        Firewalld::Stopped => frontends.push("firewalld is installed but not running"),
        Firewalld::Absent | Firewalld::Running => {}
    }
    if facts.ufw == Some(false) {
        frontends.push("ufw is installed but off");
    }
    let backend = match (facts.firewalld, facts.ufw, rules) {
        (Firewalld::Stopped | Firewalld::Unknown, _, _) => "firewalld",
        (_, Some(_), _) => "ufw",
        (_, None, Some(r)) if r.count > 0 => r.backend,
        _ => "none",
    };
    let frontend_text = if frontends.is_empty() {
        "neither ufw nor firewalld is installed".to_owned()
    } else {
        frontends.join(" and ")
    };
    let unknown = |summary: &str, reason: String| Verdict {
        backend,
        enabled: None,
        status: Status::Warn,
        summary: summary.to_owned(),
        reason: Some(reason),
    };
    let off = |reason: String| Verdict {
        backend,
        enabled: Some(false),
        status: Status::Crit,
        summary: "no firewall: nothing filters incoming traffic".to_owned(),
        reason: Some(reason),
    };
    match &facts.kernel {
        Kernel::NotRoot => unknown(
            "cannot tell whether a firewall is on",
            format!("{frontend_text}; rules loaded directly into the kernel can be listed by root only"),
        ),
        Kernel::Failed(why) => unknown(
            "cannot tell whether a firewall is on",
            format!("{frontend_text}; the kernel's rules could not be read ({why})"),
        ),
        _ if facts.firewalld == Firewalld::Unknown => unknown(
            "cannot tell whether firewalld is running",
            format!("{frontend_text}, and no kernel rule filters incoming traffic"),
        ),
        Kernel::NoTools => off(format!("{frontend_text}, and neither nft nor iptables is installed")),
        Kernel::Read(r) if r.count == 0 => off(format!("{frontend_text}; no firewall rule is loaded")),
        Kernel::Read(r) => off(format!(
            "{frontend_text}; {} {} rules are loaded, but none filters incoming traffic (forwarding and NAT only, as container engines set up)",
            r.count, r.backend
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(stdout: &str) -> Output {
        Output::printed(stdout, "", true)
    }

    #[test]
    fn the_windows_query_reads_the_active_profiles_and_the_service() {
        let script = WINDOWS_QUERY.script;
        assert!(
            script.contains("Get-NetFirewallProfile -PolicyStore ActiveStore"),
            "{script}"
        );
        assert!(script.contains("Get-Service -Name mpssvc"), "{script}");
        assert!(
            script.contains("-Namespace root/SecurityCenter2 -ClassName FirewallProduct"),
            "{script}"
        );
        for property in ["Name", "Enabled", "DefaultInboundAction", "DefaultOutboundAction"] {
            assert!(script.contains(property), "{property}");
        }
        assert!(windows_query().is_some());
    }

    #[test]
    fn windows_enums_as_numbers_or_names() {
        let row = |enabled: Value, inbound: Value, outbound: Value| {
            let mut map = Map::new();
            map.insert("Name".into(), "Public".into());
            map.insert("Enabled".into(), enabled);
            map.insert("DefaultInboundAction".into(), inbound);
            map.insert("DefaultOutboundAction".into(), outbound);
            windows_profile(&map)
        };
        assert_eq!(
            row(json!(1), json!(4), json!(2)),
            json!({"name": "public", "enabled": true, "default_inbound": "block", "default_outbound": "allow"})
        );
        assert_eq!(
            row(json!("False"), json!("NotConfigured"), json!("NotConfigured")),
            json!({"name": "public", "enabled": false, "default_inbound": "block", "default_outbound": "allow"})
        );
        assert_eq!(row(json!(2), json!("Allow"), json!(4))["default_inbound"], "allow");
        assert_eq!(row(json!(2), json!(2), json!(4))["enabled"], true);
        assert_eq!(row(json!(7), json!(9), json!(null))["enabled"], Value::Null);
        assert_eq!(row(json!(7), json!(9), json!(null))["default_inbound"], Value::Null);
    }

    #[test]
    fn profiles_are_named_in_a_sentence() {
        assert_eq!(profile_list(&["public"]), "the public profile");
        assert_eq!(profile_list(&["private", "public"]), "the private and public profiles");
        assert_eq!(
            profile_list(&["domain", "private", "public"]),
            "the domain, private and public profiles"
        );
    }

    #[test]
    fn windows_one_profile_comes_as_an_object() {
        let s = parse_windows(
            &out(r#"{"Service":"Running","Profiles":{"Name":"Domain","Enabled":1,"DefaultInboundAction":0,"DefaultOutboundAction":0}}"#),
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap();
        assert_eq!(s["enabled"], true);
        assert_eq!(s["count"], 1);
        assert_eq!(s["status"], "ok");
        assert!(parse_windows(&out("[1]"), OffsetDateTime::UNIX_EPOCH).is_err());
    }

    const UFW_CONF: &str = "\
# /etc/ufw/ufw.conf
#

# Set to yes to start on boot. If setting this remotely, be sure to add a rule
# to allow your remote connection before starting ufw. Eg: 'ufw allow 22/tcp'
ENABLED=yes

# Please use the 'ufw' command to set the loglevel. Eg: 'ufw logging medium'.
# See 'man ufw' for details.
LOGLEVEL=low
";

    fn etc_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn ufw_conf_says_whether_ufw_starts() {
        let on = etc_with(&[("ufw/ufw.conf", UFW_CONF)]);
        assert_eq!(ufw_enabled(on.path()), Some(true));
        let off = etc_with(&[("ufw/ufw.conf", &UFW_CONF.replace("ENABLED=yes", "ENABLED=no"))]);
        assert_eq!(ufw_enabled(off.path()), Some(false));
        let quoted = etc_with(&[("ufw/ufw.conf", "ENABLED=\"yes\"\n")]);
        assert_eq!(ufw_enabled(quoted.path()), Some(true));
        let commented = etc_with(&[("ufw/ufw.conf", "#ENABLED=yes\nLOGLEVEL=low\n")]);
        assert_eq!(ufw_enabled(commented.path()), Some(false));
        let none = etc_with(&[("hostname", "pc\n")]);
        assert_eq!(ufw_enabled(none.path()), None);
        assert!(!firewalld_installed(none.path()));
        let firewalld = etc_with(&[("firewalld/firewalld.conf", "DefaultZone=public\n")]);
        assert!(firewalld_installed(firewalld.path()));
    }

    #[test]
    fn firewalld_state_from_systemctl_or_its_pid_file() {
        assert!(unit_active("active\n"));
        assert!(!unit_active("inactive\n"));
        assert!(!unit_active("failed\n"));
        let run = etc_with(&[("firewalld.pid", "4242\n"), ("stale.pid", "4243\n"), ("bad.pid", "x\n")]);
        let proc = etc_with(&[("4242/comm", "firewalld\n")]);
        assert_eq!(
            pid_file_alive(&run.path().join("firewalld.pid"), proc.path()),
            Some(true)
        );
        assert_eq!(pid_file_alive(&run.path().join("stale.pid"), proc.path()), Some(false));
        assert_eq!(pid_file_alive(&run.path().join("bad.pid"), proc.path()), None);
        assert_eq!(pid_file_alive(&run.path().join("none.pid"), proc.path()), None);
    }

    /// What `nft -j list ruleset` prints for Debian's stock /etc/nftables.conf with an
    /// input policy of drop and two rules, plus Docker's NAT table.
    const NFT_FILTERING: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "inet", "name": "filter", "handle": 1}}, {"chain": {"family": "inet", "table": "filter", "name": "input", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}}, {"chain": {"family": "inet", "table": "filter", "name": "forward", "handle": 2, "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}}, {"rule": {"family": "inet", "table": "filter", "chain": "input", "handle": 4, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}}, {"accept": null}]}}, {"rule": {"family": "inet", "table": "filter", "chain": "input", "handle": 5, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 22}}, {"accept": null}]}}, {"table": {"family": "ip", "name": "nat", "handle": 2}}, {"chain": {"family": "ip", "table": "nat", "name": "POSTROUTING", "handle": 1, "type": "nat", "hook": "postrouting", "prio": 100, "policy": "accept"}}, {"rule": {"family": "ip", "table": "nat", "chain": "POSTROUTING", "handle": 3, "expr": [{"masquerade": null}]}}]}"#;

    #[test]
    fn nft_rules_are_counted_and_input_filtering_found() {
        let rules = nft_rules(NFT_FILTERING).unwrap();
        assert_eq!(
            rules,
            Rules {
                backend: "nftables",
                count: 3,
                filters_input: true
            }
        );
        // Debian's stock nftables.conf: an input chain that accepts everything, no rules.
        let stock = r#"{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}, {"table": {"family": "inet", "name": "filter", "handle": 1}}, {"chain": {"family": "inet", "table": "filter", "name": "input", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}}]}"#;
        assert_eq!(
            nft_rules(stock).unwrap(),
            Rules {
                backend: "nftables",
                count: 0,
                filters_input: false
            }
        );
        // A rule in a chain of the same name but another table does not filter input.
        let elsewhere = NFT_FILTERING
            .replace("\"policy\": \"drop\"", "\"policy\": \"accept\"")
            .replace("\"chain\": \"input\"", "\"chain\": \"other\"");
        assert!(!nft_rules(&elsewhere).unwrap().filters_input);
        // Accepting rules under an accept policy filter nothing; a drop verdict does.
        let accepting = NFT_FILTERING.replace("\"policy\": \"drop\"", "\"policy\": \"accept\"");
        assert!(!nft_rules(&accepting).unwrap().filters_input);
        let dropping = accepting.replacen("{\"accept\": null}", "{\"drop\": null}", 1);
        assert!(nft_rules(&dropping).unwrap().filters_input);
        assert!(nft_rules("Error: Could not process rule").is_err());
        assert!(nft_rules("{}").is_err());
    }

    const IPTABLES_DOCKER: &str = "\
# Generated by iptables-save v1.8.9 (nf_tables) on Thu Jun  4 09:12:01 2026
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:DOCKER - [0:0]
-A FORWARD -j DOCKER
-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
COMMIT
";

    #[test]
    fn iptables_save_rules_are_counted_and_input_filtering_found() {
        assert_eq!(
            iptables_rules(IPTABLES_DOCKER),
            Rules {
                backend: "iptables",
                count: 3,
                filters_input: false
            }
        );
        let filtering = IPTABLES_DOCKER.replace(":INPUT ACCEPT", ":INPUT DROP");
        assert!(iptables_rules(&filtering).filters_input);
        // Accepting alone (libvirt's, Tailscale's rules) filters nothing.
        let accepts = IPTABLES_DOCKER.replace("-A FORWARD -j DOCKER", "-A INPUT -i virbr0 -p udp --dport 53 -j ACCEPT");
        assert!(!iptables_rules(&accepts).filters_input);
        let rejects = IPTABLES_DOCKER.replace("-A FORWARD -j DOCKER", "-A INPUT -p tcp --dport 23 -j REJECT");
        assert!(iptables_rules(&rejects).filters_input);
        let jumps = IPTABLES_DOCKER.replace(
            "-A FORWARD -j DOCKER",
            "-A INPUT -j ufw-before-input\n-A ufw-before-input -p tcp --dport 25 -j DROP",
        );
        assert!(iptables_rules(&jumps).filters_input);
        // INPUT in the nat table is not filtering.
        let nat = IPTABLES_DOCKER.replace(":PREROUTING ACCEPT [0:0]", ":INPUT DROP [0:0]\n-A INPUT -j ACCEPT");
        assert!(!iptables_rules(&nat).filters_input);
        assert_eq!(iptables_rules("").count, 0);
    }

    fn facts(ufw: Option<bool>, firewalld: Firewalld, kernel: Kernel) -> Facts {
        Facts { ufw, firewalld, kernel }
    }

    fn read(backend: &'static str, count: u64, filters_input: bool) -> Kernel {
        Kernel::Read(Rules {
            backend,
            count,
            filters_input,
        })
    }

    #[test]
    fn a_running_frontend_is_in_charge() {
        let s = judge(&facts(Some(true), Firewalld::Absent, read("nftables", 52, true)));
        assert_eq!(
            Value::Object(s),
            json!({"status": "ok", "summary": "ufw is on (52 rules loaded)", "backend": "ufw", "enabled": true,
                   "rules_count": 52, "ufw": "on", "firewalld": null, "reason": null})
        );
        let s = judge(&facts(Some(false), Firewalld::Running, Kernel::NotRoot));
        assert_eq!(s["backend"], "firewalld");
        assert_eq!(s["enabled"], true);
        assert_eq!(s["rules_count"], Value::Null);
        assert_eq!(s["summary"], "firewalld is running");
        assert_eq!(s["reason"], "the kernel's rules can be listed by root only");
        assert_eq!((&s["ufw"], &s["firewalld"]), (&json!("off"), &json!("running")));
    }

    #[test]
    fn hand_written_kernel_rules_count_when_they_filter_input() {
        let s = judge(&facts(None, Firewalld::Absent, read("nftables", 3, true)));
        assert_eq!(s["status"], "ok");
        assert_eq!(s["backend"], "nftables");
        assert_eq!(s["enabled"], true);
        assert_eq!(s["summary"], "nftables rules filter incoming traffic (3 rules loaded)");
        let docker = judge(&facts(Some(false), Firewalld::Absent, read("iptables", 3, false)));
        assert_eq!(docker["status"], "crit");
        assert_eq!(docker["enabled"], false);
        assert_eq!(docker["backend"], "ufw");
        assert_eq!(docker["rules_count"], 3);
        assert_eq!(
            docker["reason"],
            "ufw is installed but off; 3 iptables rules are loaded, but none filters incoming traffic (forwarding and NAT only, as container engines set up)"
        );
        let only_docker = judge(&facts(None, Firewalld::Absent, read("iptables", 3, false)));
        assert_eq!(only_docker["backend"], "iptables");
    }

    #[test]
    fn nothing_installed_is_off_but_unreadable_is_unknown() {
        let none = judge(&facts(None, Firewalld::Absent, Kernel::NoTools));
        assert_eq!(
            Value::Object(none),
            json!({"status": "crit", "summary": "no firewall: nothing filters incoming traffic", "backend": "none",
                   "enabled": false, "rules_count": null, "ufw": null, "firewalld": null,
                   "reason": "neither ufw nor firewalld is installed, and neither nft nor iptables is installed"})
        );
        let empty = judge(&facts(None, Firewalld::Stopped, read("nftables", 0, false)));
        assert_eq!(empty["enabled"], false);
        assert_eq!(empty["backend"], "firewalld");
        assert_eq!(empty["rules_count"], 0);
        assert_eq!(
            empty["reason"],
            "firewalld is installed but not running; no firewall rule is loaded"
        );
        let user = judge(&facts(Some(false), Firewalld::Absent, Kernel::NotRoot));
        assert_eq!(user["status"], "warn");
        assert_eq!(user["enabled"], Value::Null);
        assert_eq!(user["summary"], "cannot tell whether a firewall is on");
        assert_eq!(
            user["reason"],
            "ufw is installed but off; rules loaded directly into the kernel can be listed by root only"
        );
        let failed = judge(&facts(
            None,
            Firewalld::Absent,
            Kernel::Failed("nft: netlink: Error: cache initialization failed".into()),
        ));
        assert_eq!(failed["enabled"], Value::Null);
        assert!(
            failed["reason"]
                .as_str()
                .unwrap()
                .contains("cache initialization failed")
        );
        let unknown = judge(&facts(None, Firewalld::Unknown, read("nftables", 0, false)));
        assert_eq!(unknown["enabled"], Value::Null);
        assert_eq!(unknown["firewalld"], "unknown");
        assert_eq!(unknown["summary"], "cannot tell whether firewalld is running");
    }

    #[test]
    #[cfg(unix)]
    fn the_real_collector_on_this_machine() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let s = rt.block_on(section()).unwrap();
        assert!(["ok", "warn", "crit"].contains(&s["status"].as_str().unwrap()), "{s:?}");
        assert!(!s["summary"].as_str().unwrap().starts_with("collector failed"), "{s:?}");
        if cfg!(target_os = "linux") {
            let backend = s["backend"].as_str().unwrap();
            assert!(
                ["ufw", "firewalld", "nftables", "iptables", "none"].contains(&backend),
                "{s:?}"
            );
            assert!(s["enabled"].is_boolean() || s["reason"].is_string(), "{s:?}");
            if !is_root() {
                assert!(s["rules_count"].is_null(), "{s:?}");
            }
        }
        eprintln!("{s:?}");
    }
}
