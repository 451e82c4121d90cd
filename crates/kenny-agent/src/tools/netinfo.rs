//! Default routes and DNS servers as the OS itself records them; read by telemetry and `net_config`.
//!
//! Linux: `/proc/net/route`, `/proc/net/ipv6_route` and `/etc/resolv.conf` (following
//! systemd-resolved's stub to its real upstream list). Windows: the parsers for
//! `Get-NetRoute` and `Get-DnsClientServerAddress` JSON, run by `net_config`.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    V4,
    V6,
}

impl Family {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }
}

/// A default route: where traffic for the rest of the world goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub family: Family,
    /// `None` when the route is on-link (point-to-point links, some VPNs).
    pub gateway: Option<IpAddr>,
    pub interface: String,
    pub metric: u32,
}

impl Route {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "family": self.family.as_str(),
            "gateway": self.gateway.map(|g| g.to_string()),
            "interface": self.interface,
            "metric": self.metric,
        })
    }
}

// Route flags from the kernel's route.h.
const RTF_UP: u32 = 0x0001;
const RTF_REJECT: u32 = 0x0200;

/// systemd-resolved's local stub listeners; the real servers are elsewhere.
const RESOLVED_STUBS: &[&str] = &["127.0.0.53", "127.0.0.54"];
const RESOLVED_UPSTREAM: &str = "/run/systemd/resolve/resolv.conf";

/// This PC's default routes, lowest metric first (IPv4 before IPv6 on a tie).
/// Empty when there is none, or on systems whose tables are not read here yet.
pub(crate) fn default_routes() -> Vec<Route> {
    if !cfg!(target_os = "linux") {
        return Vec::new();
    }
    let mut routes = read_small("/proc/net/route")
        .map(|t| parse_proc_net_route(&t))
        .unwrap_or_default();
    routes.extend(
        read_small("/proc/net/ipv6_route")
            .map(|t| parse_proc_net_ipv6_route(&t))
            .unwrap_or_default(),
    );
    sort_routes(&mut routes);
    routes
}

/// The DNS servers this PC asks, in order, without duplicates.
pub(crate) fn dns_servers() -> Vec<String> {
    if !cfg!(unix) {
        return Vec::new();
    }
    let servers = read_small("/etc/resolv.conf")
        .map(|t| parse_resolv_conf(&t))
        .unwrap_or_default();
    if is_resolved_stub(&servers) {
        let upstream = read_small(RESOLVED_UPSTREAM)
            .map(|t| parse_resolv_conf(&t))
            .unwrap_or_default();
        if !upstream.is_empty() {
            return upstream;
        }
    }
    servers
}

/// Whether these servers are only systemd-resolved's stub, which forwards elsewhere.
pub(crate) fn is_resolved_stub(servers: &[String]) -> bool {
    !servers.is_empty() && servers.iter().all(|s| RESOLVED_STUBS.contains(&s.as_str()))
}

/// Default routes in `/proc/net/route`: destination and mask 0.
pub(crate) fn parse_proc_net_route(text: &str) -> Vec<Route> {
    defaults_of(parse_proc_net_route_table(text))
}

/// Every usable route in `/proc/net/route`: up and not a reject route. Addresses there
/// are the kernel's 32-bit values printed in host byte order, hence `to_ne_bytes`.
pub(crate) fn parse_proc_net_route_table(text: &str) -> Vec<TableRoute> {
    let mut routes = Vec::new();
    for line in text.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [iface, dest, gateway, flags, _refcnt, _use, metric, mask, ..] = fields[..] else {
            continue;
        };
        let (Some(dest), Some(gateway), Some(flags), Some(mask)) =
            (hex_u32(dest), hex_u32(gateway), hex_u32(flags), hex_u32(mask))
        else {
            continue;
        };
        if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 {
            continue;
        }
        let gateway = Ipv4Addr::from(gateway.to_ne_bytes());
        routes.push(TableRoute {
            destination: format!("{}/{}", Ipv4Addr::from(dest.to_ne_bytes()), mask.count_ones()),
            route: Route {
                family: Family::V4,
                gateway: (!gateway.is_unspecified()).then_some(IpAddr::V4(gateway)),
                interface: iface.to_owned(),
                metric: metric.parse().unwrap_or(0),
            },
        });
    }
    routes
}

