//! The routing section: the IPv4 and IPv6 routing table, and whether there is a default route.
//!
//! Linux: `/proc/net/route` and `/proc/net/ipv6_route`, the kernel's own tables (usable
//! routes only: reject routes are left out). Windows: `Get-NetRoute`, where a route's
//! metric is the route's plus its interface's, as Windows itself weighs them. The
//! parsers are `tools::netinfo`'s, which the network section and `net_config` share.

use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::command::Output;
use super::files::read_text;
use super::services::capped;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, section as make_section};
use crate::tools::netinfo::{self, TableRoute};

/// A PC with a few VPNs and containers has dozens; past this the count tells the story.
const MAX_LISTED: usize = 100;
const INTERFACE_CHARS: usize = 100;
/// Route tables are a few KiB; this only guards against a misbehaving /proc.
const TABLE_CAP: u64 = 4 * 1024 * 1024;

static QUERY: Query = Query {
    script: "$ErrorActionPreference = 'Stop'
Get-NetRoute -PolicyStore ActiveStore |
  Select-Object DestinationPrefix,NextHop,InterfaceAlias,InterfaceIndex,RouteMetric,InterfaceMetric |
  ConvertTo-Json -Compress -Depth 2
",
    limit: Duration::from_secs(10),
    parse: parse_windows,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

pub(super) async fn section() -> Outcome {
    routing_at(Path::new("/proc/net"))
}

/// The table from `proc_net` (`/proc/net`). IPv6 may be switched off, leaving no
/// ipv6_route file; no IPv4 table at all is a PC without networking to judge.
fn routing_at(proc_net: &Path) -> Outcome {
    let read = |name: &str| match read_text(&proc_net.join(name), TABLE_CAP) {
        Ok((text, _)) => Ok(Some(text)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", proc_net.join(name).display())),
    };
    let Some(v4) = read("route")? else {
        return Err(format!(
            "{} does not exist: the kernel has no IPv4 networking, or /proc is not mounted",
            proc_net.join("route").display()
        ));
    };
    let mut routes = netinfo::parse_proc_net_route_table(&v4);
    if let Some(v6) = read("ipv6_route")? {
        routes.extend(netinfo::parse_proc_net_ipv6_route_table(&v6));
    }
    Ok(build(routes))
}

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let routes = netinfo::windows::parse_route_table(&value.to_string())?;
    if routes.is_empty() {
        // Windows always has loopback and multicast routes; none means the query saw nothing.
        return Err(
            "Get-NetRoute listed no routes at all, not even loopback; the TCP/IP stack may be broken".to_owned(),
        );
    }
    Ok(build(routes))
}

fn build(mut routes: Vec<TableRoute>) -> Section {
    // Default routes first, the one in use (lowest metric) at the top; the rest by family.
    routes.sort_by_key(|r| {
        (
            !r.is_default(),
            r.route.family.as_str(),
            r.is_default().then_some(r.route.metric),
        )
    });
    let count = routes.len();
    let defaults: Vec<&TableRoute> = routes.iter().filter(|r| r.is_default()).collect();
    let default_count = defaults.len();
    let (status, summary) = match defaults.iter().min_by_key(|r| r.route.metric) {
        None => (
            Status::Warn,
            format!("no default route: this PC reaches only its local networks ({count} routes)"),
        ),
        Some(best) => {
            let via = match best.route.gateway {
                Some(gateway) => format!("via {gateway} on {}", capped(&best.route.interface, 40)),
                None => format!("on-link on {}", capped(&best.route.interface, 40)),
            };
            (Status::Ok, format!("{count} routes; default {via}"))
        }
    };
    let listed: Vec<Value> = routes.iter().take(MAX_LISTED).map(route_json).collect();
    make_section(
        status,
        summary,
        json!({
            "routes": listed,
            "default_routes": default_count,
            "count": count,
            "truncated": count > MAX_LISTED,
        }),
    )
}

fn route_json(route: &TableRoute) -> Value {
    json!({
        "destination": route.destination,
        "gateway": route.route.gateway.map(|g| g.to_string()),
        "interface": capped(&route.route.interface, INTERFACE_CHARS),
        "metric": route.route.metric,
        "family": route.route.family.as_str(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // /proc/net/route and /proc/net/ipv6_route of a laptop on Wi-Fi with a WireGuard
    // tunnel and Docker (Debian 12, kernel 6.1).
    const ROUTE: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
wlp2s0\t00000000\t01B2A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0
wlp2s0\t00B2A8C0\t00000000\t0001\t0\t0\t600\t00FFFFFF\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
wg0\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0
wlp2s0\t0000FEA9\t00000000\t0201\t0\t0\t1000\t0000FFFF\t0\t0\t0
";
    const IPV6_ROUTE: &str = "\
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001   wlp2s0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000003a10d5fffe000001 00000258 00000003 00000000 00450003   wlp2s0
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
";

    fn fake_proc(route: Option<&str>, ipv6: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = route {
            std::fs::write(dir.path().join("route"), text).unwrap();
        }
        if let Some(text) = ipv6 {
            std::fs::write(dir.path().join("ipv6_route"), text).unwrap();
        }
        dir
    }

    #[test]
    fn the_whole_table_with_default_routes_first() {
        let proc_net = fake_proc(Some(ROUTE), Some(IPV6_ROUTE));
        let section = routing_at(proc_net.path()).unwrap();
        assert_eq!(section["status"], "ok");
        assert_eq!(section["summary"], "7 routes; default via 192.168.178.1 on wlp2s0");
        assert_eq!(section["default_routes"], 2);
        assert_eq!(section["count"], 7, "the reject routes are left out");
        assert_eq!(section["truncated"], false);
        let routes = section["routes"].as_array().unwrap();
        assert_eq!(
            routes[0],
            json!({"destination": "0.0.0.0/0", "gateway": "192.168.178.1", "interface": "wlp2s0",
                   "metric": 600, "family": "ipv4"})
        );
        assert_eq!(
            routes[1],
            json!({"destination": "::/0", "gateway": "fe80::3a10:d5ff:fe00:1", "interface": "wlp2s0",
                   "metric": 600, "family": "ipv6"})
        );
        let destinations: Vec<&str> = routes.iter().map(|r| r["destination"].as_str().unwrap()).collect();
        assert_eq!(
            destinations[2..],
            [
                "192.168.178.0/24",
                "172.17.0.0/16",
                "10.0.0.0/8",
                "fe80::/64",
                "::1/128"
            ]
        );
        assert_eq!(routes[4]["gateway"], Value::Null, "on-link");
    }

    #[test]
    fn no_default_route_warns_and_ipv6_may_be_off() {
        let local_only: String = ROUTE
            .lines()
            .filter(|l| !l.contains("\t00000000\t01B2"))
            .collect::<Vec<_>>()
            .join("\n");
        let proc_net = fake_proc(Some(&local_only), None);
        let section = routing_at(proc_net.path()).unwrap();
        assert_eq!(section["status"], "warn");
        assert_eq!(
            section["summary"],
            "no default route: this PC reaches only its local networks (3 routes)"
        );
        assert_eq!(section["default_routes"], 0);
        let err = routing_at(fake_proc(None, None).path()).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn long_tables_are_cut_and_counted() {
        let mut table = String::from("Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n");
        for i in 0..150u32 {
            table.push_str(&format!(
                "tun{i}\t{:08X}\t00000000\t0001\t0\t0\t0\tFFFFFFFF\n",
                i.swap_bytes() | 0x0A
            ));
        }
        let section = build(netinfo::parse_proc_net_route_table(&table));
        assert_eq!(section["count"], 150);
        assert_eq!(section["routes"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(section["truncated"], true);
        assert_eq!(section["status"], "warn");
    }

    #[test]
    fn the_windows_query_reads_get_netroute() {
        let script = windows_query().unwrap().script;
        assert!(script.contains("Get-NetRoute -PolicyStore ActiveStore"));
        assert!(script.contains("Select-Object DestinationPrefix,NextHop,InterfaceAlias"));
        assert!(
            !script.contains("-DestinationPrefix"),
            "the whole table, not only default routes"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_answers() {
        let section = section().await.unwrap();
        assert!(section["count"].as_u64().unwrap() >= 1, "{section:?}");
        assert_eq!(
            section["default_routes"].as_u64().unwrap() > 0,
            section["status"] == "ok",
            "{section:?}"
        );
    }
}
