//! The wifi_quality section: each wireless interface's network, signal strength, link rates, channel and band.
//!
//! Windows runs `netsh wlan show interfaces` inside a PowerShell query; its output is
//! translated ("Signal : 85%", "Signal : 85 %", "Empfangsrate (MBit/s)", "Kanal"), so it
//! is read by shape and position, never by label: an interface is a block with a GUID,
//! its first value is its name, a connected one has an `SSID` line, the signal is the
//! value ending in `%`, the rates are the two numbers whose label has a unit in
//! brackets (receive first), the channel the plain number between SSID and rates.
//!
//! Linux finds wireless interfaces in `<sys>/class/net/*/wireless`, the signal in
//! `/proc/net/wireless`, and the network, frequency and bitrates in `iw dev <if> link`
//! (or, without `iw`, NetworkManager's `nmcli -t`). Percentages on Linux use Windows'
//! documented scale (-100 dBm is 0 %, -50 dBm is 100 %), so both systems compare.

use std::fs;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::command::{self, Output, RunError, first_line};
use super::files::{read_small, read_text, root_from_env, sys_root};
use super::peripherals::clip;
use super::section as section_of;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, not_applicable, not_collected_here};

/// More wireless interfaces than this is not a PC.
const MAX_INTERFACES: usize = 8;
const TOOL_LIMIT: Duration = Duration::from_secs(3);
const WEAK_PERCENT: u32 = 40;
const WEAK_DBM: i32 = -75;

static QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$service = Get-Service -Name WlanSvc -ErrorAction SilentlyContinue
$state = if ($service) { [string]$service.Status } else { 'Missing' }
$lines = @()
$exit = $null
if ($state -eq 'Running') {
    $utf8 = [Console]::OutputEncoding
    try { [Console]::OutputEncoding = [Text.Encoding]::GetEncoding([Globalization.CultureInfo]::CurrentCulture.TextInfo.OEMCodePage) } catch { }
    try {
        $lines = @(& "$env:SystemRoot\System32\netsh.exe" wlan show interfaces | ForEach-Object { [string]$_ })
        $exit = $LASTEXITCODE
    } finally {
        [Console]::OutputEncoding = $utf8
    }
}
ConvertTo-Json -InputObject ([pscustomobject]@{ Service = $state; ExitCode = $exit; Lines = $lines }) -Compress -Depth 3
"#,
    limit: Duration::from_secs(10),
    parse: parse_windows,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

/// One wireless interface as both systems describe it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Radio {
    name: String,
    connected: bool,
    ssid: Option<String>,
    signal_percent: Option<u32>,
    signal_dbm: Option<i32>,
    rx_rate_mbps: Option<f64>,
    tx_rate_mbps: Option<f64>,
    channel: Option<u32>,
    band: Option<String>,
}

impl Radio {
    fn to_json(&self) -> Value {
        json!({
            "name": clip(&self.name),
            "connected": self.connected,
            "ssid": self.ssid.as_deref().map(clip),
            "signal_percent": self.signal_percent,
            "signal_dbm": self.signal_dbm,
            "rx_rate_mbps": self.rx_rate_mbps,
            "tx_rate_mbps": self.tx_rate_mbps,
            "channel": self.channel,
            "band": self.band,
        })
    }

    fn weak(&self) -> bool {
        self.connected
            && (self.signal_percent.is_some_and(|p| p < WEAK_PERCENT) || self.signal_dbm.is_some_and(|d| d < WEAK_DBM))
    }
}