/// Default routes in `/proc/net/ipv6_route`. The kernel's catch-all `::/0` reject
/// route on `lo` is not a default route.
pub(crate) fn parse_proc_net_ipv6_route(text: &str) -> Vec<Route> {
    defaults_of(parse_proc_net_ipv6_route_table(text))
}

/// Every usable route in `/proc/net/ipv6_route` (columns: destination, prefix length,
/// source, source prefix length, next hop, metric, refcount, use, flags, interface; all
/// hex, addresses in network order): up and not a reject route.
pub(crate) fn parse_proc_net_ipv6_route_table(text: &str) -> Vec<TableRoute> {
    let mut routes = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [
            dest,
            dest_len,
            _src,
            _src_len,
            next_hop,
            metric,
            _refcnt,
            _use,
            flags,
            iface,
        ] = fields[..]
        else {
            continue;
        };
        let (Some(dest), Some(dest_len), Some(next_hop), Some(metric), Some(flags)) = (
            hex_ipv6(dest),
            hex_u32(dest_len),
            hex_ipv6(next_hop),
            hex_u32(metric),
            hex_u32(flags),
        ) else {
            continue;
        };
        if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 {
            continue;
        }
        routes.push(TableRoute {
            destination: format!("{dest}/{dest_len}"),
            route: Route {
                family: Family::V6,
                gateway: (!next_hop.is_unspecified()).then_some(IpAddr::V6(next_hop)),
                interface: iface.to_owned(),
                metric,
            },
        });
    }
    routes
}

/// A route of the table: where it leads, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableRoute {
    /// The destination prefix, `10.0.0.0/8` or `fe80::/64`.
    pub destination: String,
    pub route: Route,
}

impl TableRoute {
    pub(crate) fn is_default(&self) -> bool {
        matches!(self.destination.as_str(), "0.0.0.0/0" | "::/0")
    }
}

fn defaults_of(table: Vec<TableRoute>) -> Vec<Route> {
    table
        .into_iter()
        .filter(TableRoute::is_default)
        .map(|t| t.route)
        .collect()
}

/// `nameserver` lines of a resolv.conf, in order, each once. Zone suffixes
/// (`fe80::1%eth0`) are kept: they say which link the server is on.
pub(crate) fn parse_resolv_conf(text: &str) -> Vec<String> {
    let mut servers: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let mut words = line.split_whitespace();
        if words.next() != Some("nameserver") {
            continue;
        }
        let Some(server) = words.next() else { continue };
        let address = server.split('%').next().unwrap_or(server);
        if address.parse::<IpAddr>().is_ok() && !servers.iter().any(|s| s == server) {
            servers.push(server.to_owned());
        }
    }
    servers
}

