//! Windows programs the guard knows (`reg`, `vssadmin`, `wevtutil`, `bcdedit`, `sc`,
//! `taskkill`...), `cmd.exe` command lines (`&`, `|`, `^` escapes, redirections) and
//! registry keys in every spelling.

use super::Blocked;
use super::paths::{Use, is_raw_device_path, refusal};
use super::pattern::Pattern;
use super::words::blocked;

/// A registry key in one spelling: `hklm/system/...` (any of `HKLM\`, `HKLM:\`,
/// `HKEY_LOCAL_MACHINE\`, `Registry::...`, `\\machine\HKLM\...`, quoted).
fn registry_key(text: &str) -> Option<String> {
    let t = text
        .trim_matches(|c| c == '"' || c == '\'')
        .to_lowercase()
        .replace('/', "\\");
    let t = t
        .strip_prefix("microsoft.powershell.core\\registry::")
        .or_else(|| t.strip_prefix("registry::"))
        .unwrap_or(&t)
        .to_owned();
    // `\\machine\HKLM\...`
    let t = match t.strip_prefix("\\\\") {
        Some(rest) => rest.split_once('\\').map(|(_, k)| k.to_owned()).unwrap_or_default(),
        None => t,
    };
    let (root, rest) = t.split_once('\\').unwrap_or((&t, ""));
    let root = match root.trim_end_matches(':') {
        "hklm" | "hkey_local_machine" => "hklm",
        "hkcu" | "hkey_current_user" => "hkcu",
        "hku" | "hkey_users" => "hku",
        "hkcr" | "hkey_classes_root" => "hkcr",
        _ => return None,
    };
    let parts: Vec<&str> = rest.split('\\').filter(|p| !p.is_empty()).collect();
    Some(std::iter::once(root).chain(parts).collect::<Vec<_>>().join("/"))
}

/// Why a registry key may not be used this way, if it is one and may not.
pub(super) fn registry_refusal(text: &str, usage: Use) -> Option<String> {
    let key = registry_key(text)?;
    let p = Pattern::glob(&key);
    let meets = |g: &str| p.intersects(&Pattern::glob(g));
    if meets("hklm/sam") || meets("hklm/sam/**") || meets("hklm/security") || meets("hklm/security/**") {
        return Some("reads the Windows credential hives".into());
    }
    if usage == Use::Read {
        return None;
    }
    if meets("hklm/system/*/services/kenny*") || meets("hklm/system/*/services/kenny*/**") {
        return Some("changes the kenny agent's service".into());
    }
    if usage == Use::Tree {
        for root in [
            "hklm",
            "hklm/software",
            "hklm/system",
            "hklm/system/*",
            "hklm/system/*/services",
            "hkcu",
            "hkcu/software",
            "hku",
            "hkcr",
        ] {
            if meets(root) {
                return Some("deletes a whole registry hive or key that Windows needs".into());
            }
        }
    }
    None
}

/// Whether a `powershell.exe`/`pwsh` flag (without dash, lower case) means
/// -EncodedCommand or -EncodedArguments: `-e`, `-ec`, and every prefix from `-en`.
pub(super) fn is_encoded_flag(flag: &str) -> bool {
    flag == "e"
        || flag == "ec"
        || flag == "ea"
        || (flag.starts_with("en") && ("encodedcommand".starts_with(flag) || "encodedarguments".starts_with(flag)))
}

/// Splits a Windows command line into words (double quotes group, `\"` is a quote).
pub(super) fn split_command_line(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
            }
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Splits a `cmd.exe` line into commands at `&`, `&&`, `||`, `|` outside quotes, with
/// `^` escapes removed; the flag says the command reads a pipe.
pub(super) fn split_cmd(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut piped = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '^' if !quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            '&' | '|' if !quoted => {
                let doubled = chars.peek() == Some(&c);
                if doubled {
                    chars.next();
                }
                out.push((std::mem::take(&mut cur), piped));
                piped = c == '|' && !doubled;
            }
            c => cur.push(c),
        }
    }
    out.push((cur, piped));
    out.into_iter().filter(|(c, _)| !c.trim().is_empty()).collect()
}

