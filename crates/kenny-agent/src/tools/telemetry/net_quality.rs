//! The net_quality section: round-trip time and packet loss to the default gateway and to the first DNS server.
//!
//! The gateway tells about the local link (Wi-Fi, cable, router), the DNS server about
//! the path beyond it; `reference` is the DNS figure, which the server judges the
//! internet connection on. A few pings each, nothing else leaves the PC.
//!
//! Linux runs `ping -n -c 4 -i 0.2 -W 1` (iputils, C locale) on both targets at once.
//! Windows runs one PowerShell query that finds the targets (`Get-NetRoute`,
//! `Get-DnsClientServerAddress`) and prints `ping.exe -n 4 -w 1000`'s lines, which are
//! localised ("Zeit=2ms", "temps=3 ms", "time<1ms"), so they are read by shape.
//!
//! `KENNY_NET_QUALITY_TARGETS=gateway=<ip>,dns=<ip>` replaces the discovered targets on
//! both systems; test builds default to 127.0.0.1 so no test pings a real network.

use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::command::{self, Output, RunError};
use super::format::one_decimal;
use super::peripherals::clip;
use super::section as section_of;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, not_collected_here};
use crate::tools::netinfo;

const TARGETS_VAR: &str = "KENNY_NET_QUALITY_TARGETS";
/// Echo requests per target, on both systems.
const PINGS: u32 = 4;
/// Four pings 0.2 s apart with 1 s for the last answer take under 2 s; the rest is slack.
const PING_LIMIT: Duration = Duration::from_secs(5);
/// Advice only; the server applies the operator's thresholds to `reference`.
const LOSS_WARN_PERCENT: f64 = 20.0;
const LATENCY_WARN_MS: f64 = 150.0;

/// The script, with the targets a build pings when the variable is not set (none: find
/// them). Test builds ping loopback so the collect-everything test stays on this PC.
macro_rules! ping_script {
    ($default_targets:literal) => {
        concat!(
            "$ErrorActionPreference = 'Stop'\n$defaultTargets = '",
            $default_targets,
            r#"'
$spec = if ($env:KENNY_NET_QUALITY_TARGETS) { $env:KENNY_NET_QUALITY_TARGETS } else { $defaultTargets }
$gateway = $null
$dns = $null
if ($spec) {
    foreach ($pair in $spec.Split(',')) {
        $kv = $pair.Split('=', 2)
        if ($kv.Count -ne 2) { continue }
        switch ($kv[0].Trim()) {
            'gateway' { $gateway = $kv[1].Trim() }
            'dns' { $dns = $kv[1].Trim() }
        }
    }
} else {
    $route = @(Get-NetRoute -DestinationPrefix '0.0.0.0/0' -PolicyStore ActiveStore -ErrorAction SilentlyContinue |
        Where-Object { $_.NextHop -and $_.NextHop -ne '0.0.0.0' } |
        Sort-Object { $_.RouteMetric + $_.InterfaceMetric }) | Select-Object -First 1
    if ($route) {
        $gateway = $route.NextHop
        $servers = @(Get-DnsClientServerAddress -InterfaceIndex $route.ifIndex -AddressFamily IPv4 -ErrorAction SilentlyContinue | ForEach-Object { $_.ServerAddresses })
        if (-not $servers) {
            $servers = @(Get-DnsClientServerAddress -AddressFamily IPv4 -ErrorAction SilentlyContinue | ForEach-Object { $_.ServerAddresses })
        }
        $dns = $servers | Where-Object { $_ -and -not $_.StartsWith('127.') } | Select-Object -First 1
    }
}
function Measure-Target($address) {
    $ip = $null
    if (-not $address -or -not [System.Net.IPAddress]::TryParse([string]$address, [ref]$ip)) { return $null }
    $utf8 = [Console]::OutputEncoding
    try { [Console]::OutputEncoding = [Text.Encoding]::GetEncoding([Globalization.CultureInfo]::CurrentCulture.TextInfo.OEMCodePage) } catch { }
    try {
        $lines = @(& "$env:SystemRoot\System32\PING.EXE" -n 4 -w 1000 $ip.ToString() | ForEach-Object { [string]$_ })
        $exit = $LASTEXITCODE
    } finally {
        [Console]::OutputEncoding = $utf8
    }
    [pscustomobject]@{ Host = $ip.ToString(); ExitCode = $exit; Lines = $lines }
}
$measuredGateway = Measure-Target $gateway
# A home router is often both; one measurement serves the two roles.
$measuredDns = if ($dns -and $dns -eq $gateway) { $measuredGateway } else { Measure-Target $dns }
ConvertTo-Json -InputObject ([pscustomobject]@{ Gateway = $measuredGateway; Dns = $measuredDns }) -Compress -Depth 4
"#
        )
    };
}