/// Windows: the PowerShell commands and the parsers for their output. Nothing calls
/// them yet; `net_config` will, from an async context that can run PowerShell.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) mod windows {
    use serde_json::Value;
    use std::net::{IpAddr, Ipv6Addr};

    use super::{Family, Route, TableRoute};

    /// Lists IPv4 and IPv6 default routes as JSON.
    pub(crate) const ROUTES_SCRIPT: &str =
        "Get-NetRoute -DestinationPrefix '0.0.0.0/0','::/0' -ErrorAction SilentlyContinue | ConvertTo-Json -Depth 2";

    /// Lists every interface's DNS servers as JSON.
    pub(crate) const DNS_SCRIPT: &str =
        "Get-DnsClientServerAddress -ErrorAction SilentlyContinue | ConvertTo-Json -Depth 2";

    /// Default routes from `Get-NetRoute ... | ConvertTo-Json`: one object, or a list of
    /// them; nothing at all when there is no route.
    pub(crate) fn parse_routes(text: &str) -> Result<Vec<Route>, String> {
        let mut routes = super::defaults_of(parse_route_table(text)?);
        super::sort_routes(&mut routes);
        Ok(routes)
    }

    /// Every route in `Get-NetRoute | ConvertTo-Json`, in the order printed. The metric
    /// Windows uses to choose is the route's plus its interface's.
    pub(crate) fn parse_route_table(text: &str) -> Result<Vec<TableRoute>, String> {
        let mut routes = Vec::new();
        for item in json_items(text)? {
            let Some(prefix) = item["DestinationPrefix"].as_str() else {
                continue;
            };
            let family = if prefix.contains(':') { Family::V6 } else { Family::V4 };
            let Some(interface) = item["InterfaceAlias"].as_str() else {
                continue;
            };
            let gateway = item["NextHop"]
                .as_str()
                .and_then(|hop| hop.parse::<IpAddr>().ok())
                .filter(|hop| !hop.is_unspecified());
            let metric = [&item["RouteMetric"], &item["InterfaceMetric"]]
                .iter()
                .filter_map(|m| m.as_u64())
                .sum::<u64>();
            routes.push(TableRoute {
                destination: prefix.to_owned(),
                route: Route {
                    family,
                    gateway,
                    interface: interface.to_owned(),
                    metric: u32::try_from(metric).unwrap_or(u32::MAX),
                },
            });
        }
        Ok(routes)
    }

    /// DNS servers from `Get-DnsClientServerAddress | ConvertTo-Json`, across interfaces,
    /// each once. `fec0:0:0:ffff::1..3` are Windows' placeholders for "no IPv6 DNS
    /// configured", not servers.
    pub(crate) fn parse_dns(text: &str) -> Result<Vec<String>, String> {
        let mut servers: Vec<String> = Vec::new();
        for item in json_items(text)? {
            let Some(addresses) = item["ServerAddresses"].as_array() else {
                continue;
            };
            for address in addresses.iter().filter_map(Value::as_str) {
                let placeholder = address
                    .parse::<Ipv6Addr>()
                    .is_ok_and(|a| a.segments()[..4] == [0xfec0, 0, 0, 0xffff]);
                if !placeholder && address.parse::<IpAddr>().is_ok() && !servers.iter().any(|s| s == address) {
                    servers.push(address.to_owned());
                }
            }
        }
        Ok(servers)
    }

    /// ConvertTo-Json writes a lone object for one result and nothing for none.
    fn json_items(text: &str) -> Result<Vec<Value>, String> {
        Ok(crate::tools::psjson::rows(text)?
            .into_iter()
            .map(Value::Object)
            .collect())
    }
}

fn sort_routes(routes: &mut [Route]) {
    routes.sort_by_key(|r| (r.metric, r.family == Family::V6));
}

fn hex_u32(text: &str) -> Option<u32> {
    u32::from_str_radix(text, 16).ok()
}

fn hex_ipv6(text: &str) -> Option<Ipv6Addr> {
    if text.len() != 32 {
        return None;
    }
    u128::from_str_radix(text, 16).ok().map(Ipv6Addr::from)
}

/// These files are a few KiB; the cap only guards against a misbehaving filesystem.
fn read_small(path: impl AsRef<Path>) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(1024 * 1024)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(gateway: &str, interface: &str, metric: u32) -> Route {
        Route {
            family: Family::V4,
            gateway: Some(gateway.parse().unwrap()),
            interface: interface.into(),
            metric,
        }
    }

    fn v6(gateway: Option<&str>, interface: &str, metric: u32) -> Route {
        Route {
            family: Family::V6,
            gateway: gateway.map(|g| g.parse().unwrap()),
            interface: interface.into(),
            metric,
        }
    }

    // Recorded on a laptop with Wi-Fi and a docker bridge (little-endian x86_64).
    const PROC_ROUTE: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