/// The words of one `cmd.exe` command and the targets of its `>`/`>>` redirections.
pub(super) fn cmd_words(command: &str) -> (Vec<String>, Vec<String>) {
    let mut words = Vec::new();
    let mut redirects = Vec::new();
    let mut next_is_target = false;
    for w in split_command_line(command) {
        let (before, target) = match w.find('>') {
            Some(at) => (
                w[..at].to_owned(),
                Some(w[at..].trim_start_matches(['>', '&']).to_owned()),
            ),
            None => (w.clone(), None),
        };
        if next_is_target {
            redirects.push(w.clone());
            next_is_target = false;
            continue;
        }
        let before = before.trim_end_matches(['1', '2']).to_owned();
        if !before.is_empty() {
            words.push(before);
        }
        match target {
            Some(t) if t.is_empty() => next_is_target = !w.ends_with("&1") && !w.ends_with("&2"),
            Some(t) if t.chars().all(|c| c.is_ascii_digit()) => {}
            Some(t) => redirects.push(t),
            None => {}
        }
    }
    (words, redirects)
}

fn path_check(text: &str, usage: Use) -> Result<(), Blocked> {
    if is_raw_device_path(text) {
        return Err(blocked(format!("`{text}` is a raw disk or volume device")));
    }
    if let Some(why) = registry_refusal(text, usage) {
        return Err(blocked(format!("`{text}` {why}")));
    }
    match refusal(&Pattern::windows_glob(text).normalized_path(), usage) {
        Some(why) => Err(blocked(format!("`{text}` {why}"))),
        None => Ok(()),
    }
}

fn agentish(word: Option<&str>) -> bool {
    word.is_none_or(|w| {
        let p = Pattern::glob(&w.trim_matches('"').to_lowercase());
        ["kenny-agent", "kenny", "kenny-agent.exe", "kenny.exe"]
            .iter()
            .any(|n| p.intersects(&Pattern::literal(n)))
            || p.intersects(&Pattern::glob("kenny*"))
    })
}