/// `{Service, ExitCode, Lines}`: the WLAN service's state and, when it runs, netsh's lines.
fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let service = value.get("Service").and_then(Value::as_str).unwrap_or("Missing");
    match service {
        "Running" => {}
        "Missing" => {
            return Ok(not_applicable(
                "the WLAN AutoConfig service (WlanSvc) is not installed: this PC has no Wi-Fi",
            ));
        }
        other => {
            return Ok(not_applicable(&format!(
                "the WLAN AutoConfig service (WlanSvc) is {}, so Wi-Fi is not in use",
                other.to_lowercase()
            )));
        }
    }
    let lines: Vec<&str> = value
        .get("Lines")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Windows 11 24H2 hides Wi-Fi details from netsh unless location services are on;
    // the Settings link in its message is the same in every language.
    if lines.iter().any(|l| l.contains("ms-settings:privacy-location")) {
        return Ok(not_applicable(
            "Windows shows Wi-Fi details only when location services are on (Settings > Privacy & security > Location)",
        ));
    }
    let exit = value.get("ExitCode").and_then(Value::as_i64).unwrap_or(0);
    if exit != 0 {
        let said = lines
            .iter()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())
            .unwrap_or("no output");
        return Err(format!(
            "netsh wlan show interfaces failed (exit {exit}): {}",
            clip(said)
        ));
    }
    let radios: Vec<Radio> = netsh_blocks(&lines)
        .iter()
        .filter_map(|block| radio_of_netsh(block))
        .take(MAX_INTERFACES)
        .collect();
    Ok(build(radios))
}

/// `Label : value` pairs of netsh's indented lines, in blocks separated by blank lines.
/// The first colon ends the label: labels have none, values may (MAC addresses).
fn netsh_blocks<'a>(lines: &[&'a str]) -> Vec<Vec<(&'a str, &'a str)>> {
    let mut blocks = Vec::new();
    let mut current = Vec::new();
    for line in lines {
        if line.trim().is_empty() || !line.starts_with([' ', '\t']) {
            if !current.is_empty() {
                blocks.push(std::mem::take(&mut current));
            }
            continue;
        }
        // A second value of the line above ("Radio status : Hardware On" then
        // "  : Software Off") has no label; it belongs to no field read here.
        if let Some((label, value)) = line.split_once(':')
            && !label.trim().is_empty()
        {
            current.push((label.trim(), value.trim()));
        }
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    blocks
}

fn radio_of_netsh(block: &[(&str, &str)]) -> Option<Radio> {
    if !block.iter().any(|(_, v)| is_guid(v)) {
        return None;
    }
    let name = block.first()?.1.to_owned();
    let ssid_at = block.iter().position(|(k, _)| *k == "SSID");
    let mut radio = Radio {
        name,
        connected: ssid_at.is_some(),
        ssid: ssid_at.map(|at| block[at].1.to_owned()).filter(|s| !s.is_empty()),
        ..Radio::default()
    };
    let Some(ssid_at) = ssid_at else {
        return Some(radio);
    };
    let after = &block[ssid_at + 1..];
    let rate_at: Vec<usize> = after
        .iter()
        .enumerate()
        .filter(|(_, (k, v))| k.contains('(') && k.contains(')') && decimal(v).is_some())
        .map(|(i, _)| i)
        .collect();
    radio.rx_rate_mbps = rate_at.first().and_then(|&i| decimal(after[i].1));
    radio.tx_rate_mbps = rate_at.get(1).and_then(|&i| decimal(after[i].1));
    let before_rates = &after[..rate_at.first().copied().unwrap_or(after.len())];
    radio.channel = before_rates
        .iter()
        .filter(|(k, _)| !k.contains("SSID"))
        .find_map(|(_, v)| v.parse::<u32>().ok().filter(|c| (1..=233).contains(c)));
    radio.signal_percent = after.iter().find_map(|(_, v)| percent(v));
    radio.signal_dbm = after
        .iter()
        .find_map(|(_, v)| v.parse::<i32>().ok().filter(|d| (-120..0).contains(d)));
    radio.band = after.iter().find_map(|(_, v)| band(v)).or_else(|| {
        // Windows before 11 prints no band, and could not use 6 GHz either.
        radio
            .channel
            .map(|c| if c <= 14 { "2.4 GHz" } else { "5 GHz" }.to_owned())
    });
    Some(radio)
}

fn is_guid(text: &str) -> bool {
    let groups: Vec<&str> = text.trim_matches(['{', '}']).split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// `866.7`, `866,7` (German and French decimals) or `1201`.
fn decimal(text: &str) -> Option<f64> {
    text.trim()
        .replace(',', ".")
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// `85%` or `85 %`.
fn percent(text: &str) -> Option<u32> {
    text.strip_suffix('%')?.trim().parse().ok().filter(|p| *p <= 100)
}

/// `5 GHz`, `2,4 GHz`, `6 GHz` as `5 GHz`, `2.4 GHz`, `6 GHz`.
fn band(text: &str) -> Option<String> {
    let number = text.trim().strip_suffix("GHz")?.trim();
    let value = decimal(number)?;
    Some(format!("{value} GHz"))
}

pub(super) async fn section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    let proc_root = root_from_env("KENNY_PROC_ROOT", "/proc");
    let wireless = read_text(&proc_root.join("net/wireless"), 64 * 1024)
        .map(|(text, _)| text)
        .unwrap_or_default();
    let mut radios = radios_at(&sys_root(), &wireless);
    if radios.is_empty() {
        return Ok(not_applicable("no wireless network interface"));
    }
    let mut iw_missing = false;
    for radio in &mut radios {
        match command::run("iw", &["dev", radio.name.as_str(), "link"], TOOL_LIMIT).await {
            Ok(out) if out.success => apply_iw(radio, &parse_iw_link(&out.stdout)),
            Ok(out) => tracing::debug!(interface = %radio.name, "iw dev link: {}", first_line(&out)),
            Err(RunError::Missing) => {
                iw_missing = true;
                break;
            }
            Err(e) => tracing::debug!(interface = %radio.name, "iw dev link: {}", e.describe("iw")),
        }
    }
    if iw_missing {
        let args = [
            "-t",
            "-f",
            "ACTIVE,DEVICE,SSID,CHAN,FREQ,SIGNAL",
            "device",
            "wifi",
            "list",
            "--rescan",
            "no",
        ];
        if let Ok(out) = command::run("nmcli", &args, TOOL_LIMIT).await
            && out.success
        {
            apply_nmcli(&mut radios, &parse_nmcli(&out.stdout));
        }
    }
    Ok(build(radios))
}

/// Interfaces with a `wireless` (wext) or `phy80211` (cfg80211) directory, with what the
/// kernel's `/proc/net/wireless` says of their signal. Without a tool to ask, an
/// interface counts as connected when the link is up (associated).
fn radios_at(sys: &Path, proc_wireless: &str) -> Vec<Radio> {
    let dir = sys.join("class/net");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .take(256)
                .filter(|e| e.path().join("wireless").exists() || e.path().join("phy80211").exists())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let levels = parse_proc_wireless(proc_wireless);
    names
        .into_iter()
        .take(MAX_INTERFACES)
        .map(|name| {
            let operstate = read_small(&dir.join(&name).join("operstate")).unwrap_or_default();
            let signal_dbm = levels.iter().find(|(n, _)| *n == name).and_then(|(_, dbm)| *dbm);
            let connected = operstate == "up";
            Radio {
                connected,
                signal_dbm: signal_dbm.filter(|_| connected),
                signal_percent: signal_dbm.filter(|_| connected).map(percent_of_dbm),
                name,
                ..Radio::default()
            }
        })
        .collect()
}

/// `/proc/net/wireless`: two header lines, then `iface: status link level noise ...`;
/// cfg80211 drivers give the level in dBm (`-52.`).
fn parse_proc_wireless(text: &str) -> Vec<(String, Option<i32>)> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let level = rest
                .split_whitespace()
                .nth(2)
                .and_then(|l| l.trim_end_matches('.').parse::<i32>().ok())
                .filter(|l| (-120..0).contains(l));
            Some((name.trim().to_owned(), level))
        })
        .collect()
}

