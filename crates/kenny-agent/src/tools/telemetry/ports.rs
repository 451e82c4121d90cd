//! The listening_ports section: TCP sockets in LISTEN and unconnected UDP sockets, with the process holding each.
//!
//! From `/proc/net/{tcp,tcp6,udp,udp6}`; the owner is found by matching the socket's
//! inode against `/proc/<pid>/fd/*` links (`socket:[inode]`). That walk is bounded in
//! processes, descriptors and time; sockets it did not reach have `pid: null`.
//!
//! On Windows the NetTCPIP cmdlets are asked instead: see [`win`].

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::files::{read_small, read_text};
use super::{Outcome, Status, not_collected_here, section};

mod win;

const TCP_LISTEN: u8 = 0x0A;
/// What an unconnected UDP socket reports.
const UDP_UNCONNECTED: u8 = 0x07;
const PROC_NET_CAP: u64 = 16 * 1024 * 1024;
const MAX_LISTED: usize = 200;
const MAX_PROCESSES: usize = 10_000;
const MAX_FDS: usize = 200_000;
const OWNER_SEARCH_TIME: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Socket {
    proto: Proto,
    address: IpAddr,
    port: u16,
    inode: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    pid: u32,
    process: String,
}

pub(super) fn listening_ports_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    let mut sockets = Vec::new();
    let mut read_any = false;
    for (file, proto) in [
        ("tcp", Proto::Tcp),
        ("tcp6", Proto::Tcp),
        ("udp", Proto::Udp),
        ("udp6", Proto::Udp),
    ] {
        // tcp6/udp6 are absent when IPv6 is disabled.
        if let Ok((text, _)) = read_text(&Path::new("/proc/net").join(file), PROC_NET_CAP) {
            read_any = true;
            sockets.extend(parse_proc_net(&text, proto));
        }
    }
    if !read_any {
        return Err("cannot read /proc/net/tcp or udp".to_owned());
    }
    let wanted: HashSet<u64> = sockets.iter().map(|s| s.inode).filter(|i| *i != 0).collect();
    let owners = socket_owners(Path::new("/proc"), &wanted, OWNER_SEARCH_TIME);
    Ok(build(sockets, &owners))
}

/// Listening sockets in one `/proc/net/{tcp,udp}[6]` table. Columns: slot,
/// local `ADDR:PORT`, remote `ADDR:PORT`, state, queues, timers, retransmits, uid,
/// timeout, inode, ...; all hex except uid, timeout and inode.
fn parse_proc_net(text: &str, proto: Proto) -> Vec<Socket> {
    let mut sockets = Vec::new();
    for line in text.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [
            _slot,
            local,
            remote,
            state,
            _queues,
            _timers,
            _retrans,
            _uid,
            _timeout,
            inode,
            ..,
        ] = fields[..]
        else {
            continue;
        };
        let (Some((address, port)), Some((_, remote_port)), Ok(state), Ok(inode)) = (
            endpoint(local),
            endpoint(remote),
            u8::from_str_radix(state, 16),
            inode.parse::<u64>(),
        ) else {
            continue;
        };
        let listening = match proto {
            Proto::Tcp => state == TCP_LISTEN,
            Proto::Udp => state == UDP_UNCONNECTED && remote_port == 0,
        };
        if listening && port != 0 {
            sockets.push(Socket {
                proto,
                address,
                port,
                inode,
            });
        }
    }
    sockets
}

/// `0100007F:1F90` (IPv4) or 32 hex digits `:PORT` (IPv6). The kernel prints each
/// 32-bit word of the address as a host-order integer, hence `to_ne_bytes`; the port
/// is a plain number.
fn endpoint(text: &str) -> Option<(IpAddr, u16)> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let address = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(u32::from_str_radix(addr, 16).ok()?.to_ne_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                let word = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some((address, port))
}

/// Which process holds each wanted socket inode, by walking `<proc>/<pid>/fd`. Stops
/// when every inode is found or a bound is reached. Processes of other users need
/// root (as the agent normally runs); unreadable ones are skipped.
fn socket_owners(proc_root: &Path, wanted: &HashSet<u64>, budget: Duration) -> HashMap<u64, Owner> {
    let started = Instant::now();
    let mut owners = HashMap::new();
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return owners;
    };
    let mut fds_seen = 0usize;
    let pids = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .take(MAX_PROCESSES);
    for pid in pids {
        if owners.len() == wanted.len() || fds_seen >= MAX_FDS || started.elapsed() > budget {
            break;
        }
        let dir = proc_root.join(pid.to_string());
        let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            fds_seen += 1;
            if fds_seen >= MAX_FDS {
                break;
            }
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(inode) = socket_inode(&target.to_string_lossy()) else {
                continue;
            };
            if wanted.contains(&inode) && !owners.contains_key(&inode) {
                let process = super::format::clip(&read_small(&dir.join("comm")).unwrap_or_default(), 64);
                owners.insert(inode, Owner { pid, process });
            }
        }
    }
    owners
}

fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