/// A Windows program with its arguments (`None`: only known at run time).
pub(super) fn native(name: &str, args: &[Option<String>], piped: bool) -> Result<(), Blocked> {
    let lower: Vec<Option<String>> = args.iter().map(|a| a.as_ref().map(|t| t.to_lowercase())).collect();
    let words: Vec<&str> = lower.iter().map(|a| a.as_deref().unwrap_or("\u{0}")).collect();
    let has = |w: &str| words.contains(&w);
    let flag = |f: &str| words.iter().any(|w| w.trim_start_matches(['/', '-']) == f);
    let refuse = |why: &str| Err(blocked(format!("`{name}` {why}")));
    let _ = piped;
    match name {
        "reg" => {
            let sub = words.first().copied().unwrap_or("");
            let key = args.get(1).cloned().flatten();
            match sub {
                "save" | "export" | "copy" => match key {
                    Some(k) if registry_refusal(&k, Use::Read).is_some() => {
                        refuse("copies the Windows credential hives")
                    }
                    Some(k)
                        if registry_key(&k).is_some_and(|r| {
                            r == "hklm/system" || r.ends_with("/control/lsa") || r.contains("/control/lsa/")
                        }) =>
                    {
                        refuse("copies the key that decrypts the Windows credential hives")
                    }
                    Some(_) => Ok(()),
                    None => refuse("copies a registry key only known at run time"),
                },
                "delete" | "add" | "import" | "restore" | "load" | "unload" => match key {
                    Some(k) => {
                        let usage = if sub == "delete" && !has("/v") {
                            Use::Tree
                        } else {
                            Use::Write
                        };
                        match registry_refusal(&k, usage) {
                            Some(why) => refuse(&why),
                            None => Ok(()),
                        }
                    }
                    None => refuse("changes a registry key only known at run time"),
                },
                _ => Ok(()),
            }
        }
        "vssadmin" if has("delete") || (has("resize") && words.iter().any(|w| w.contains("shadowstorage"))) => {
            refuse("deletes volume shadow copies")
        }
        "wmic" if words.iter().any(|w| w.contains("shadowcopy")) && has("delete") => {
            refuse("deletes volume shadow copies")
        }
        "wmic"
            if has("call")
                && words
                    .iter()
                    .any(|w| matches!(*w, "terminate" | "stopservice" | "delete" | "changestartmode")) =>
        {
            if has("delete") || words.iter().any(|w| w.contains("kenny")) || !has("where") {
                refuse(
                    "stops or deletes processes or services through WMI; use Stop-Service or Stop-Process with a literal name",
                )
            } else {
                Ok(())
            }
        }
        "wbadmin" if has("delete") || (has("disable") && has("backup")) => refuse("deletes backups"),
        "wevtutil" => {
            let sub = words.first().copied().unwrap_or("");
            if matches!(sub, "cl" | "clear-log") {
                return refuse("clears an event log");
            }
            if matches!(sub, "sl" | "set-log")
                && words
                    .iter()
                    .any(|w| w.starts_with("/e:false") || w.starts_with("/enabled:false") || w.starts_with("/ms:"))
            {
                return refuse("switches off or shrinks an event log");
            }
            Ok(())
        }
        "bcdedit" => {
            if words
                .iter()
                .any(|w| matches!(w.trim_start_matches(['/', '-']), "delete" | "deletevalue"))
            {
                return refuse("removes boot configuration");
            }
            if words
                .iter()
                .any(|w| *w == "recoveryenabled" || *w == "bootstatuspolicy")
                && (has("no") || has("ignoreallfailures") || has("off"))
            {
                return refuse("switches off Windows recovery");
            }
            Ok(())
        }
        "bootrec" | "bootsect" => refuse("rewrites boot records"),
        "reagentc" if flag("disable") => refuse("switches off the Windows recovery environment"),
        "diskpart" => {
            refuse("runs disk partitioning scripts the guard cannot judge; use Get-Disk/Get-Partition to look")
        }
        "format" => refuse("formats a drive"),
        "cipher" if words.iter().any(|w| w.starts_with("/w")) => refuse("wipes free disk space"),
        "fsutil" if has("deletejournal") || has("setzerodata") => refuse("erases file system records or data"),
        "manage-bde" if flag("forcerecovery") || (flag("protectors") && flag("delete")) => refuse("locks the disk"),
        "sc" => {
            let rest: Vec<&str> = words.iter().copied().skip_while(|w| w.starts_with("\\\\")).collect();
            let verb = rest.first().copied().unwrap_or("");
            if matches!(
                verb,
                "stop" | "delete" | "config" | "failure" | "pause" | "sdset" | "control"
            ) {
                let service = args.get(args.len() - rest.len() + 1).cloned().flatten();
                if agentish(service.as_deref()) {
                    return refuse("would stop or disable the kenny agent");
                }
            }
            Ok(())
        }
        "net" | "net1" if matches!(words.first().copied(), Some("stop" | "pause")) => {
            let service: Option<Vec<String>> = args[1..].iter().cloned().collect();
            if service.is_none_or(|s| agentish(Some(&s.join(" ")))) {
                return refuse("would stop the kenny agent");
            }
            Ok(())
        }
        "taskkill" | "tskill" | "pskill" => {
            let me = std::process::id().to_string();
            let mut i = 0;
            let mut named = false;
            while i < words.len() {
                let w = words[i].trim_start_matches(['/', '-']);
                if matches!(w, "im" | "pid" | "fi") {
                    named = true;
                    let value = args.get(i + 1).cloned().flatten();
                    let hit = match w {
                        "pid" => value.as_deref().is_none_or(|v| v == me),
                        "fi" => true,
                        _ => agentish(value.as_deref()),
                    };
                    if hit {
                        return refuse("would stop the kenny agent (or every process matching a filter)");
                    }
                    i += 2;
                    continue;
                }
                i += 1;
            }
            if !named && name != "taskkill" && args.first().is_none_or(|a| agentish(a.as_deref())) {
                return refuse("would stop the kenny agent");
            }
            Ok(())
        }
        "ntdsutil" | "secretsdump" | "mimikatz" | "procdump" | "procdump64" | "pwdump" | "lazagne" | "nanodump" => {
            if name.starts_with("procdump") && !words.iter().any(|w| w.contains("lsass")) {
                return Ok(());
            }
            refuse("dumps stored credentials")
        }
        "rundll32" if words.iter().any(|w| w.contains("comsvcs")) => {
            refuse("dumps process memory (the MiniDump trick)")
        }
        "esentutl" if flag("vss") || words.iter().any(|w| w.contains("ntds") || w.contains("\\config\\sam")) => {
            refuse("copies locked credential databases")
        }
        "robocopy" | "xcopy" => {
            let mirror = flag("mir") || flag("purge");
            let paths: Vec<&Option<String>> = args
                .iter()
                .filter(|a| a.as_deref().is_some_and(|t| !t.starts_with('/')))
                .collect();
            if let Some(Some(dest)) = paths.get(1) {
                path_check(dest, if mirror { Use::Tree } else { Use::Replace })?;
            }
            Ok(())
        }
        "takeown" | "icacls" | "cacls" => {
            let tree = flag("r") || flag("t");
            for a in args
                .iter()
                .flatten()
                .filter(|t| !t.starts_with('/') && (t.contains('\\') || t.contains(':')))
            {
                path_check(a, if tree { Use::Tree } else { Use::Replace })?;
            }
            Ok(())
        }
        "copy" | "move" | "ren" | "rename" | "type" | "more" => {
            for a in args.iter().flatten().filter(|t| !t.starts_with('/')) {
                path_check(a, Use::Read)?;
            }
            if let (Some(Some(dest)), true) = (
                args.iter().rfind(|a| a.as_deref().is_some_and(|t| !t.starts_with('/'))),
                matches!(name, "copy" | "move"),
            ) {
                path_check(dest, Use::Replace)?;
            }
            Ok(())
        }
        "schtasks" if flag("create") && words.iter().any(|w| w.contains("-enc") || w.contains("/enc")) => {
            refuse("schedules encoded PowerShell")
        }
        "mshta" | "regsvr32"
            if words.iter().any(|w| {
                w.contains("http:") || w.contains("https:") || w.contains("javascript:") || w.contains("vbscript:")
            }) =>
        {
            refuse("runs code fetched from the network")
        }
        "certutil" if flag("urlcache") || flag("decode") || flag("decodehex") => {
            refuse("downloads or decodes files the way fetched code is smuggled in; use Invoke-WebRequest")
        }
        "kenny-agent" | "kenny" if has("uninstall") || has("remote-control") => {
            refuse("reconfigures or removes the kenny agent itself")
        }
        _ => {
            for a in args.iter().flatten() {
                if a.contains(['\\', '/']) || a.get(1..2) == Some(":") {
                    path_check(a, Use::Read)?;
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_keys_in_every_spelling() {
        for k in [
            r"HKLM\SAM",
            r"hklm\sam",
            r"HKLM:\SAM",
            r"HKEY_LOCAL_MACHINE\SAM",
            r"Registry::HKEY_LOCAL_MACHINE\SECURITY",
            r"\\localhost\HKLM\SAM",
            r#""HKLM\SAM""#,
            "HKLM/SAM",
            r"HKLM\SAM\SAM\Domains",
        ] {
            assert!(registry_refusal(k, Use::Read).is_some(), "{k}");
        }
        assert!(registry_refusal(r"HKLM\SOFTWARE\Microsoft", Use::Read).is_none());
        assert!(registry_refusal(r"HKLM\SYSTEM\CurrentControlSet\Services\kenny-agent", Use::Write).is_some());
        assert!(registry_refusal(r"HKLM\SOFTWARE", Use::Tree).is_some());
    }

    #[test]
    fn encoded_flags() {
        for f in [
            "e",
            "ec",
            "en",
            "enc",
            "enco",
            "encodedcommand",
            "encodeda",
            "encodedarguments",
            "ea",
        ] {
            assert!(is_encoded_flag(f), "{f}");
        }
        for f in ["ex", "executionpolicy", "c", "command", "noprofile", "file"] {
            assert!(!is_encoded_flag(f), "{f}");
        }
    }

    #[test]
    fn cmd_lines_split_like_cmd() {
        assert_eq!(
            split_cmd("a & b && c | d"),
            [
                ("a ".into(), false),
                (" b ".into(), false),
                (" c ".into(), false),
                (" d".into(), true)
            ]
        );
        assert_eq!(split_cmd("r^e^g save x"), [("reg save x".into(), false)]);
        assert_eq!(split_cmd("echo \"a & b\""), [("echo \"a & b\"".into(), false)]);
        assert_eq!(cmd_words("echo x > C:\\t.txt").1, ["C:\\t.txt"]);
    }
}
