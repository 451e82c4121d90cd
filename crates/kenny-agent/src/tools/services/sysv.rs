//! SysV init scripts, for Linux PCs (and containers) where systemd is not PID 1.

use std::io::Read;
use std::path::Path;

use serde_json::json;

use super::{Service, Standing};

/// Scripts that live in /etc/init.d without being services.
const NOT_SERVICES: [&str; 5] = ["README", "skeleton", "rc", "rcS", "functions"];
/// The LSB header sits at the top of a script.
const HEADER_BYTES: u64 = 8 * 1024;
const MAX_SCRIPTS: usize = 5000;

pub(super) fn scan_system() -> Result<Vec<Service>, String> {
    scan(Path::new("/etc/init.d"), Path::new("/run"))
}

/// Every init script in `init_dir`; `running` only when a pid file under `run_dir`
/// names a live process, since asking each script for its status would run it.
pub(super) fn scan(init_dir: &Path, run_dir: &Path) -> Result<Vec<Service>, String> {
    let entries = match std::fs::read_dir(init_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list {}: {e}", init_dir.display())),
    };
    let mut services = Vec::new();
    for entry in entries.flatten().take(MAX_SCRIPTS) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || NOT_SERVICES.contains(&name.as_str()) || !is_executable_file(&entry.path()) {
            continue;
        }
        let path = entry.path();
        let description = short_description(&path);
        let running = pid_file_is_live(run_dir, &name);
        services.push(Service {
            names: vec![name.clone()],
            standing: Standing {
                running,
                unknown: !running,
                ..Standing::default()
            },
            entry: json!({
                "name": name,
                "description": description,
                "active": if running { "running" } else { "unknown" },
                "script": path.to_string_lossy(),
            }),
        });
    }
    Ok(services)
}

#[cfg(unix)]
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable_file(path: &Path) -> bool {
    path.is_file()
}

/// The LSB `Short-Description:` line, if the script has one.
fn short_description(script: &Path) -> Option<String> {
    let mut head = Vec::new();
    std::fs::File::open(script)
        .ok()?
        .take(HEADER_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    String::from_utf8_lossy(&head).lines().find_map(|line| {
        let rest = line.trim_start_matches('#').trim_start();
        rest.strip_prefix("Short-Description:")
            .map(|d| d.trim().to_owned())
            .filter(|d| !d.is_empty())
    })
}

/// The usual places a daemon started by `name` records its pid.
fn pid_file_is_live(run_dir: &Path, name: &str) -> bool {
    let candidates = [
        run_dir.join(format!("{name}.pid")),
        run_dir.join(name).join(format!("{name}.pid")),
    ];
    candidates.iter().any(|file| {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.split_whitespace().next()?.parse::<u32>().ok())
            .is_some_and(process_exists)
    })
}

#[cfg(target_os = "linux")]
fn process_exists(pid: u32) -> bool {
    pid > 0 && Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(not(target_os = "linux"))]
fn process_exists(_pid: u32) -> bool {
    false
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str, mode: u32) {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn lists_scripts_with_descriptions_and_live_pid_files() {
        let root = tempfile::tempdir().unwrap();
        let init = root.path().join("init.d");
        let run = root.path().join("run");
        std::fs::create_dir_all(&init).unwrap();
        std::fs::create_dir_all(run.join("beta")).unwrap();
        let header = "#!/bin/sh\n### BEGIN INIT INFO\n# Provides: alpha\n# Short-Description:   Alpha daemon  \n### END INIT INFO\n";
        script(&init, "alpha", header, 0o755);
        script(&init, "beta", "#!/bin/sh\n", 0o755);
        script(&init, "gamma", "#!/bin/sh\n", 0o755);
        script(&init, "README", "not a service", 0o755);
        script(&init, "notes.txt", "not executable", 0o644);
        script(&init, ".hidden", "#!/bin/sh\n", 0o755);
        // alpha: a live pid (ours); beta: in its own directory; gamma: a stale pid file.
        std::fs::write(run.join("alpha.pid"), format!("{}\n", std::process::id())).unwrap();
        std::fs::write(run.join("beta").join("beta.pid"), std::process::id().to_string()).unwrap();
        std::fs::write(run.join("gamma.pid"), "999999999\n").unwrap();

        let mut services = scan(&init, &run).unwrap();
        services.sort_by(|a, b| a.names.cmp(&b.names));
        let names: Vec<_> = services.iter().map(|s| s.names[0].as_str()).collect();
        assert_eq!(names, ["alpha", "beta", "gamma"]);
        assert_eq!(services[0].entry["description"], "Alpha daemon");
        assert_eq!(services[0].entry["active"], "running");
        assert_eq!(services[1].entry["active"], "running");
        assert_eq!(services[1].entry["description"], serde_json::Value::Null);
        assert_eq!(services[2].entry["active"], "unknown");
        assert!(services[2].standing.unknown && !services[2].standing.running);
        assert_eq!(
            services[0].entry["script"],
            init.join("alpha").to_string_lossy().as_ref()
        );
    }

    #[test]
    fn no_init_directory_is_no_services() {
        let root = tempfile::tempdir().unwrap();
        assert!(scan(&root.path().join("missing"), root.path()).unwrap().is_empty());
    }
}
