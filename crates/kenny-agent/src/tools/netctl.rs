//! Changing network state: flushing the DNS cache and resetting one adapter.

use std::path::Path;
use std::time::Duration;

use kenny_proto::args::NetAdapterResetArgs;
use serde_json::{Value, json};

use super::process::{ProgramOutput, run_program};
use super::shell::{powershell_literal, powershell_output};
use super::{ToolError, ToolResult};

const COMMAND_TIME: Duration = Duration::from_secs(20);
/// Long enough for DHCP clients and link watchers to see the link go down.
const DOWN_TIME: Duration = Duration::from_secs(1);
pub(super) async fn dns_flush() -> ToolResult {
    if cfg!(windows) {
        powershell_output("Clear-DnsClientCache -ErrorAction Stop", COMMAND_TIME)
            .await
            .and_then(|out| checked("Clear-DnsClientCache", out))?;
        return Ok(json!({"flushed": true, "cache": "windows-dns-client"}));
    }
    match linux_dns_cache() {
        Some(LinuxCache::Resolved) => {
            checked(
                "resolvectl",
                run_program("resolvectl", &["flush-caches"], COMMAND_TIME).await?,
            )?;
            Ok(json!({"flushed": true, "cache": "systemd-resolved"}))
        }
        Some(LinuxCache::Nscd) => {
            checked(
                "nscd",
                run_program("nscd", &["--invalidate=hosts"], COMMAND_TIME).await?,
            )?;
            Ok(json!({"flushed": true, "cache": "nscd"}))
        }
        None => Ok(json!({
            "flushed": false,
            "cache": null,
            "note": "this PC keeps no local DNS cache (neither systemd-resolved nor nscd runs): every lookup already goes to the DNS servers, so there is nothing to flush; a browser's own cache is cleared by restarting the browser",
        })),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum LinuxCache {
    Resolved,
    Nscd,
}

fn linux_dns_cache() -> Option<LinuxCache> {
    if Path::new("/run/systemd/resolve/io.systemd.Resolve").exists() {
        Some(LinuxCache::Resolved)
    } else if Path::new("/run/nscd/socket").exists() || Path::new("/var/run/nscd/socket").exists() {
        Some(LinuxCache::Nscd)
    } else {
        None
    }
}

pub(super) async fn adapter_reset(args: NetAdapterResetArgs, ctx: &crate::tools::ToolContext) -> ToolResult {
    let adapter = adapter_arg(&args.adapter)?;
    if cfg!(windows) {
        let out = powershell_output(&windows_reset_script(adapter), Duration::from_secs(45)).await?;
        return windows_reset_result(adapter, out);
    }
    let ip = Ip {
        netns: ctx.netns.as_deref(),
    };
    let before = ip.link(adapter).await?;
    if before.loopback {
        return Err(ToolError::bad_args(format!(
            "{adapter} is the loopback interface; resetting it would only cut this PC off from itself"
        )));
    }
    ip.set(adapter, "down").await?;
    tokio::time::sleep(DOWN_TIME).await;
    ip.set(adapter, "up").await?;
    let after = ip.link(adapter).await?;
    Ok(json!({
        "adapter": adapter,
        "reset": true,
        "was_up": before.up,
        "is_up": after.up,
        "state_before": before.operstate,
        "state_after": after.operstate,
        "method": "ip link",
    }))
}

/// Interface names as the kernel allows them (≤ 15 bytes, no `/` or spaces) on Linux;
/// Windows names ("Wi-Fi 2") may have spaces, so only control characters are refused
/// there, and wildcards everywhere: `Restart-NetAdapter -Name '*'` would restart them all.
fn adapter_arg(name: &str) -> Result<&str, ToolError> {
    let linux_ok = |n: &str| {
        n.len() <= 15 && !n.starts_with('-') && n.chars().all(|c| c.is_ascii_graphic() && c != '/' && c != ':')
    };
    let ok = !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_control() || matches!(c, '*' | '?' | '[' | ']'))
        && (cfg!(windows) || linux_ok(name));
    if ok {
        Ok(name)
    } else {
        Err(ToolError::bad_args(format!(
            "{name:?} is not a network adapter name; use a name net_config lists"
        )))
    }
}

struct Ip<'a> {
    netns: Option<&'a str>,
}

#[derive(Debug, PartialEq, Eq)]
struct LinkState {
    up: bool,
    loopback: bool,
    operstate: String,
}

impl Ip<'_> {
    fn argv<'b>(&'b self, rest: &[&'b str]) -> Vec<&'b str> {
        let mut argv = Vec::new();
        if let Some(ns) = self.netns {
            argv.extend(["-n", ns]);
        }
        argv.extend_from_slice(rest);
        argv
    }

    async fn link(&self, adapter: &str) -> Result<LinkState, ToolError> {
        let out = run_program("ip", &self.argv(&["-j", "link", "show", "dev", adapter]), COMMAND_TIME).await?;
        if !out.success() {
            let complaint = out.complaint();
            if complaint.contains("does not exist") {
                return Err(ToolError::not_found(format!(
                    "no network adapter named {adapter} on this PC; net_config lists them"
                )));
            }
            return Err(ToolError::exec_failed(format!("ip link show {adapter}: {complaint}")));
        }
        parse_link(&out.stdout)
            .ok_or_else(|| ToolError::exec_failed(format!("unexpected output from ip link: {}", out.stdout)))
    }

    async fn set(&self, adapter: &str, state: &str) -> Result<(), ToolError> {
        let out = run_program("ip", &self.argv(&["link", "set", "dev", adapter, state]), COMMAND_TIME).await?;
        if out.success() {
            Ok(())
        } else {
            Err(ToolError::exec_failed(format!(
                "ip link set {adapter} {state} failed (the agent needs root or CAP_NET_ADMIN): {}",
                out.complaint()
            )))
        }
    }
}