/// Two targets of four pings (about 3 s each when they answer, 4 s when not), one after
/// the other, plus PowerShell's start.
#[cfg(not(test))]
static QUERY: Query = Query {
    script: ping_script!(""),
    limit: Duration::from_secs(13),
    parse: parse_windows,
};

#[cfg(test)]
static QUERY: Query = Query {
    script: ping_script!("gateway=127.0.0.1,dns=127.0.0.1"),
    limit: Duration::from_secs(13),
    parse: parse_windows,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

/// What one target's pings came to.
#[derive(Debug, Clone, PartialEq)]
struct Stats {
    sent: u32,
    received: u32,
    /// Average round trip; `None` when nothing came back.
    avg_ms: Option<f64>,
    /// When nothing came back: what ping said instead ("Request timed out.",
    /// "General failure."), in the PC's language.
    said: Option<String>,
}

impl Stats {
    fn loss_percent(&self) -> f64 {
        if self.sent == 0 {
            return 100.0;
        }
        let lost = self.sent.saturating_sub(self.received);
        one_decimal(f64::from(lost) * 100.0 / f64::from(self.sent))
    }
}

/// A target and what pinging it gave, or why it could not be pinged.
#[derive(Clone)]
struct Measured {
    role: &'static str,
    host: String,
    result: Result<Stats, String>,
}

impl Measured {
    /// The same measurement standing for another target at the same address.
    fn as_role(&self, role: &'static str) -> Measured {
        Measured { role, ..self.clone() }
    }
}

#[derive(Debug, Default, PartialEq)]
struct Targets {
    gateway: Option<String>,
    dns: Option<String>,
}

pub(super) async fn section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    let (targets, errors) = match std::env::var(TARGETS_VAR) {
        Ok(spec) if !spec.trim().is_empty() => parse_targets(&spec),
        _ if cfg!(test) => (
            Targets {
                gateway: Some("127.0.0.1".into()),
                dns: Some("127.0.0.1".into()),
            },
            Vec::new(),
        ),
        _ => discover(),
    };
    let Some(gateway) = targets.gateway else {
        return Ok(no_gateway(errors));
    };
    // A home router is often both; one measurement serves the two roles.
    let dns_is_gateway = targets.dns.as_deref() == Some(gateway.as_str());
    let other_dns = targets.dns.filter(|_| !dns_is_gateway);
    let (gateway, dns) = tokio::join!(measure_linux("gateway", gateway), async {
        match other_dns {
            Some(host) => Some(measure_linux("dns", host).await),
            None => None,
        }
    });
    let dns = dns.or_else(|| dns_is_gateway.then(|| gateway.as_role("dns")));
    Ok(build(Some(gateway), dns, errors))
}

/// `gateway=<ip>,dns=<ip>`; either may be left out. Anything that is not an IP address
/// is refused (it would reach ping's command line) and said in `errors`.
fn parse_targets(spec: &str) -> (Targets, Vec<String>) {
    let mut targets = Targets::default();
    let mut errors = Vec::new();
    for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            errors.push(format!("{TARGETS_VAR}: `{pair}` is not `gateway=<ip>` or `dns=<ip>`"));
            continue;
        };
        let value = value.trim();
        if value.parse::<IpAddr>().is_err() {
            errors.push(format!("{TARGETS_VAR}: `{value}` is not an IP address"));
            continue;
        }
        match key.trim() {
            "gateway" => targets.gateway = Some(value.to_owned()),
            "dns" => targets.dns = Some(value.to_owned()),
            other => errors.push(format!("{TARGETS_VAR}: unknown target `{other}` (gateway or dns)")),
        }
    }
    (targets, errors)
}

