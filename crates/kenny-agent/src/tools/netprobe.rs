//! Network probes, the first things an admin tries when "the internet is broken":
//! can this PC reach a host and how fast, does a name resolve, is a TCP port open.
//! Every probe is bounded in time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kenny_proto::args::{NetDnsLookupArgs, NetPingArgs, NetPortCheckArgs};
use serde_json::{Value, json};
use tokio::net::TcpStream;

use super::process::run_program;
use super::{ToolError, ToolResult};

const DEFAULT_PING_COUNT: u64 = 4;
const DEFAULT_PING_WAIT_S: u64 = 2;
const DEFAULT_TIMEOUT_S: u64 = 5;
/// Where ICMP is unavailable, a TCP handshake (or a refusal) still proves the host is up.
const FALLBACK_PORT: u16 = 443;
/// A name can resolve to dozens of addresses; trying the first few says enough.
const MAX_ADDRESSES_TRIED: usize = 4;

pub(super) async fn ping(args: NetPingArgs) -> ToolResult {
    let host = host_arg(&args.host)?;
    let count = args.count.unwrap_or(DEFAULT_PING_COUNT);
    // Not `timeout_s`: the server reads that as the whole call's deadline.
    let wait = args.wait_s.unwrap_or(DEFAULT_PING_WAIT_S);
    match ping_program() {
        Some(program) => icmp_ping(&program, host, count, wait).await,
        None => tcp_ping(host, count, Duration::from_secs(wait)).await,
    }
}

pub(super) async fn dns_lookup(args: NetDnsLookupArgs) -> ToolResult {
    let host = host_arg(&args.host)?;
    let limit = Duration::from_secs(args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S));
    let started = Instant::now();
    let outcome = resolve(host, 0, limit).await;
    let elapsed_ms = millis(started.elapsed());
    Ok(match outcome {
        Ok(addrs) => {
            let mut addresses: Vec<String> = Vec::new();
            for a in addrs {
                let ip = a.ip().to_string();
                if !addresses.contains(&ip) {
                    addresses.push(ip);
                }
            }
            json!({"host": host, "resolved": true, "addresses": addresses, "elapsed_ms": elapsed_ms})
        }
        Err(reason) => {
            json!({"host": host, "resolved": false, "addresses": [], "elapsed_ms": elapsed_ms, "error": reason})
        }
    })
}

pub(super) async fn port_check(args: NetPortCheckArgs) -> ToolResult {
    let host = host_arg(&args.host)?;
    let port = args.port;
    if port == 0 {
        return Err(ToolError::bad_args("`port` must be between 1 and 65535"));
    }
    let limit = Duration::from_secs(args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S));
    let deadline = Instant::now() + limit;
    let addrs = match resolve(host, port, limit).await {
        Ok(addrs) => addrs,
        Err(reason) => {
            return Ok(json!({"host": host, "port": port, "status": "unresolved", "error": reason}));
        }
    };
    let mut last = json!({"host": host, "port": port, "status": "timeout"});
    for addr in addrs.into_iter().take(MAX_ADDRESSES_TRIED) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let (status, ms, error) = connect(addr, left).await;
        last = json!({"host": host, "port": port, "address": addr.ip().to_string(), "status": status});
        if let Some(ms) = ms {
            last["connect_ms"] = json!(ms);
        }
        if let Some(error) = error {
            last["error"] = json!(error);
        }
        if status == "open" {
            break;
        }
    }
    Ok(last)
}

/// Host names and addresses only: a leading `-` would be read as an option by ping.
fn host_arg(host: &str) -> Result<&str, ToolError> {
    let host = host.trim();
    let ok = !host.is_empty()
        && !host.starts_with('-')
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    if ok {
        Ok(host)
    } else {
        Err(ToolError::bad_args(format!(
            "`host` must be a host name or IP address (letters, digits, . - : _), got {host:?}"
        )))
    }
}

async fn resolve(host: &str, port: u16, limit: Duration) -> Result<Vec<SocketAddr>, String> {
    match tokio::time::timeout(limit, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(addrs)) => {
            let addrs: Vec<_> = addrs.collect();
            if addrs.is_empty() {
                Err(format!("{host} has no addresses"))
            } else {
                Ok(addrs)
            }
        }
        Ok(Err(e)) => Err(format!("{host} does not resolve: {e}")),
        Err(_) => Err(format!("resolving {host} took longer than {}s", limit.as_secs())),
    }
}