fn parse_link(json_text: &str) -> Option<LinkState> {
    let value: Value = serde_json::from_str(json_text).ok()?;
    let link = value.as_array()?.first()?;
    let flags: Vec<&str> = link["flags"].as_array()?.iter().filter_map(Value::as_str).collect();
    Some(LinkState {
        up: flags.contains(&"UP"),
        loopback: flags.contains(&"LOOPBACK") || link["link_type"] == "loopback",
        operstate: link["operstate"].as_str().unwrap_or("UNKNOWN").to_ascii_lowercase(),
    })
}

fn windows_reset_script(adapter: &str) -> String {
    let name = powershell_literal(adapter);
    format!(
        "$ErrorActionPreference = 'Stop'\n\
         $before = (Get-NetAdapter -Name {name}).Status\n\
         Restart-NetAdapter -Name {name} -Confirm:$false\n\
         $after = (Get-NetAdapter -Name {name}).Status\n\
         [pscustomobject]@{{ before = \"$before\"; after = \"$after\" }} | ConvertTo-Json -Compress\n"
    )
}

fn windows_reset_result(adapter: &str, out: ProgramOutput) -> ToolResult {
    if !out.success() {
        let complaint = out.complaint();
        if complaint.contains("No MSFT_NetAdapter objects found") {
            return Err(ToolError::not_found(format!(
                "no network adapter named {adapter} on this PC; net_config lists them"
            )));
        }
        return Err(ToolError::exec_failed(format!(
            "Restart-NetAdapter {adapter}: {complaint}"
        )));
    }
    let states: Value = serde_json::from_str(out.stdout.trim()).map_err(|e| {
        ToolError::exec_failed(format!(
            "unexpected output from Restart-NetAdapter ({e}): {}",
            out.stdout
        ))
    })?;
    Ok(json!({
        "adapter": adapter,
        "reset": true,
        "was_up": states["before"] == "Up",
        "is_up": states["after"] == "Up",
        "state_before": states["before"],
        "state_after": states["after"],
        "method": "Restart-NetAdapter",
    }))
}

fn checked(what: &str, out: ProgramOutput) -> Result<ProgramOutput, ToolError> {
    if out.success() {
        Ok(out)
    } else {
        Err(ToolError::exec_failed(format!("{what} failed: {}", out.complaint())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(code: i32, stdout: &str, stderr: &str) -> ProgramOutput {
        ProgramOutput {
            stdout: stdout.into(),
            stderr: stderr.into(),
            exit_code: Some(code),
        }
    }

    #[test]
    fn reads_ip_link_json() {
        let eth = r#"[{"ifindex":2,"ifname":"eth0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,"operstate":"UP","link_type":"ether"}]"#;
        assert_eq!(
            parse_link(eth),
            Some(LinkState {
                up: true,
                loopback: false,
                operstate: "up".into()
            })
        );
        let lo = r#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"operstate":"UNKNOWN","link_type":"loopback"}]"#;
        assert!(parse_link(lo).unwrap().loopback);
        assert_eq!(parse_link("[]"), None);
        assert_eq!(parse_link("garbage"), None);
    }

    #[test]
    fn adapter_names_cannot_smuggle_options_or_paths() {
        for bad in [
            "",
            "-all",
            "../eth0",
            "eth0 up",
            "a\nb",
            "averyveryverylongname",
            "*",
            "eth?",
            "e[th]0",
        ] {
            assert!(adapter_arg(bad).is_err(), "{bad:?}");
        }
        assert_eq!(adapter_arg("enp0s31f6").unwrap(), "enp0s31f6");
        let ip = Ip { netns: Some("test-ns") };
        assert_eq!(
            ip.argv(&["link", "set", "dev", "eth0", "up"]),
            ["-n", "test-ns", "link", "set", "dev", "eth0", "up"]
        );
        assert_eq!(Ip { netns: None }.argv(&["-j", "link"]), ["-j", "link"]);
    }

    #[test]
    fn windows_reset_quotes_the_adapter_name() {
        let script = windows_reset_script("Wi-Fi'; Stop-Computer; '");
        assert!(
            script.contains("Restart-NetAdapter -Name 'Wi-Fi''; Stop-Computer; ''' -Confirm:$false"),
            "{script}"
        );
        assert_eq!(script.matches("-Name 'Wi-Fi''; Stop-Computer; '''").count(), 3);
    }

    #[test]
    fn windows_reset_outputs_are_read() {
        let ok = windows_reset_result("Ethernet", output(0, "{\"before\":\"Up\",\"after\":\"Up\"}\r\n", "")).unwrap();
        assert_eq!((ok["was_up"].clone(), ok["is_up"].clone()), (json!(true), json!(true)));
        let missing = windows_reset_result(
            "Wi-Fi 9",
            output(
                1,
                "",
                "Get-NetAdapter : No MSFT_NetAdapter objects found with property 'Name' equal to 'Wi-Fi 9'.",
            ),
        )
        .unwrap_err();
        assert_eq!(missing.code, kenny_proto::error::ErrorCode::NotFound);
        let denied = windows_reset_result("Ethernet", output(1, "", "Access is denied.")).unwrap_err();
        assert!(denied.message.contains("Access is denied"), "{denied:?}");
    }
}
