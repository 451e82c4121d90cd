//! Network configuration: the hostname, every interface with its addresses, MAC and
//! traffic counters, the default gateways and the DNS servers.

use std::time::Duration;

use serde_json::{Value, json};
use sysinfo::{NetworkData, Networks, System};

use super::bounded::blocking;
use super::netinfo;
use super::shell::powershell_output;
use super::{ToolError, ToolResult};

const BACKSTOP: Duration = Duration::from_secs(30);

pub(super) async fn config() -> ToolResult {
    let mut result = blocking("net_config", BACKSTOP, snapshot)
        .await?
        .map_err(ToolError::exec_failed)?;
    let (routes, dns_servers) = if cfg!(windows) {
        windows_routes_and_dns().await?
    } else {
        blocking("net_config", BACKSTOP, || {
            (netinfo::default_routes(), netinfo::dns_servers())
        })
        .await?
    };
    result["default_gateway"] = json!(routes.iter().find_map(|r| r.gateway.map(|g| g.to_string())));
    result["default_routes"] = routes.iter().map(netinfo::Route::to_json).collect();
    result["dns_servers"] = json!(dns_servers);
    Ok(result)
}

async fn windows_routes_and_dns() -> Result<(Vec<netinfo::Route>, Vec<String>), ToolError> {
    let routes = powershell_output(netinfo::windows::ROUTES_SCRIPT, BACKSTOP).await?;
    let dns = powershell_output(netinfo::windows::DNS_SCRIPT, BACKSTOP).await?;
    let routes = netinfo::windows::parse_routes(&routes.stdout).map_err(ToolError::exec_failed)?;
    let dns = netinfo::windows::parse_dns(&dns.stdout).map_err(ToolError::exec_failed)?;
    Ok((routes, dns))
}

fn snapshot() -> Result<Value, String> {
    let networks = Networks::new_with_refreshed_list().map_err(|e| format!("cannot list network interfaces: {e}"))?;
    let mut interfaces: Vec<(String, &NetworkData)> = networks
        .iter()
        .map(|(name, data)| (name.to_string_lossy().into_owned(), data))
        .collect();
    interfaces.sort_by(|a, b| a.0.cmp(&b.0));
    let interfaces: Vec<Value> = interfaces
        .into_iter()
        .map(|(name, data)| interface_json(name, data))
        .collect();
    Ok(json!({
        "hostname": System::host_name().ok(),
        "interfaces": interfaces,
    }))
}

fn interface_json(name: String, data: &NetworkData) -> Value {
    let mac = data.mac_address();
    // All zeros means "none" (loopback, tunnels), not a real address.
    let mac = (!mac.is_unspecified()).then(|| mac.to_string());
    let mut addresses: Vec<_> = data.ip_networks().to_vec();
    addresses.sort();
    let addresses: Vec<String> = addresses.iter().map(ToString::to_string).collect();
    json!({
        "name": name,
        "mac": mac,
        "addresses": addresses,
        "state": data.operational_state().to_string(),
        "mtu": data.mtu(),
        "rx_bytes": data.total_received(),
        "tx_bytes": data.total_transmitted(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lists_interfaces_sorted_by_name() {
        let out = config().await.unwrap();
        assert!(out["hostname"].is_string() || out["hostname"].is_null());
        assert!(
            out["dns_servers"].is_array() && out["default_routes"].is_array(),
            "{out}"
        );
        let first_gateway = out["default_routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| !r["gateway"].is_null());
        assert_eq!(
            out["default_gateway"],
            first_gateway.map_or(Value::Null, |r| r["gateway"].clone())
        );
        let interfaces = out["interfaces"].as_array().unwrap();
        let names: Vec<&str> = interfaces.iter().map(|i| i["name"].as_str().unwrap()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        for interface in interfaces {
            assert!(
                interface["rx_bytes"].is_u64() && interface["tx_bytes"].is_u64(),
                "{interface}"
            );
            for address in interface["addresses"].as_array().unwrap() {
                let text = address.as_str().unwrap();
                let (ip, prefix) = text.split_once('/').expect("address/prefix");
                assert!(ip.parse::<std::net::IpAddr>().is_ok(), "{text}");
                assert!(prefix.parse::<u8>().is_ok_and(|p| p <= 128), "{text}");
            }
            if let Some(mac) = interface["mac"].as_str() {
                assert_eq!(mac.len(), 17, "{mac}");
            }
        }
        #[cfg(target_os = "linux")]
        {
            let lo = interfaces.iter().find(|i| i["name"] == "lo");
            if let Some(lo) = lo {
                assert_eq!(lo["mac"], Value::Null);
            }
        }
    }
}