/// Windows' scale for signal quality: -100 dBm is 0 %, -50 dBm is 100 %, linear between.
fn percent_of_dbm(dbm: i32) -> u32 {
    u32::try_from((2 * (dbm + 100)).clamp(0, 100)).unwrap_or(0)
}

#[derive(Debug, Default, PartialEq)]
struct IwLink {
    connected: bool,
    ssid: Option<String>,
    freq_mhz: Option<f64>,
    signal_dbm: Option<i32>,
    rx_mbps: Option<f64>,
    tx_mbps: Option<f64>,
}

/// `iw dev <if> link`: "Connected to <bssid> (on wlan0)" then tab-indented `key: value`
/// lines (`SSID`, `freq`, `signal: -52 dBm`, `rx bitrate: 866.7 MBit/s ...`), or
/// "Not connected.".
fn parse_iw_link(text: &str) -> IwLink {
    let mut link = IwLink {
        connected: text.trim_start().starts_with("Connected to"),
        ..IwLink::default()
    };
    if !link.connected {
        return link;
    }
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let value = value.trim();
        let first = value.split_whitespace().next().unwrap_or("");
        match key.trim() {
            "SSID" => link.ssid = Some(value.to_owned()).filter(|s| !s.is_empty()),
            "freq" => link.freq_mhz = first.parse().ok(),
            "signal" => link.signal_dbm = first.parse().ok(),
            "rx bitrate" => link.rx_mbps = first.parse().ok(),
            "tx bitrate" => link.tx_mbps = first.parse().ok(),
            _ => {}
        }
    }
    link
}