/// One TCP connection attempt: status, connect time when the host answered, and why not.
async fn connect(addr: SocketAddr, limit: Duration) -> (&'static str, Option<f64>, Option<String>) {
    let started = Instant::now();
    match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
        Ok(Ok(_stream)) => ("open", Some(millis(started.elapsed())), None),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            ("refused", Some(millis(started.elapsed())), Some(e.to_string()))
        }
        Ok(Err(e)) => ("unreachable", None, Some(e.to_string())),
        Err(_) => ("timeout", None, None),
    }
}

fn ping_program() -> Option<std::path::PathBuf> {
    if cfg!(windows) {
        let root = std::env::var_os("SystemRoot").unwrap_or_else(|| "C:\\Windows".into());
        let path = std::path::Path::new(&root).join("System32").join("ping.exe");
        return path.exists().then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/bin".into(), "/bin".into(), "/sbin".into()])
        .map(|dir| dir.join("ping"))
        .find(|p| p.is_file())
}

/// The ping command line for this OS; `wait_s` bounds each reply.
fn ping_args(windows: bool, host: &str, count: u64, wait_s: u64) -> Vec<String> {
    if windows {
        vec![
            "-n".into(),
            count.to_string(),
            "-w".into(),
            (wait_s * 1000).to_string(),
            host.into(),
        ]
    } else {
        vec![
            "-n".into(),
            "-c".into(),
            count.to_string(),
            "-W".into(),
            wait_s.to_string(),
            host.into(),
        ]
    }
}

async fn icmp_ping(program: &std::path::Path, host: &str, count: u64, wait_s: u64) -> ToolResult {
    let argv = ping_args(cfg!(windows), host, count, wait_s);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    // Replies come about a second apart; each may take the whole wait.
    let limit = Duration::from_secs(count * (wait_s + 1) + 5);
    let out = run_program(&program.to_string_lossy(), &argv, limit).await?;
    let parsed = parse_ping(&out.stdout);
    if parsed.sent == 0 && parsed.received == 0 {
        let complaint = out.complaint();
        let lower = complaint.to_ascii_lowercase();
        if [
            "not known",
            "could not find host",
            "resolv",
            "unknown host",
            "no address associated",
        ]
        .iter()
        .any(|m| lower.contains(m))
        {
            return Ok(
                json!({"host": host, "method": "icmp", "reachable": false, "resolved": false, "error": complaint}),
            );
        }
        if parsed.times_ms.is_empty() {
            return Err(ToolError::exec_failed(format!("ping gave no result: {complaint}")));
        }
    }
    Ok(summary(
        host,
        "icmp",
        parsed.address,
        parsed.sent.max(count),
        parsed.received,
        &parsed.times_ms,
    ))
}

async fn tcp_ping(host: &str, count: u64, wait: Duration) -> ToolResult {
    let addrs = match resolve(host, FALLBACK_PORT, wait.max(Duration::from_secs(DEFAULT_TIMEOUT_S))).await {
        Ok(addrs) => addrs,
        Err(reason) => {
            return Ok(
                json!({"host": host, "method": "tcp_connect", "reachable": false, "resolved": false, "error": reason}),
            );
        }
    };
    let addr = addrs[0];
    let mut times = Vec::new();
    for i in 0..count {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // A refusal is an answer from the host too: it is up, just not serving 443.
        if let (_, Some(ms), _) = connect(addr, wait).await {
            times.push(ms);
        }
    }
    let mut result = summary(
        host,
        "tcp_connect",
        Some(addr.ip().to_string()),
        count,
        times.len() as u64,
        &times,
    );
    result["note"] = json!(format!(
        "no ping program on this PC: measured TCP connection time to port {FALLBACK_PORT} (a refused connection still counts as a reply)"
    ));
    Ok(result)
}

fn summary(host: &str, method: &str, address: Option<String>, sent: u64, received: u64, times: &[f64]) -> Value {
    let loss = if sent == 0 {
        100.0
    } else {
        100.0 * (sent.saturating_sub(received)) as f64 / sent as f64
    };
    let rtt = (!times.is_empty()).then(|| {
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let max = times.iter().copied().fold(0.0, f64::max);
        let avg = times.iter().sum::<f64>() / times.len() as f64;
        json!({"min": round(min), "avg": round(avg), "max": round(max)})
    });
    json!({
        "host": host,
        "address": address,
        "method": method,
        "reachable": received > 0,
        "sent": sent,
        "received": received,
        "loss_percent": round(loss),
        "rtt_ms": rtt,
    })
}

#[derive(Debug, Default, PartialEq)]
struct PingOutput {
    address: Option<String>,
    sent: u64,
    received: u64,
    times_ms: Vec<f64>,
}

/// Reads iputils (Linux) and Windows ping output. Windows translates its messages, so
/// replies are recognised by shape (`TTL=` and a `=`/`<` time in ms), not by wording.
fn parse_ping(text: &str) -> PingOutput {
    let mut out = PingOutput::default();
    let mut counted = false;
    for line in text.lines() {
        let lower = line.to_ascii_lowercase();
        if lower.contains("ttl=") {
            if let Some(ms) = reply_time(&lower) {
                out.times_ms.push(ms);
            }
            continue;
        }
        if out.address.is_none()
            && let Some(addr) = target_address(line)
        {
            out.address = Some(addr);
        }
        // iputils: "4 packets transmitted, 4 received, 0% packet loss".
        if let Some((sent, rest)) = lower.split_once(" packets transmitted, ") {
            out.sent = sent.trim().parse().unwrap_or(0);
            out.received = rest.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
            counted = true;
        }
        // Windows: "Packets: Sent = 4, Received = 4, Lost = 0 (0% loss)" (localised words).
        if !counted && lower.contains('(') && lower.matches('=').count() == 3 {
            let numbers: Vec<u64> = lower
                .split('=')
                .skip(1)
                .filter_map(|part| part.trim().split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
                .collect();
            if let [sent, received, _lost] = numbers[..] {
                out.sent = sent;
                out.received = received;
                counted = true;
            }
        }
    }
    if !counted {
        out.received = out.times_ms.len() as u64;
        out.sent = out.received;
    }
    // Windows counts "Destination host unreachable" (sent by a router) as received;
    // only an echo reply, which carries a time, shows the host itself answered.
    out.received = out.received.min(out.times_ms.len() as u64);
    out
}

fn reply_time(lower: &str) -> Option<f64> {
    let at = lower.find("ms")?;
    let before = &lower[..at];
    let start = before.rfind(['=', '<'])? + 1;
    before[start..].trim().replace(',', ".").parse().ok()
}

/// The address in the header line: "PING host (1.2.3.4) 56(84)..." or
/// "Pinging host [1.2.3.4] with 32 bytes of data:".
fn target_address(line: &str) -> Option<String> {
    let (open, close) = if line.starts_with("PING ") {
        ('(', ')')
    } else {
        ('[', ']')
    };
    let start = line.find(open)? + 1;
    let end = start + line[start..].find(close)?;
    let candidate = &line[start..end];
    candidate
        .parse::<std::net::IpAddr>()
        .is_ok()
        .then(|| candidate.to_owned())
}

fn millis(d: Duration) -> f64 {
    round(d.as_secs_f64() * 1000.0)
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::typed;

    const LINUX_OK: &str = "PING example.org (93.184.215.14) 56(84) bytes of data.
64 bytes from 93.184.215.14: icmp_seq=1 ttl=55 time=14.2 ms
64 bytes from 93.184.215.14: icmp_seq=2 ttl=55 time=13.8 ms
64 bytes from 93.184.215.14: icmp_seq=4 ttl=55 time=15.0 ms

--- example.org ping statistics ---
4 packets transmitted, 3 received, 25% packet loss, time 3004ms
rtt min/avg/max/mdev = 13.800/14.333/15.000/0.498 ms
";

    const WINDOWS_OK: &str = "\r
Pinging example.org [93.184.215.14] with 32 bytes of data:\r
Reply from 93.184.215.14: bytes=32 time=14ms TTL=55\r
Reply from 93.184.215.14: bytes=32 time<1ms TTL=55\r
Request timed out.\r
Reply from 93.184.215.14: bytes=32 time=16ms TTL=55\r
\r
Ping statistics for 93.184.215.14:\r
    Packets: Sent = 4, Received = 3, Lost = 1 (25% loss),\r
Approximate round trip times in milli-seconds:\r
    Minimum = 0ms, Maximum = 16ms, Average = 10ms\r
";

    const WINDOWS_GERMAN: &str = "
Ping wird ausgeführt für 192.168.1.1 mit 32 Bytes Daten:
Antwort von 192.168.1.1: Bytes=32 Zeit=2ms TTL=64
Antwort von 192.168.1.1: Bytes=32 Zeit=3ms TTL=64

Ping-Statistik für 192.168.1.1:
    Pakete: Gesendet = 2, Empfangen = 2, Verloren = 0
    (0% Verlust),
";

    #[test]
    fn parses_iputils_output() {
        let p = parse_ping(LINUX_OK);
        assert_eq!(p.address.as_deref(), Some("93.184.215.14"));
        assert_eq!((p.sent, p.received), (4, 3));
        assert_eq!(p.times_ms, vec![14.2, 13.8, 15.0]);
    }

    #[test]
    fn parses_windows_output_in_english_and_german() {
        let p = parse_ping(WINDOWS_OK);
        assert_eq!(p.address.as_deref(), Some("93.184.215.14"));
        assert_eq!((p.sent, p.received), (4, 3));
        assert_eq!(p.times_ms, vec![14.0, 1.0, 16.0]);
        // The German summary breaks its line before the percentage; replies still count.
        let g = parse_ping(WINDOWS_GERMAN);
        assert_eq!(g.times_ms, vec![2.0, 3.0]);
        assert_eq!(g.received, 2);
    }

    #[test]
    fn unreachable_answers_from_a_router_are_not_replies() {
        let text = "\r
Pinging 10.9.9.9 with 32 bytes of data:\r
Reply from 192.168.1.1: Destination host unreachable.\r
Reply from 192.168.1.1: Destination host unreachable.\r
\r
Ping statistics for 10.9.9.9:\r
    Packets: Sent = 2, Received = 2, Lost = 0 (0% loss),\r
";
        let p = parse_ping(text);
        assert_eq!((p.sent, p.received), (2, 0));
        let s = summary("10.9.9.9", "icmp", None, p.sent, p.received, &p.times_ms);
        assert_eq!(
            (s["reachable"].clone(), s["loss_percent"].clone()),
            (json!(false), json!(100.0))
        );
    }

    #[test]
    fn builds_ping_command_lines() {
        assert_eq!(
            ping_args(false, "example.org", 3, 2),
            ["-n", "-c", "3", "-W", "2", "example.org"]
        );
        assert_eq!(
            ping_args(true, "example.org", 3, 2),
            ["-n", "3", "-w", "2000", "example.org"]
        );
    }

    #[test]
    fn refuses_hosts_that_could_be_options_or_injection() {
        for bad in ["-f", "a b", "x;id", "$(id)", "", &"a".repeat(254)] {
            let err = host_arg(bad).unwrap_err();
            assert!(err.message.contains("host name or IP address"), "{bad}: {err:?}");
        }
        for good in ["example.org", "192.168.1.1", "::1", "fe80::1", "my_host.lan"] {
            assert_eq!(host_arg(good).unwrap(), good);
        }
    }

    #[tokio::test]
    async fn port_check_tells_open_from_refused_and_unresolved() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap().port();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let r = port_check(typed(json!({"host": "127.0.0.1", "port": open})))
            .await
            .unwrap();
        assert_eq!(r["status"], "open", "{r}");
        assert!(r["connect_ms"].as_f64().unwrap() >= 0.0);
        let r = port_check(typed(json!({"host": "127.0.0.1", "port": closed})))
            .await
            .unwrap();
        assert_eq!(r["status"], "refused", "{r}");
        let r = port_check(typed(
            json!({"host": "no-such-host.invalid", "port": 80, "timeout_s": 5}),
        ))
        .await
        .unwrap();
        assert_eq!(r["status"], "unresolved", "{r}");
    }

    #[tokio::test]
    async fn dns_lookup_resolves_localhost_and_reports_failures_as_data() {
        let r = dns_lookup(typed(json!({"host": "localhost"}))).await.unwrap();
        assert_eq!(r["resolved"], true, "{r}");
        let addrs: Vec<&str> = r["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(addrs.iter().any(|a| *a == "127.0.0.1" || *a == "::1"), "{addrs:?}");
        let r = dns_lookup(typed(json!({"host": "no-such-host.invalid"})))
            .await
            .unwrap();
        assert_eq!(r["resolved"], false, "{r}");
        assert!(r["error"].as_str().unwrap().contains("no-such-host.invalid"));
    }

    #[tokio::test]
    async fn tcp_fallback_counts_a_refusal_as_a_reply() {
        let r = tcp_ping("127.0.0.1", 2, Duration::from_secs(2)).await.unwrap();
        assert_eq!(r["method"], "tcp_connect");
        assert_eq!(r["received"], 2, "{r}");
        assert_eq!(r["reachable"], true);
        assert!(r["note"].as_str().unwrap().contains("port 443"));
    }
}