/// The gateway of the preferred default route and the first DNS server that is not on
/// this PC (a local resolver such as 127.0.0.53 answers in microseconds and says nothing
/// about the path out).
fn discover() -> (Targets, Vec<String>) {
    let gateway = netinfo::default_routes().into_iter().find_map(|route| {
        let gateway = route.gateway?;
        Some(match gateway {
            // A link-local next hop is only reachable through its interface.
            IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => format!("{v6}%{}", route.interface),
            other => other.to_string(),
        })
    });
    pick_dns(gateway, &netinfo::dns_servers())
}

fn pick_dns(gateway: Option<String>, servers: &[String]) -> (Targets, Vec<String>) {
    let is_local = |s: &str| {
        s.split('%')
            .next()
            .and_then(|a| a.parse::<IpAddr>().ok())
            .is_some_and(|a| a.is_loopback())
    };
    let dns = servers.iter().find(|s| !is_local(s)).cloned();
    let mut errors = Vec::new();
    if dns.is_none() {
        errors.push(match servers.first() {
            Some(local) => format!(
                "the only DNS server is on this PC ({local}); there is no DNS server to measure the internet path with"
            ),
            None => "no DNS server is configured".to_owned(),
        });
    }
    (Targets { gateway, dns }, errors)
}

async fn measure_linux(role: &'static str, host: String) -> Measured {
    let count = PINGS.to_string();
    let args = ["-n", "-c", count.as_str(), "-i", "0.2", "-W", "1", host.as_str()];
    let result = match command::run("ping", &args, PING_LIMIT).await {
        Ok(output) => stats_of_linux(&output),
        Err(RunError::Missing) => Err("`ping` is not installed".to_owned()),
        Err(e) => Err(e.describe("ping")),
    };
    Measured { role, host, result }
}

/// iputils exits 1 when nothing came back (still with statistics) and 2 on errors
/// ("Network is unreachable", no permission for ICMP sockets), with no statistics.
fn stats_of_linux(output: &Output) -> Result<Stats, String> {
    parse_iputils(&output.stdout).ok_or_else(|| format!("ping printed no statistics: {}", command::first_line(output)))
}

/// The statistics lines of iputils (and busybox) ping:
/// `4 packets transmitted, 3 received, +1 errors, 25% packet loss, time 3004ms` and
/// `rtt min/avg/max/mdev = 0.028/0.057/0.094/0.024 ms` (`round-trip min/avg/max` on busybox).
fn parse_iputils(text: &str) -> Option<Stats> {
    let counts = text.lines().find(|l| l.contains("transmitted"))?;
    let mut numbers = counts
        .split(',')
        .filter_map(|part| part.split_whitespace().next()?.parse::<u32>().ok());
    let sent = numbers.next()?;
    let received = numbers.next()?;
    let avg_ms = text
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .and_then(|l| l.split_once('='))
        .and_then(|(_, values)| values.trim().split('/').nth(1)?.trim().parse::<f64>().ok())
        .filter(|_| received > 0)
        .map(one_decimal);
    Some(Stats {
        sent,
        received: received.min(sent),
        avg_ms,
        said: None,
    })
}

/// The query's JSON: `{Gateway: {Host, ExitCode, Lines}, Dns: ...}`, a target `null`
/// when there is none (no default route, no DNS server).
fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Value::Object(top) = value else {
        return Err(format!("expected an object from the ping query, found {value}"));
    };
    let gateway = measured_windows("gateway", top.get("Gateway"));
    let dns = measured_windows("dns", top.get("Dns"));
    let Some(gateway) = gateway else {
        return Ok(no_gateway(Vec::new()));
    };
    let errors = if dns.is_none() {
        vec!["no DNS server is configured".to_owned()]
    } else {
        Vec::new()
    };
    Ok(build(Some(gateway), dns, errors))
}

