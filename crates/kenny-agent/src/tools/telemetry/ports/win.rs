//! The listening_ports section on Windows: `Get-NetTCPConnection -State Listen` and `Get-NetUDPEndpoint`, with each owner's process name.
//!
//! Both cmdlets report the owning process id; the script adds the names with one
//! `Get-Process` for those ids, and the services hosted in each (`Win32_Service`), since
//! "svchost" alone does not say whether port 3389 is Remote Desktop. A process that
//! ended in between keeps its id and no name. Either cmdlet answers "No MSFT_Net... objects found" (ObjectNotFound) when
//! there is nothing to list, which is an empty list, not a failure.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::super::command::Output;
use super::super::format::clip;
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Section};
use super::{Owner, Proto, Socket, build};
use crate::tools::psjson;

/// Services named per process; one svchost may host dozens.
const MAX_SERVICES: usize = 10;

pub(in super::super) static QUERY: Query = Query {
    script: SCRIPT,
    limit: Duration::from_secs(10),
    parse,
};

const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$tcp = @()
try {
  $tcp = @(Get-NetTCPConnection -State Listen | Select-Object LocalAddress, LocalPort, OwningProcess)
} catch {
  if ($_.CategoryInfo.Category -ne 'ObjectNotFound') { throw }
}
$udp = @()
try {
  $udp = @(Get-NetUDPEndpoint | Select-Object LocalAddress, LocalPort, OwningProcess)
} catch {
  if ($_.CategoryInfo.Category -ne 'ObjectNotFound') { throw }
}
$ids = @(@($tcp) + @($udp) | ForEach-Object { [int]$_.OwningProcess } | Sort-Object -Unique)
$processes = @()
if ($ids.Count) {
  $processes = @(Get-Process -Id $ids -ErrorAction SilentlyContinue | Select-Object Id, ProcessName)
}
$services = @()
try {
  $services = @(Get-CimInstance -ClassName Win32_Service -Filter 'ProcessId <> 0' | Where-Object { $ids -contains [int]$_.ProcessId } | Select-Object Name, ProcessId)
} catch { }
[pscustomobject]@{ Tcp = $tcp; Udp = $udp; Processes = $processes; Services = $services } | ConvertTo-Json -Compress -Depth 3
"#;

fn parse(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Value::Object(root) = value else {
        return Err(format!(
            "the listening-ports query printed {value} instead of an object"
        ));
    };
    let list = |key: &str| psjson::rows_of(root.get(key).cloned().unwrap_or(Value::Null));
    let names: HashMap<u32, String> = list("Processes")?
        .iter()
        .filter_map(|p| {
            let pid = u32::try_from(psjson::number(p, "Id")?).ok()?;
            Some((pid, clip(&psjson::text(p, "ProcessName")?, 100)))
        })
        .collect();
    let mut sockets = Vec::new();
    let mut owners = HashMap::new();
    for (proto, rows) in [(Proto::Tcp, list("Tcp")?), (Proto::Udp, list("Udp")?)] {
        for row in &rows {
            let Some((socket, pid)) = endpoint(row, proto, sockets.len() as u64 + 1) else {
                continue;
            };
            if let Some(pid) = pid {
                owners.insert(
                    socket.inode,
                    Owner {
                        pid,
                        process: names.get(&pid).cloned().unwrap_or_default(),
                    },
                );
            }
            sockets.push(socket);
        }
    }
    let services = services_by_process(&list("Services")?);
    Ok(with_services(with_unnamed_as_null(build(sockets, &owners)), &services))
}

/// Service names per process id, sorted, at most `MAX_SERVICES` each.
fn services_by_process(rows: &[Map<String, Value>]) -> HashMap<u32, Vec<String>> {
    let mut by_pid: HashMap<u32, Vec<String>> = HashMap::new();
    for row in rows {
        let (Some(pid), Some(name)) = (
            psjson::number(row, "ProcessId").and_then(|p| u32::try_from(p).ok()),
            psjson::text(row, "Name"),
        ) else {
            continue;
        };
        by_pid.entry(pid).or_default().push(clip(&name, 100));
    }
    for names in by_pid.values_mut() {
        names.sort_by_key(|n| n.to_lowercase());
        names.truncate(MAX_SERVICES);
    }
    by_pid
}

