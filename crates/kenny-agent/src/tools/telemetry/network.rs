//! The network section: interfaces that are up with their addresses, default routes and DNS servers.

use serde_json::{Value, json};
use sysinfo::{InterfaceOperationalState, Networks};

use super::{Outcome, Status, section};
use crate::tools::netinfo::{self, Route};

/// An interface as the section lists it.
#[derive(Debug, Clone, PartialEq)]
struct Interface {
    name: String,
    mac: Option<String>,
    addresses: Vec<String>,
    state: String,
}

pub(super) fn network_section() -> Outcome {
    let networks = Networks::new_with_refreshed_list().map_err(|e| format!("cannot list network interfaces: {e}"))?;
    let mut interfaces: Vec<Interface> = networks
        .iter()
        .filter(|(_, data)| can_pass_traffic(data.operational_state()))
        .map(|(name, data)| {
            let mac = data.mac_address();
            let mut addresses: Vec<_> = data.ip_networks().to_vec();
            addresses.sort();
            Interface {
                name: name.to_string_lossy().into_owned(),
                // All zeros means "none" (loopback, tunnels), not a real address.
                mac: (!mac.is_unspecified()).then(|| mac.to_string()),
                addresses: addresses.iter().map(ToString::to_string).collect(),
                state: data.operational_state().to_string(),
            }
        })
        .filter(|i| !i.addresses.is_empty() && !is_loopback(i))
        .collect();
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(build(interfaces, netinfo::default_routes(), netinfo::dns_servers()))
}

/// "Unknown" counts as up: virtual NICs (containers, some VPNs) pass traffic in it.
fn can_pass_traffic(state: InterfaceOperationalState) -> bool {
    use InterfaceOperationalState::{Dormant, Down, LowerLayerDown, NotPresent, Testing};
    !matches!(state, Down | LowerLayerDown | NotPresent | Testing | Dormant)
}

fn is_loopback(interface: &Interface) -> bool {
    interface.addresses.iter().all(|a| {
        a.split('/')
            .next()
            .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
            .is_some_and(|ip| ip.is_loopback())
    })
}

/// Judged on what a PC needs to reach the internet by name: a default route and at
/// least one DNS server. Without either, "the internet is down" for its user.
fn build(interfaces: Vec<Interface>, routes: Vec<Route>, dns: Vec<String>) -> super::Section {
    let (status, summary) = match (routes.first(), dns.is_empty()) {
        (None, _) => (
            Status::Warn,
            "no default route: this PC cannot reach other networks".to_owned(),
        ),
        (Some(_), true) => (
            Status::Warn,
            format!("{}; no DNS servers configured", route_text(&routes[0])),
        ),
        (Some(route), false) => (Status::Ok, format!("{}; DNS {}", route_text(route), dns.join(", "))),
    };
    let listed: Vec<Value> = interfaces
        .into_iter()
        .map(|i| json!({"name": i.name, "mac": i.mac, "addresses": i.addresses, "state": i.state}))
        .collect();
    let routes: Vec<Value> = routes.iter().map(Route::to_json).collect();
    section(
        status,
        summary,
        json!({ "interfaces": listed, "default_routes": routes, "dns_servers": dns }),
    )
}

fn route_text(route: &Route) -> String {
    match route.gateway {
        Some(gateway) => format!("default via {gateway} on {}", route.interface),
        None => format!("default on {}", route.interface),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::netinfo::Family;

    fn interface(name: &str, addresses: &[&str]) -> Interface {
        Interface {
            name: name.into(),
            mac: None,
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
            state: "up".into(),
        }
    }

    fn route() -> Route {
        Route {
            family: Family::V4,
            gateway: Some("192.168.1.1".parse().unwrap()),
            interface: "eth0".into(),
            metric: 100,
        }
    }

    #[test]
    fn warns_without_a_default_route_or_dns() {
        let ok = build(
            vec![interface("eth0", &["192.168.1.20/24"])],
            vec![route()],
            vec!["1.1.1.1".into()],
        );
        assert_eq!(ok["status"], "ok");
        assert_eq!(ok["summary"], "default via 192.168.1.1 on eth0; DNS 1.1.1.1");
        assert_eq!(ok["default_routes"][0]["gateway"], "192.168.1.1");
        assert_eq!(ok["interfaces"][0]["addresses"], json!(["192.168.1.20/24"]));

        let no_route = build(vec![], vec![], vec!["1.1.1.1".into()]);
        assert_eq!(no_route["status"], "warn");
        assert!(no_route["summary"].as_str().unwrap().starts_with("no default route"));

        let no_dns = build(vec![], vec![route()], vec![]);
        assert_eq!(no_dns["status"], "warn");
        assert_eq!(
            no_dns["summary"],
            "default via 192.168.1.1 on eth0; no DNS servers configured"
        );
    }

    #[test]
    fn loopback_interfaces_are_left_out() {
        assert!(is_loopback(&interface("lo", &["127.0.0.1/8", "::1/128"])));
        assert!(!is_loopback(&interface("eth0", &["127.0.0.1/8", "10.0.0.2/8"])));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_machine() {
        let section = network_section().unwrap();
        let routes = section["default_routes"].as_array().unwrap();
        assert_eq!(
            section["status"] == "ok",
            !routes.is_empty() && !section["dns_servers"].as_array().unwrap().is_empty()
        );
        for i in section["interfaces"].as_array().unwrap() {
            assert_ne!(i["name"], "lo");
        }
    }
}