fn apply_iw(radio: &mut Radio, link: &IwLink) {
    radio.connected = link.connected;
    if !link.connected {
        radio.signal_dbm = None;
        radio.signal_percent = None;
        return;
    }
    radio.ssid = link.ssid.clone();
    if let Some(dbm) = link.signal_dbm {
        radio.signal_dbm = Some(dbm);
        radio.signal_percent = Some(percent_of_dbm(dbm));
    }
    radio.rx_rate_mbps = link.rx_mbps;
    radio.tx_rate_mbps = link.tx_mbps;
    if let Some(freq) = link.freq_mhz {
        (radio.channel, radio.band) = channel_of(freq);
    }
}

/// The channel number and band of a centre frequency (IEEE 802.11 channel plans).
fn channel_of(freq_mhz: f64) -> (Option<u32>, Option<String>) {
    // Frequencies are whole MHz; iw 6 prints them with a decimal.
    let f = freq_mhz.round() as i64;
    let (channel, band) = match f {
        2484 => (14, "2.4 GHz"),
        2412..=2472 => ((f - 2407) / 5, "2.4 GHz"),
        5955..=7115 => ((f - 5950) / 5, "6 GHz"),
        5160..=5885 => ((f - 5000) / 5, "5 GHz"),
        _ => return (None, None),
    };
    (u32::try_from(channel).ok(), Some(band.to_owned()))
}

#[derive(Debug, PartialEq)]
struct NmRow {
    device: String,
    ssid: String,
    channel: Option<u32>,
    freq_mhz: Option<f64>,
    signal_percent: Option<u32>,
}

/// `nmcli -t -f ACTIVE,DEVICE,SSID,CHAN,FREQ,SIGNAL device wifi list`: `:`-separated,
/// with `\:` and `\\` escaping them inside values; only the networks in use.
fn parse_nmcli(text: &str) -> Vec<NmRow> {
    text.lines()
        .filter_map(|line| {
            let fields = split_terse(line);
            let [active, device, ssid, chan, freq, signal] = fields.as_slice() else {
                return None;
            };
            (active == "yes").then(|| NmRow {
                device: device.clone(),
                ssid: ssid.clone(),
                channel: chan.parse().ok(),
                freq_mhz: freq.split_whitespace().next().and_then(|f| f.parse().ok()),
                signal_percent: signal.parse().ok().filter(|p| *p <= 100),
            })
        })
        .collect()
}

fn split_terse(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(field)) = (chars.next(), fields.last_mut()) {
                    field.push(next);
                }
            }
            ':' => fields.push(String::new()),
            other => {
                if let Some(field) = fields.last_mut() {
                    field.push(other);
                }
            }
        }
    }
    fields
}

fn apply_nmcli(radios: &mut [Radio], rows: &[NmRow]) {
    for radio in radios {
        let Some(row) = rows.iter().find(|r| r.device == radio.name) else {
            continue;
        };
        radio.connected = true;
        radio.ssid = Some(row.ssid.clone()).filter(|s| !s.is_empty());
        if radio.signal_percent.is_none() {
            radio.signal_percent = row.signal_percent;
        }
        let (channel, band) = row.freq_mhz.map(channel_of).unwrap_or_default();
        radio.channel = row.channel.or(channel);
        radio.band = band;
    }
}