wlp2s0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0
wlp2s0\t0001A8C0\t00000000\t0001\t0\t0\t600\t00FFFFFF\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
enp0s31f6\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0
tun0\t00000000\t00000000\t0001\t0\t0\t50\t00000000\t0\t0\t0
bad\t00000000\t0100000A\t0201\t0\t0\t1\t00000000\t0\t0\t0
down\t00000000\t0100000A\t0002\t0\t0\t1\t00000000\t0\t0\t0
garbage line
";

    #[test]
    fn ipv4_default_routes_come_from_proc_net_route() {
        let mut routes = parse_proc_net_route(PROC_ROUTE);
        sort_routes(&mut routes);
        assert_eq!(
            routes,
            [
                Route {
                    family: Family::V4,
                    gateway: None,
                    interface: "tun0".into(),
                    metric: 50
                },
                v4("10.0.0.1", "enp0s31f6", 100),
                v4("192.168.1.1", "wlp2s0", 600),
            ]
        );
        assert_eq!(
            routes[1].to_json(),
            json!({"family": "ipv4", "gateway": "10.0.0.1", "interface": "enp0s31f6", "metric": 100})
        );
        assert_eq!(routes[0].to_json()["gateway"], Value::Null);
        assert!(parse_proc_net_route("Iface\tDestination\n").is_empty());
    }

    // Recorded in a container: a routed default via fd00::1, the kernel's `lo` reject
    // route, and link-local and multicast routes that are not defaults.
    const PROC_IPV6_ROUTE: &str = "\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000003 00000000 00000003     eth0
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000003 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 00000064 00000001 00000000 00000001     wg0
";

    #[test]
    fn ipv6_default_routes_come_from_proc_net_ipv6_route() {
        assert_eq!(
            parse_proc_net_ipv6_route(PROC_IPV6_ROUTE),
            [v6(Some("fd00::1"), "eth0", 1024), v6(None, "wg0", 100)]
        );
        assert!(parse_proc_net_ipv6_route("").is_empty());
        assert!(parse_proc_net_ipv6_route("zz 00 short\n").is_empty());
    }

    #[test]
    fn resolv_conf_nameservers_in_order_once() {
        let text = "\
# This is /run/systemd/resolve/stub-resolv.conf managed by man:systemd-resolved(8).
; old-style comment nameserver 9.9.9.9
nameserver 192.168.1.1
nameserver\t2001:4860:4860::8888
  nameserver 1.1.1.1  # trailing words are ignored
nameserver 192.168.1.1
nameserver fe80::1%wlp2s0
nameserver not-an-address
nameserver
options edns0 trust-ad
search home.arpa
";
        assert_eq!(
            parse_resolv_conf(text),
            ["192.168.1.1", "2001:4860:4860::8888", "1.1.1.1", "fe80::1%wlp2s0"]
        );
        assert!(parse_resolv_conf("").is_empty());
    }

    #[test]
    fn the_systemd_resolved_stub_is_recognised() {
        let stub = parse_resolv_conf("nameserver 127.0.0.53\noptions edns0 trust-ad\n");
        assert!(is_resolved_stub(&stub));
        assert!(is_resolved_stub(&["127.0.0.54".to_owned()]));
        assert!(!is_resolved_stub(&["127.0.0.53".to_owned(), "1.1.1.1".to_owned()]));
        assert!(!is_resolved_stub(&[]));
    }

    // `Get-NetRoute -DestinationPrefix '0.0.0.0/0','::/0' | ConvertTo-Json -Depth 2` on
    // Windows 11 (PowerShell 5.1), trimmed of CIM bookkeeping properties.
    const WINDOWS_ROUTES: &str = r#"[
    {
        "Publish":  0,
        "Protocol":  3,
        "Store":  1,
        "AddressFamily":  2,
        "State":  1,
        "ifIndex":  12,
        "Caption":  null,
        "ElementName":  null,
        "AdminDistance":  null,
        "DestinationAddress":  null,
        "IsStatic":  null,
        "RouteMetric":  0,
        "TypeOfRoute":  3,
        "CompartmentId":  1,
        "DestinationPrefix":  "0.0.0.0/0",
        "InterfaceAlias":  "Wi-Fi",
        "InterfaceIndex":  12,
        "InterfaceMetric":  45,
        "NextHop":  "192.168.178.1",
        "PreferredLifetime":  "10675199.02:48:05.4775807",
        "ValidLifetime":  "10675199.02:48:05.4775807",
        "PSComputerName":  null
    },
    {
        "AddressFamily":  2,
        "ifIndex":  7,
        "RouteMetric":  0,
        "DestinationPrefix":  "0.0.0.0/0",
        "InterfaceAlias":  "Ethernet",
        "InterfaceIndex":  7,
        "InterfaceMetric":  25,
        "NextHop":  "10.0.0.1"
    },
    {
        "AddressFamily":  23,
        "ifIndex":  12,
        "RouteMetric":  256,
        "DestinationPrefix":  "::/0",
        "InterfaceAlias":  "Wi-Fi",
        "InterfaceIndex":  12,
        "InterfaceMetric":  45,
        "NextHop":  "fe80::3a10:d5ff:fe00:1"
    },
    {
        "DestinationPrefix":  "0.0.0.0/0",
        "InterfaceAlias":  "Tunnel",
        "RouteMetric":  5,
        "NextHop":  "0.0.0.0"
    }
]"#;

    #[test]
    fn windows_default_routes_from_get_netroute_json() {
        let routes = windows::parse_routes(WINDOWS_ROUTES).unwrap();
        assert_eq!(
            routes,
            [
                Route {
                    family: Family::V4,
                    gateway: None,
                    interface: "Tunnel".into(),
                    metric: 5
                },
                v4("10.0.0.1", "Ethernet", 25),
                v4("192.168.178.1", "Wi-Fi", 45),
                v6(Some("fe80::3a10:d5ff:fe00:1"), "Wi-Fi", 301),
            ]
        );
        // One route is a lone object; no route is no output at all.
        let single = r#"{"DestinationPrefix": "0.0.0.0/0", "InterfaceAlias": "Ethernet", "NextHop": "10.0.0.1", "RouteMetric": 0, "InterfaceMetric": 25}"#;
        assert_eq!(windows::parse_routes(single).unwrap(), [v4("10.0.0.1", "Ethernet", 25)]);
        assert_eq!(windows::parse_routes("\u{feff}\r\n").unwrap(), []);
        assert!(windows::parse_routes("Get-NetRoute : access denied").is_err());
        assert!(windows::parse_routes("42").is_err());
    }

    // `Get-DnsClientServerAddress | ConvertTo-Json -Depth 2`, trimmed of CIM bookkeeping.
    const WINDOWS_DNS: &str = r#"[
    {
        "InterfaceAlias":  "Wi-Fi",
        "InterfaceIndex":  12,
        "AddressFamily":  2,
        "ServerAddresses":  ["192.168.178.1", "1.1.1.1"],
        "Address":  ["192.168.178.1", "1.1.1.1"],
        "ElementName":  "Wi-Fi"
    },
    {
        "InterfaceAlias":  "Wi-Fi",
        "InterfaceIndex":  12,
        "AddressFamily":  23,
        "ServerAddresses":  ["fd00::3a10:d5ff:fe00:1", "fec0:0:0:ffff::1"]
    },
    {
        "InterfaceAlias":  "Ethernet",
        "InterfaceIndex":  7,
        "AddressFamily":  2,
        "ServerAddresses":  ["1.1.1.1"]
    },
    {
        "InterfaceAlias":  "Ethernet",
        "InterfaceIndex":  7,
        "AddressFamily":  23,
        "ServerAddresses":  ["fec0:0:0:ffff::1", "fec0:0:0:ffff::2", "fec0:0:0:ffff::3"]
    },
    {
        "InterfaceAlias":  "Loopback Pseudo-Interface 1",
        "InterfaceIndex":  1,
        "AddressFamily":  2,
        "ServerAddresses":  []
    }
]"#;

    #[test]
    fn windows_dns_servers_from_get_dnsclientserveraddress_json() {
        assert_eq!(
            windows::parse_dns(WINDOWS_DNS).unwrap(),
            ["192.168.178.1", "1.1.1.1", "fd00::3a10:d5ff:fe00:1"]
        );
        let single = r#"{"InterfaceAlias": "Ethernet", "ServerAddresses": ["10.0.0.53"]}"#;
        assert_eq!(windows::parse_dns(single).unwrap(), ["10.0.0.53"]);
        assert_eq!(windows::parse_dns("").unwrap(), Vec::<String>::new());
        assert!(windows::parse_dns("{").is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_machine_has_readable_route_and_dns_tables() {
        // Whatever the routes are, reading them never fails and agrees with the files.
        let routes = default_routes();
        let v4 = parse_proc_net_route(&read_small("/proc/net/route").unwrap_or_default());
        assert_eq!(routes.iter().filter(|r| r.family == Family::V4).count(), v4.len());
        let servers = dns_servers();
        assert!(
            servers
                .iter()
                .all(|s| s.split('%').next().unwrap().parse::<IpAddr>().is_ok())
        );
    }
}