/// Adds `services` (Windows only) to each port whose process hosts services.
fn with_services(mut section: Section, services: &HashMap<u32, Vec<String>>) -> Section {
    if let Some(Value::Array(ports)) = section.get_mut("ports") {
        for port in ports {
            let hosted = port["pid"]
                .as_u64()
                .and_then(|pid| u32::try_from(pid).ok())
                .and_then(|pid| services.get(&pid));
            if let (Some(names), Value::Object(port)) = (hosted, port) {
                port.insert("services".into(), names.clone().into());
            }
        }
    }
    section
}

/// One row of either cmdlet. `key` stands in for Linux's socket inode: it ties the
/// socket to its owner.
fn endpoint(row: &Map<String, Value>, proto: Proto, key: u64) -> Option<(Socket, Option<u32>)> {
    let text = psjson::text(row, "LocalAddress")?;
    // Link-local IPv6 addresses may carry a zone (`fe80::1%12`).
    let address: IpAddr = text.split('%').next()?.trim().parse().ok()?;
    let port = u16::try_from(psjson::number(row, "LocalPort")?).ok()?;
    if port == 0 {
        return None;
    }
    let pid = psjson::number(row, "OwningProcess").and_then(|p| u32::try_from(p).ok());
    Some((
        Socket {
            proto,
            address,
            port,
            inode: key,
        },
        pid,
    ))
}

/// A process that ended between the socket listing and Get-Process has an id and no
/// name: `process: null`, as on Linux when the owner is not known.
fn with_unnamed_as_null(mut section: Section) -> Section {
    if let Some(Value::Array(ports)) = section.get_mut("ports") {
        for port in ports {
            if port["process"] == "" {
                port["process"] = Value::Null;
            }
        }
    }
    section
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_query_lists_tcp_listeners_udp_endpoints_and_their_processes() {
        let query = super::super::windows_query().expect("listening_ports has a Windows query");
        assert!(std::ptr::eq(query, &QUERY));
        for needle in [
            "Get-NetTCPConnection -State Listen",
            "Get-NetUDPEndpoint",
            "OwningProcess",
            "Get-Process -Id $ids",
            "Get-CimInstance -ClassName Win32_Service",
            "'ObjectNotFound'",
        ] {
            assert!(SCRIPT.contains(needle), "the script lacks {needle}");
        }
    }

    #[test]
    fn a_shared_svchost_names_its_first_services_only() {
        let rows: Vec<Value> = (0..15)
            .rev()
            .map(|i| json!({"Name": format!("Svc{i:02}"), "ProcessId": 1204}))
            .chain([json!({"Name": "Spooler", "ProcessId": 3124}), json!({"Name": "NoPid"})])
            .collect();
        let by_pid = services_by_process(&psjson::rows_of(Value::Array(rows)).unwrap());
        assert_eq!(by_pid[&1204].len(), MAX_SERVICES);
        assert_eq!(by_pid[&1204][0], "Svc00");
        assert_eq!(by_pid[&3124], ["Spooler"]);
        assert_eq!(by_pid.len(), 2);
    }

    #[test]
    fn endpoints_with_zones_odd_ports_and_no_owner() {
        let row = |v: Value| psjson::rows_of(v).unwrap().remove(0);
        let (socket, pid) = endpoint(
            &row(json!({"LocalAddress": "fe80::9d2c:1b4e:53a1:7c2f%12", "LocalPort": 5353, "OwningProcess": 2480})),
            Proto::Udp,
            7,
        )
        .unwrap();
        assert_eq!(socket.address.to_string(), "fe80::9d2c:1b4e:53a1:7c2f");
        assert_eq!((socket.port, socket.inode, pid), (5353, 7, Some(2480)));
        assert!(
            endpoint(
                &row(json!({"LocalAddress": "0.0.0.0", "LocalPort": 0, "OwningProcess": 4})),
                Proto::Tcp,
                1
            )
            .is_none()
        );
        assert!(
            endpoint(
                &row(json!({"LocalAddress": "not an address", "LocalPort": 80})),
                Proto::Tcp,
                1
            )
            .is_none()
        );
        let (_, none) = endpoint(&row(json!({"LocalAddress": "::", "LocalPort": 80})), Proto::Tcp, 1).unwrap();
        assert_eq!(none, None);
    }
}