fn build(mut sockets: Vec<Socket>, owners: &HashMap<u64, Owner>) -> super::Section {
    sockets.sort_by_key(|s| (s.proto, s.port, s.address));
    // SO_REUSEPORT listeners show once per socket; one line per owner is enough.
    sockets.dedup_by(|b, a| {
        (a.proto, a.port, a.address) == (b.proto, b.port, b.address)
            && owners.get(&a.inode).map(|o| o.pid) == owners.get(&b.inode).map(|o| o.pid)
    });
    let count = sockets.len();
    let tcp = sockets.iter().filter(|s| s.proto == Proto::Tcp).count();
    let listed: Vec<Value> = sockets
        .iter()
        .take(MAX_LISTED)
        .map(|s| {
            let owner = owners.get(&s.inode);
            json!({
                "proto": s.proto.as_str(),
                "port": s.port,
                "address": s.address.to_string(),
                "pid": owner.map(|o| o.pid),
                "process": owner.map(|o| o.process.as_str()),
            })
        })
        .collect();
    section(
        Status::Ok,
        format!("{count} listening ports ({tcp} tcp, {} udp)", count - tcp),
        json!({ "ports": listed, "count": count, "truncated": count > MAX_LISTED }),
    )
}

pub(super) fn windows_query() -> Option<&'static super::windows::Query> {
    Some(&win::QUERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded on a little-endian host: sshd on 0.0.0.0:22, a service on
    // 127.0.0.1:8080, an established connection, a TIME_WAIT one.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21371 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 48211 1 0000000000000000 100 0 0 10 0
   2: 1400A8C0:0016 0A00A8C0:D431 01 00000000:00000000 02:0009F6C7 00000000     0        0 51234 4 0000000000000000 20 4 31 10 20
   3: 0100007F:A1B2 0100007F:1F90 06 00000000:00000000 03:00001374 00000000     0        0 0 3 0000000000000000
";

    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21373 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0277 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 30001 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 30002 1 0000000000000000 100 0 0 10 0
";

    // avahi on 0.0.0.0:5353, a connected DNS client socket (not listening), and
    // systemd-resolved's stub on 127.0.0.53:53.
    const UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  421: 00000000:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000   108        0 19876 2 0000000000000000 0
  900: 1400A8C0:C3F2 0101A8C0:0035 01 00000000:00000000 00:00000000 00000000   101        0 61234 2 0000000000000000 0
 1100: 3500007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   101        0 17001 2 0000000000000000 0
";

    #[test]
    fn tcp_listeners_are_read_with_addresses_decoded() {
        let tcp = parse_proc_net(TCP, Proto::Tcp);
        assert_eq!(
            tcp,
            [
                Socket {
                    proto: Proto::Tcp,
                    address: "0.0.0.0".parse().unwrap(),
                    port: 22,
                    inode: 21371
                },
                Socket {
                    proto: Proto::Tcp,
                    address: "127.0.0.1".parse().unwrap(),
                    port: 8080,
                    inode: 48211
                },
            ]
        );
        let tcp6: Vec<(String, u16)> = parse_proc_net(TCP6, Proto::Tcp)
            .iter()
            .map(|s| (s.address.to_string(), s.port))
            .collect();
        assert_eq!(
            tcp6,
            [
                ("::".to_owned(), 22),
                ("::1".to_owned(), 631),
                ("::ffff:127.0.0.1".to_owned(), 8081)
            ]
        );
    }

    #[test]
    fn udp_counts_only_unconnected_sockets() {
        let udp: Vec<(String, u16, u64)> = parse_proc_net(UDP, Proto::Udp)
            .iter()
            .map(|s| (s.address.to_string(), s.port, s.inode))
            .collect();
        assert_eq!(
            udp,
            [
                ("0.0.0.0".to_owned(), 5353, 19876),
                ("127.0.0.53".to_owned(), 53, 17001)
            ]
        );
        assert!(parse_proc_net("header only\n", Proto::Udp).is_empty());
        assert!(parse_proc_net("h\n 0: zz:zz 00000000:0000 0A 0 0 0 0 0 1\n", Proto::Tcp).is_empty());
    }

    #[test]
    fn socket_links_name_their_inode() {
        assert_eq!(socket_inode("socket:[21371]"), Some(21371));
        assert_eq!(socket_inode("pipe:[21371]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
    }

    #[test]
    fn owners_sorting_dedup_and_bounds() {
        let mut sockets = parse_proc_net(TCP, Proto::Tcp);
        sockets.extend(parse_proc_net(UDP, Proto::Udp));
        // A second SO_REUSEPORT socket of the same sshd.
        sockets.push(Socket {
            inode: 21372,
            ..sockets[0].clone()
        });
        let sshd = Owner {
            pid: 612,
            process: "sshd".into(),
        };
        let owners = HashMap::from([(21371, sshd.clone()), (21372, sshd)]);
        let section = build(sockets, &owners);
        assert_eq!(section["count"], 4);
        assert_eq!(section["summary"], "4 listening ports (2 tcp, 2 udp)");
        assert_eq!(
            section["ports"][0],
            json!({"proto": "tcp", "port": 22, "address": "0.0.0.0", "pid": 612, "process": "sshd"})
        );
        assert_eq!(section["ports"][1]["pid"], Value::Null);
        assert_eq!(section["ports"][2]["port"], 53);
        assert_eq!(section["truncated"], false);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn finds_a_socket_this_test_listens_on_and_its_owner() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let section = listening_ports_section().unwrap();
        let ports = section["ports"].as_array().unwrap();
        let mine = ports
            .iter()
            .find(|p| p["port"] == port && p["proto"] == "tcp")
            .unwrap_or_else(|| panic!("port {port} not in {section:?}"));
        assert_eq!(mine["address"], "127.0.0.1");
        assert_eq!(mine["pid"], std::process::id());
    }
}