fn build(radios: Vec<Radio>) -> Section {
    if radios.is_empty() {
        return not_applicable("no wireless network interface");
    }
    let connected: Vec<&Radio> = radios.iter().filter(|r| r.connected).collect();
    let weak: Vec<&Radio> = connected.iter().copied().filter(|r| r.weak()).collect();
    let status = if weak.is_empty() { Status::Ok } else { Status::Warn };
    let summary = match (weak.first(), connected.first()) {
        (Some(radio), _) => format!("weak Wi-Fi signal: {}", describe(radio)),
        (None, Some(radio)) => describe(radio),
        (None, None) => {
            let names: Vec<&str> = radios.iter().map(|r| r.name.as_str()).collect();
            format!(
                "not connected to a Wi-Fi network (interfaces: {})",
                clip(&names.join(", "))
            )
        }
    };
    let listed: Vec<Value> = radios.iter().map(Radio::to_json).collect();
    section_of(
        status,
        summary,
        json!({ "interfaces": listed, "connected": !connected.is_empty() }),
    )
}

/// `HomeNet on wlan0: 85% (-57 dBm), 5 GHz channel 44`.
fn describe(radio: &Radio) -> String {
    let network = radio.ssid.as_deref().map_or("a hidden network".to_owned(), clip);
    let mut text = format!("{network} on {}", clip(&radio.name));
    let signal = match (radio.signal_percent, radio.signal_dbm) {
        (Some(p), Some(d)) => Some(format!("{p}% ({d} dBm)")),
        (Some(p), None) => Some(format!("{p}%")),
        (None, Some(d)) => Some(format!("{d} dBm")),
        (None, None) => None,
    };
    let place = match (&radio.band, radio.channel) {
        (Some(b), Some(c)) => Some(format!("{b} channel {c}")),
        (Some(b), None) => Some(b.clone()),
        (None, Some(c)) => Some(format!("channel {c}")),
        (None, None) => None,
    };
    let details: Vec<String> = signal.into_iter().chain(place).collect();
    if !details.is_empty() {
        text.push_str(": ");
        text.push_str(&details.join(", "));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        crate::tools::telemetry::files::put(root, rel, text.as_bytes()).unwrap();
    }

    const PROC_WIRELESS: &str = "\
Inter-| sta-|   Quality        |   Discarded packets               | Missed | WE
 face | tus | link level noise |  nwid  crypt   frag  retry   misc | beacon | 22
wlp2s0: 0000   41.  -69.  -256        0      0      0      3     27        0
";

    const IW_CONNECTED: &str = "\
Connected to 74:83:c2:aa:bb:cc (on wlp2s0)
\tSSID: HomeNet
\tfreq: 5220.0
\tRX: 81342934 bytes (93422 packets)
\tTX: 9348211 bytes (31230 packets)
\tsignal: -69 dBm
\trx bitrate: 390.0 MBit/s VHT-MCS 4 80MHz VHT-NSS 2
\ttx bitrate: 526.6 MBit/s VHT-MCS 6 80MHz short GI VHT-NSS 2

\tbss flags:\tshort-slot-time
\tdtim period:\t1
\tbeacon int:\t100
";

    fn laptop() -> tempfile::TempDir {
        let sys = tempfile::tempdir().unwrap();
        write(sys.path(), "class/net/wlp2s0/operstate", "up\n");
        fs::create_dir_all(sys.path().join("class/net/wlp2s0/phy80211")).unwrap();
        write(sys.path(), "class/net/enp3s0/operstate", "down\n");
        write(sys.path(), "class/net/lo/operstate", "unknown\n");
        sys
    }

    #[test]
    fn sysfs_and_proc_find_the_radio_and_its_signal() {
        let sys = laptop();
        let radios = radios_at(sys.path(), PROC_WIRELESS);
        assert_eq!(
            radios,
            [Radio {
                name: "wlp2s0".into(),
                connected: true,
                signal_dbm: Some(-69),
                signal_percent: Some(62),
                ..Radio::default()
            }]
        );
        assert!(radios_at(sys.path(), "").iter().all(|r| r.signal_dbm.is_none()));
        let wired = tempfile::tempdir().unwrap();
        write(wired.path(), "class/net/eth0/operstate", "up\n");
        assert!(radios_at(wired.path(), "").is_empty());
        assert_eq!(build(Vec::new())["applicable"], false);
    }

    #[test]
    fn iw_adds_network_rates_channel_and_band() {
        let sys = laptop();
        let mut radios = radios_at(sys.path(), PROC_WIRELESS);
        apply_iw(&mut radios[0], &parse_iw_link(IW_CONNECTED));
        let s = build(radios);
        assert_eq!(s["status"], "ok");
        assert_eq!(s["summary"], "HomeNet on wlp2s0: 62% (-69 dBm), 5 GHz channel 44");
        assert_eq!(
            s["interfaces"][0],
            json!({"name": "wlp2s0", "connected": true, "ssid": "HomeNet", "signal_percent": 62,
                   "signal_dbm": -69, "rx_rate_mbps": 390.0, "tx_rate_mbps": 526.6, "channel": 44,
                   "band": "5 GHz"})
        );
        assert_eq!(s["connected"], true);
    }

    #[test]
    fn a_weak_signal_warns_and_no_link_is_plain() {
        let mut weak = parse_iw_link(IW_CONNECTED);
        weak.signal_dbm = Some(-81);
        weak.freq_mhz = Some(2437.0);
        let mut radio = Radio {
            name: "wlan0".into(),
            ..Radio::default()
        };
        apply_iw(&mut radio, &weak);
        let s = build(vec![radio.clone()]);
        assert_eq!(s["status"], "warn");
        assert_eq!(
            s["summary"],
            "weak Wi-Fi signal: HomeNet on wlan0: 38% (-81 dBm), 2.4 GHz channel 6"
        );
        apply_iw(&mut radio, &parse_iw_link("Not connected.\n"));
        let s = build(vec![radio]);
        assert_eq!(
            (s["status"].as_str(), s["summary"].as_str()),
            (Some("ok"), Some("not connected to a Wi-Fi network (interfaces: wlan0)"))
        );
        assert_eq!(s["connected"], false);
    }

    #[test]
    fn channels_of_every_band() {
        assert_eq!(channel_of(2412.0), (Some(1), Some("2.4 GHz".into())));
        assert_eq!(channel_of(2484.0), (Some(14), Some("2.4 GHz".into())));
        assert_eq!(channel_of(5745.0), (Some(149), Some("5 GHz".into())));
        assert_eq!(channel_of(5955.0), (Some(1), Some("6 GHz".into())));
        assert_eq!(channel_of(60480.0), (None, None));
    }

    #[test]
    fn nmcli_terse_output_is_unescaped() {
        let text = "no:wlp2s0:Neighbours:1:2412 MHz:30\nyes:wlp2s0:Caf\\:e 5G:36:5180 MHz:74\n";
        let rows = parse_nmcli(text);
        assert_eq!(
            rows,
            [NmRow {
                device: "wlp2s0".into(),
                ssid: "Caf:e 5G".into(),
                channel: Some(36),
                freq_mhz: Some(5180.0),
                signal_percent: Some(74),
            }]
        );
        let mut radios = vec![Radio {
            name: "wlp2s0".into(),
            ..Radio::default()
        }];
        apply_nmcli(&mut radios, &rows);
        assert_eq!(build(radios)["summary"], "Caf:e 5G on wlp2s0: 74%, 5 GHz channel 36");
    }

    #[test]
    fn netsh_values_are_found_by_shape() {
        assert!(is_guid("3f5a8e12-0c2b-4a77-9d51-2b6e0f1c9a44"));
        assert!(!is_guid("a4:c3:f0:12:34:56"));
        assert_eq!(percent("85%"), Some(85));
        assert_eq!(percent("72 %"), Some(72));
        assert_eq!(band("2,4 GHz").as_deref(), Some("2.4 GHz"));
        assert_eq!(decimal("866,7"), Some(866.7));
        assert_eq!(percent_of_dbm(-45), 100);
        assert_eq!(percent_of_dbm(-110), 0);
    }

    #[test]
    fn the_windows_query_asks_netsh_after_the_wlan_service() {
        assert!(QUERY.script.contains("Get-Service -Name WlanSvc"));
        assert!(QUERY.script.contains(r#"System32\netsh.exe" wlan show interfaces"#));
        assert!(
            QUERY.script.contains("OEMCodePage"),
            "netsh prints in the OEM code page"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_answers_without_failing() {
        let s = section().await.unwrap();
        assert_ne!(s["status"], "crit", "{s:?}");
        assert!(s["applicable"] == false || s["interfaces"].is_array(), "{s:?}");
    }
}