fn measured_windows(role: &'static str, value: Option<&Value>) -> Option<Measured> {
    let target = value?.as_object()?;
    let host = target.get("Host")?.as_str()?.to_owned();
    let lines: Vec<&str> = target
        .get("Lines")
        .and_then(Value::as_array)
        .map(|lines| lines.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Some(Measured {
        role,
        host,
        result: parse_ping_exe(&lines),
    })
}

/// ping.exe in any language: a header line, one line per echo request, a blank line,
/// then statistics. Only the per-request block is read: a reply is a line with a time
/// glued to its label (`time=2ms`, `Zeit<1ms`, `temps=3 ms`), unlike the summary's
/// `Minimum = 0ms`. "Destination host unreachable" answers come from a router and carry
/// no time, so they count as lost (ping.exe itself counts them as received).
fn parse_ping_exe(lines: &[&str]) -> Result<Stats, String> {
    let mut blocks = lines.split(|l| l.trim().is_empty()).filter(|b| !b.is_empty());
    let first = blocks.next().ok_or("ping.exe printed nothing")?;
    let requests = &first[1.min(first.len())..];
    if requests.is_empty() {
        return Err(format!("ping.exe: {}", first[0].trim()));
    }
    let times: Vec<f64> = requests.iter().filter_map(|l| reply_time(l)).collect();
    let sent = u32::try_from(requests.len()).unwrap_or(u32::MAX);
    let received = u32::try_from(times.len()).unwrap_or(u32::MAX);
    let avg_ms = (!times.is_empty()).then(|| one_decimal(times.iter().sum::<f64>() / times.len() as f64));
    let said = times.is_empty().then(|| clip(requests[0]));
    Ok(Stats {
        sent,
        received,
        avg_ms,
        said,
    })
}

/// The round trip of one reply line. `<1ms` is counted as half a millisecond: ping.exe
/// only says it was under one.
fn reply_time(line: &str) -> Option<f64> {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for (i, &(at, c)) in chars.iter().enumerate() {
        if !(c == '=' || c == '<') || i == 0 || !chars[i - 1].1.is_alphabetic() {
            continue;
        }
        let rest = &line[at + c.len_utf8()..];
        let number: String = rest
            .chars()
            .take_while(|ch| ch.is_ascii_digit() || *ch == '.' || *ch == ',')
            .collect();
        if number.is_empty() || !rest[number.len()..].trim_start().starts_with("ms") {
            continue;
        }
        let value: f64 = number.replace(',', ".").parse().ok()?;
        return Some(if c == '<' { value / 2.0 } else { value });
    }
    None
}

fn target_json(measured: &Measured) -> Value {
    match &measured.result {
        Ok(stats) => json!({
            "host": measured.host,
            "latency_ms": stats.avg_ms,
            "loss_percent": stats.loss_percent(),
        }),
        Err(_) => json!({ "host": measured.host, "latency_ms": null, "loss_percent": null }),
    }
}

fn build(gateway: Option<Measured>, dns: Option<Measured>, mut errors: Vec<String>) -> Section {
    // The router that is also the DNS server is one measurement, told once.
    let same_host = matches!((&gateway, &dns), (Some(g), Some(d)) if g.host == d.host);
    let measured: Vec<&Measured> = gateway.iter().chain(dns.iter().filter(|_| !same_host)).collect();
    for m in &measured {
        let role = if same_host { "gateway and dns" } else { m.role };
        match &m.result {
            Err(why) => errors.push(format!("{role} {}: {why}", m.host)),
            Ok(Stats { said: Some(said), .. }) => errors.push(format!("{role} {}: {said}", m.host)),
            Ok(_) => {}
        }
    }
    let parts: Vec<String> = measured.iter().map(|m| describe(m, same_host)).collect();
    let troubled = measured.iter().any(|m| {
        m.result
            .as_ref()
            .is_ok_and(|s| s.loss_percent() >= LOSS_WARN_PERCENT || s.avg_ms.is_some_and(|ms| ms >= LATENCY_WARN_MS))
    });
    let status = if troubled { Status::Warn } else { Status::Ok };
    let summary = if parts.is_empty() {
        "nothing measured".to_owned()
    } else {
        parts.join(", ")
    };
    let reference = dns.as_ref().map_or(Value::Null, target_json);
    section_of(
        status,
        summary,
        json!({
            "gateway": gateway.as_ref().map_or(Value::Null, target_json),
            "dns": reference,
            "reference": reference,
            "samples": PINGS,
            "errors": errors,
        }),
    )
}

fn describe(m: &Measured, also_dns: bool) -> String {
    let label = match m.role {
        "gateway" if also_dns => "gateway and DNS",
        "gateway" => "gateway",
        _ => "DNS",
    };
    match &m.result {
        Err(_) => format!("{label} {} not measured", m.host),
        Ok(Stats { avg_ms: None, .. }) => format!("{label} {}: no answer", m.host),
        Ok(stats) => {
            let ms = stats.avg_ms.unwrap_or_default();
            let loss = stats.loss_percent();
            if loss > 0.0 {
                format!("{label} {ms} ms ({loss}% loss)")
            } else {
                format!("{label} {ms} ms")
            }
        }
    }
}

fn no_gateway(errors: Vec<String>) -> Section {
    let reason = "no default gateway: this PC has no route to other networks, so there is no path to measure";
    let mut fields = Map::new();
    for key in ["gateway", "dns", "reference"] {
        fields.insert(key.into(), Value::Null);
    }
    fields.insert("samples".into(), 0.into());
    fields.insert("errors".into(), json!(errors));
    fields.insert("reason".into(), reason.into());
    section_of(Status::Ok, reason.to_owned(), Value::Object(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IPUTILS_OK: &str = "\
PING 192.168.1.1 (192.168.1.1) 56(84) bytes of data.
64 bytes from 192.168.1.1: icmp_seq=1 ttl=64 time=1.84 ms
64 bytes from 192.168.1.1: icmp_seq=2 ttl=64 time=2.11 ms
64 bytes from 192.168.1.1: icmp_seq=3 ttl=64 time=1.97 ms
64 bytes from 192.168.1.1: icmp_seq=4 ttl=64 time=2.40 ms

--- 192.168.1.1 ping statistics ---
4 packets transmitted, 4 received, 0% packet loss, time 612ms
rtt min/avg/max/mdev = 1.840/2.080/2.400/0.208 ms
";

    const IPUTILS_LOSSY: &str = "\
PING 9.9.9.9 (9.9.9.9) 56(84) bytes of data.
64 bytes from 9.9.9.9: icmp_seq=1 ttl=58 time=181 ms
From 10.0.0.1 icmp_seq=2 Destination Host Unreachable
64 bytes from 9.9.9.9: icmp_seq=4 ttl=58 time=203 ms

--- 9.9.9.9 ping statistics ---
4 packets transmitted, 2 received, +1 errors, 50% packet loss, time 629ms
rtt min/avg/max/mdev = 181.220/192.110/203.000/10.890 ms
";

    const IPUTILS_SILENT: &str = "\
PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.

--- 10.0.0.2 ping statistics ---
4 packets transmitted, 0 received, 100% packet loss, time 633ms

";

    const BUSYBOX: &str = "\
--- 10.0.0.1 ping statistics ---
4 packets transmitted, 4 packets received, 0% packet loss
round-trip min/avg/max = 0.512/0.733/1.010 ms
";

    #[test]
    fn iputils_statistics_are_read() {
        assert_eq!(
            parse_iputils(IPUTILS_OK),
            Some(Stats {
                sent: 4,
                received: 4,
                avg_ms: Some(2.1),
                said: None,
            })
        );
        let lossy = parse_iputils(IPUTILS_LOSSY).unwrap();
        assert_eq!(
            (lossy.received, lossy.avg_ms, lossy.loss_percent()),
            (2, Some(192.1), 50.0)
        );
        let silent = parse_iputils(IPUTILS_SILENT).unwrap();
        assert_eq!((silent.avg_ms, silent.loss_percent()), (None, 100.0));
        assert_eq!(parse_iputils(BUSYBOX).unwrap().avg_ms, Some(0.7));
        let unreachable = Output::printed("", "ping: connect: Network is unreachable\n", false);
        assert_eq!(
            stats_of_linux(&unreachable),
            Err("ping printed no statistics: ping: connect: Network is unreachable".to_owned())
        );
    }

    fn measured(role: &'static str, host: &str, text: &str) -> Measured {
        Measured {
            role,
            host: host.into(),
            result: stats_of_linux(&Output::printed(text, "", true)),
        }
    }

    #[test]
    fn the_reference_is_the_dns_figure_and_loss_warns() {
        let good = build(
            Some(measured("gateway", "192.168.1.1", IPUTILS_OK)),
            Some(measured("dns", "192.168.1.1", IPUTILS_OK)),
            Vec::new(),
        );
        assert_eq!(good["status"], "ok");
        assert_eq!(good["summary"], "gateway and DNS 2.1 ms");
        assert_eq!(
            good["reference"],
            json!({"host": "192.168.1.1", "latency_ms": 2.1, "loss_percent": 0.0})
        );
        assert_eq!(good["reference"], good["dns"]);
        assert_eq!(good["samples"], 4);

        let bad = build(
            Some(measured("gateway", "192.168.1.1", IPUTILS_OK)),
            Some(measured("dns", "9.9.9.9", IPUTILS_LOSSY)),
            Vec::new(),
        );
        assert_eq!(bad["status"], "warn");
        assert_eq!(bad["summary"], "gateway 2.1 ms, DNS 192.1 ms (50% loss)");
        assert_eq!(bad["reference"]["loss_percent"], 50.0);

        let silent = build(
            Some(measured("gateway", "192.168.1.1", IPUTILS_OK)),
            Some(measured("dns", "10.0.0.2", IPUTILS_SILENT)),
            Vec::new(),
        );
        assert_eq!(silent["summary"], "gateway 2.1 ms, DNS 10.0.0.2: no answer");
        assert_eq!(silent["reference"]["latency_ms"], Value::Null);
        assert_eq!(silent["reference"]["loss_percent"], 100.0);
    }

    #[test]
    fn a_target_that_cannot_be_pinged_is_an_error_not_a_failure() {
        let section = build(
            Some(Measured {
                role: "gateway",
                host: "192.168.1.1".into(),
                result: Err("`ping` is not installed".into()),
            }),
            None,
            vec!["no DNS server is configured".into()],
        );
        assert_eq!(section["status"], "ok");
        assert_eq!(section["summary"], "gateway 192.168.1.1 not measured");
        assert_eq!(section["reference"], Value::Null);
        assert_eq!(
            section["errors"],
            json!([
                "no DNS server is configured",
                "gateway 192.168.1.1: `ping` is not installed"
            ])
        );
    }

    #[test]
    fn targets_come_from_the_variable_and_only_as_addresses() {
        assert_eq!(
            parse_targets("gateway=127.0.0.1, dns=::1"),
            (
                Targets {
                    gateway: Some("127.0.0.1".into()),
                    dns: Some("::1".into())
                },
                vec![]
            )
        );
        let (targets, errors) = parse_targets("gateway=-f,dns=1.1.1.1,proxy=10.0.0.1,junk");
        assert_eq!(
            targets,
            Targets {
                gateway: None,
                dns: Some("1.1.1.1".into())
            }
        );
        assert_eq!(
            errors,
            [
                "KENNY_NET_QUALITY_TARGETS: `-f` is not an IP address",
                "KENNY_NET_QUALITY_TARGETS: unknown target `proxy` (gateway or dns)",
                "KENNY_NET_QUALITY_TARGETS: `junk` is not `gateway=<ip>` or `dns=<ip>`",
            ]
        );
    }

    #[test]
    fn a_local_resolver_is_not_the_internet_reference() {
        let servers = ["127.0.0.53".to_owned(), "192.168.1.1".to_owned()];
        let (targets, errors) = pick_dns(Some("192.168.1.1".into()), &servers);
        assert_eq!(targets.dns.as_deref(), Some("192.168.1.1"));
        assert!(errors.is_empty());
        let (targets, errors) = pick_dns(Some("192.168.1.1".into()), &["127.0.0.1".to_owned()]);
        assert_eq!(targets.dns, None);
        assert!(
            errors[0].contains("only DNS server is on this PC (127.0.0.1)"),
            "{errors:?}"
        );
        assert_eq!(pick_dns(None, &[]).1, ["no DNS server is configured"]);
    }

    #[test]
    fn no_gateway_is_ok_and_says_why() {
        let section = no_gateway(Vec::new());
        assert_eq!(section["status"], "ok");
        assert_eq!(section["reference"], Value::Null);
        assert!(section["reason"].as_str().unwrap().contains("no default gateway"));
    }

    #[test]
    fn reply_times_in_every_language_and_never_the_summary() {
        assert_eq!(
            reply_time("Reply from 192.168.1.1: bytes=32 time=2ms TTL=64"),
            Some(2.0)
        );
        assert_eq!(
            reply_time("Reply from 192.168.1.1: bytes=32 time<1ms TTL=64"),
            Some(0.5)
        );
        assert_eq!(
            reply_time("Antwort von 192.168.178.1: Bytes=32 Zeit=14ms TTL=57"),
            Some(14.0)
        );
        assert_eq!(
            reply_time("Réponse de 192.168.1.254 : octets=32 temps=3 ms TTL=64"),
            Some(3.0)
        );
        assert_eq!(reply_time("Reply from fe80::1%12: time=1,5ms"), Some(1.5));
        assert_eq!(reply_time("    Minimum = 0ms, Maximum = 3ms, Average = 1ms"), None);
        assert_eq!(reply_time("Request timed out."), None);
        assert_eq!(
            reply_time("Reply from 192.168.1.5: Destination host unreachable."),
            None
        );
    }

    #[test]
    fn ping_exe_counts_only_timed_replies() {
        let lines = [
            "",
            "Pinging 10.0.0.9 with 32 bytes of data:",
            "Reply from 10.0.0.4: Destination host unreachable.",
            "Reply from 10.0.0.9: bytes=32 time=4ms TTL=128",
            "Request timed out.",
            "Reply from 10.0.0.9: bytes=32 time=6ms TTL=128",
            "",
            "Ping statistics for 10.0.0.9:",
            "    Packets: Sent = 4, Received = 3, Lost = 1 (25% loss),",
        ];
        let stats = parse_ping_exe(&lines).unwrap();
        assert_eq!(
            stats,
            Stats {
                sent: 4,
                received: 2,
                avg_ms: Some(5.0),
                said: None,
            }
        );
        assert_eq!(stats.loss_percent(), 50.0);
        assert_eq!(
            parse_ping_exe(&["Ping request could not find host 10.0.0.9. Please check the name and try again."]),
            Err("ping.exe: Ping request could not find host 10.0.0.9. Please check the name and try again.".to_owned())
        );
        assert_eq!(parse_ping_exe(&[]), Err("ping.exe printed nothing".to_owned()));
        let silent = parse_ping_exe(&[
            "Pinging 10.0.0.9 with 32 bytes of data:",
            "Request timed out.",
            "Request timed out.",
        ])
        .unwrap();
        assert_eq!((silent.sent, silent.received), (2, 0));
        assert_eq!(silent.said.as_deref(), Some("Request timed out."));
    }

    #[test]
    fn the_windows_script_finds_its_own_targets_and_pings_with_ping_exe() {
        let script = QUERY.script;
        for part in [
            "Get-NetRoute -DestinationPrefix '0.0.0.0/0'",
            "Get-DnsClientServerAddress",
            r#"System32\PING.EXE" -n 4 -w 1000"#,
            "$env:KENNY_NET_QUALITY_TARGETS",
            "$defaultTargets = 'gateway=127.0.0.1,dns=127.0.0.1'",
            "[System.Net.IPAddress]::TryParse",
        ] {
            assert!(script.contains(part), "{part}");
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_pings_loopback_in_tests() {
        let section = section().await.unwrap();
        assert_eq!(section["gateway"]["host"], "127.0.0.1", "{section:?}");
        assert_eq!(section["reference"]["host"], "127.0.0.1", "{section:?}");
        assert_ne!(section["status"], "crit");
        assert!(section["errors"].is_array());
    }
}
