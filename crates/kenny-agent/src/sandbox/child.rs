//! Puts a `shell_exec` child in the sandbox between fork and exec, with system calls
//! only (nothing that allocates or locks), and keeps the prepared ruleset current.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::landlock::{self, Built};
use super::mounts::{self, Op, Plan};

struct Sandbox {
    abi: i32,
    landlock: Option<Built>,
    landlock_off: Option<String>,
    mounts_off: Option<String>,
    /// Set no_new_privs first: needed without CAP_SYS_ADMIN. With it we skip it, so
    /// setuid programs and AppArmor profile changes keep working for the command.
    nnp: bool,
    empty: Option<PathBuf>,
    extra_dirs: Vec<PathBuf>,
}

static STATE: Mutex<Option<Sandbox>> = Mutex::new(None);

fn has_sys_admin() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

fn extra_dirs() -> Vec<PathBuf> {
    std::env::var_os(super::EXTRA_DEVICE_DIRS)
        .map(|v| std::env::split_paths(&v).filter(|p| p.is_absolute()).collect())
        .unwrap_or_default()
}

/// Prepares the sandbox (or prepares it again, for newly registered paths) and checks
/// it works here by entering it in a throw-away child; a layer that fails is switched
/// off and reported.
pub fn prepare() {
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    *state = Some(build());
    if let Some(sb) = state.as_mut() {
        probe(sb);
        log(sb);
    }
}

fn build() -> Sandbox {
    let abi = landlock::kernel_abi();
    let extra = extra_dirs();
    let (landlock, landlock_off) = if abi <= 0 {
        (
            None,
            Some("this kernel has no Landlock (or it is disabled at boot)".to_owned()),
        )
    } else {
        match landlock::build(&extra) {
            Ok(b) => (Some(b), None),
            Err(e) => (None, Some(format!("the Landlock ruleset could not be built: {e}"))),
        }
    };
    let privileged = has_sys_admin();
    let empty = crate::guard::agent_paths().state_dir.map(|d| d.join(".kenny-empty"));
    let mounts_off = if !privileged {
        Some("the agent may not mount (it does not run as root)".to_owned())
    } else {
        match &empty {
            Some(e) => create_empty(e).err(),
            None => Some("no state directory to keep the empty stand-in file".to_owned()),
        }
    };
    Sandbox {
        abi,
        landlock,
        landlock_off,
        mounts_off,
        nnp: !privileged,
        empty,
        extra_dirs: extra,
    }
}

fn create_empty(path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        // A legacy-token agent has no key, so nothing made its state directory yet.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(path, b"").map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o400))
        .map_err(|e| format!("cannot protect {}: {e}", path.display()))
}

fn probe(sb: &mut Sandbox) {
    for _ in 0..2 {
        let outcome = try_enter(&setup_for(sb));
        let Err(why) = outcome else { return };
        if sb.mounts_off.is_none() {
            sb.mounts_off = Some(format!("mount isolation does not work here: {why}"));
        } else if sb.landlock_off.is_none() {
            sb.landlock = None;
            sb.landlock_off = Some(format!("Landlock does not work here: {why}"));
        } else {
            return;
        }
    }
}

/// Enters the sandbox in a forked child that exits at once, without running any
/// program: a probe that ran a file (such as `/bin/true`) could be made to fail by a
/// command that replaced that file, switching the sandbox off at the next start.
fn try_enter(setup: &Setup) -> Result<(), String> {
    // SAFETY: the child only makes system calls on data prepared before fork (as a
    // `pre_exec` closure does) and leaves with `_exit`, running no destructors.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork failed: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let code = match setup.enter() {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(255).clamp(1, 255),
        };
        // SAFETY: ends the forked child immediately.
        unsafe { libc::_exit(code) };
    }
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waits for the child forked above.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("waiting for the probe failed: {e}"));
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        return Ok(());
    }
    if libc::WIFEXITED(status) {
        let errno = libc::WEXITSTATUS(status);
        return Err(format!(
            "setting it up failed: {}",
            std::io::Error::from_raw_os_error(errno)
        ));
    }
    Err(format!("the probe ended abnormally (wait status {status})"))
}

fn log(sb: &Sandbox) {
    match (&sb.landlock_off, &sb.mounts_off) {
        (None, None) => tracing::info!(abi = sb.abi, "shell commands run under Landlock and mount isolation"),
        (landlock, mounts) => tracing::warn!(
            abi = sb.abi,
            landlock = landlock.as_deref().unwrap_or("on"),
            mounts = mounts.as_deref().unwrap_or("on"),
            "the kernel layer under shell commands is partly or wholly off; the text guard still applies"
        ),
    }
}

/// What the child does, prepared in the parent.
struct Setup {
    landlock: Option<Arc<OwnedFd>>,
    nnp: bool,
    mounts: Option<Plan>,
    root: CString,
    tmpfs: CString,
    tmpfs_options: CString,
}

fn setup_for(sb: &Sandbox) -> Setup {
    let mounts = match (&sb.mounts_off, &sb.empty) {
        (None, Some(empty)) => mounts::plan(&crate::guard::agent_paths(), empty),
        _ => None,
    };
    Setup {
        landlock: sb.landlock.as_ref().map(|b| b.fd.clone()),
        nnp: sb.nnp,
        mounts,
        root: CString::from(c"/"),
        tmpfs: CString::from(c"tmpfs"),
        tmpfs_options: CString::from(c"size=4k,mode=500"),
    }
}

fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl Setup {
    /// Runs in the child after fork: system calls only.
    fn enter(&self) -> std::io::Result<()> {
        let null = std::ptr::null::<libc::c_char>();
        if let Some(plan) = &self.mounts {
            // SAFETY (this block): plain system calls on NUL-terminated strings that
            // live as long as `self`.
            unsafe {
                check(libc::unshare(libc::CLONE_NEWNS))?;
                // Nothing done here may reach the agent's namespace.
                check(libc::mount(
                    null,
                    self.root.as_ptr(),
                    null,
                    libc::MS_REC | libc::MS_SLAVE,
                    std::ptr::null(),
                ))?;
                for op in &plan.ops {
                    match op {
                        Op::HideFile(t) | Op::ReadOnly(t) => {
                            let source = if matches!(op, Op::HideFile(_)) { &plan.empty } else { t };
                            check(libc::mount(
                                source.as_ptr(),
                                t.as_ptr(),
                                null,
                                libc::MS_BIND,
                                std::ptr::null(),
                            ))?;
                            check(libc::mount(
                                null,
                                t.as_ptr(),
                                null,
                                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                                std::ptr::null(),
                            ))?;
                        }
                        Op::HideDir(_) => {}
                    }
                }
                for op in &plan.ops {
                    if let Op::HideDir(t) = op {
                        check(libc::mount(
                            self.tmpfs.as_ptr(),
                            t.as_ptr(),
                            self.tmpfs.as_ptr(),
                            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                            self.tmpfs_options.as_ptr().cast(),
                        ))?;
                    }
                }
            }
        }
        if let Some(fd) = &self.landlock {
            let raw: RawFd = fd.as_raw_fd();
            // SAFETY: prctl and landlock_restrict_self take integers only.
            unsafe {
                if self.nnp {
                    check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, raw, 0u32) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// Puts `cmd` in the sandbox. Errors only when a layer that works here could not be
/// set up for this command; a layer the PC does not have is simply absent.
pub fn apply(cmd: &mut tokio::process::Command) -> Result<(), String> {
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if state.is_none() {
        let mut sb = build();
        probe(&mut sb);
        log(&sb);
        *state = Some(sb);
    }
    let Some(sb) = state.as_mut() else { return Ok(()) };
    // New entries in a directory the ruleset lists one by one (a device plugged in, a
    // directory made): build it again so they are covered (or usable).
    if sb.landlock.as_ref().is_some_and(Built::stale) {
        let rebuilt =
            landlock::build(&sb.extra_dirs).map_err(|e| format!("the Landlock ruleset could not be rebuilt: {e}"))?;
        sb.landlock = Some(rebuilt);
    }
    let setup = setup_for(sb);
    // SAFETY: `enter` only makes system calls on data prepared here.
    unsafe {
        cmd.pre_exec(move || setup.enter());
    }
    Ok(())
}

/// The `sandbox` telemetry section.
pub fn status() -> Value {
    let state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(sb) = state.as_ref() else {
        return json!({
            "status": "warn",
            "summary": "the kernel layer has not been prepared yet",
            "landlock_abi": landlock::kernel_abi(),
        });
    };
    let signals = sb.landlock.as_ref().is_some_and(|b| b.signals_scoped);
    let rules = sb.landlock.as_ref().map_or(0, |b| b.rules);
    let mut problems = Vec::new();
    if let Some(off) = &sb.landlock_off {
        problems.push(format!("Landlock off: {off}"));
    } else if !signals {
        problems.push(format!(
            "Landlock ABI {} cannot keep commands from signalling the agent (needs 6)",
            sb.abi
        ));
    }
    if let Some(off) = &sb.mounts_off {
        problems.push(format!("mount isolation off: {off}"));
    }
    let summary = if problems.is_empty() {
        format!("shell commands run under Landlock ABI {} and mount isolation", sb.abi)
    } else {
        format!("{}; the text guard still applies", problems.join("; "))
    };
    json!({
        "status": if problems.is_empty() { "ok" } else { "warn" },
        "summary": summary,
        "landlock_abi": sb.abi,
        "landlock": if sb.landlock_off.is_none() { "enforced" } else { "off" },
        "signals_scoped": signals,
        "mount_isolation": if sb.mounts_off.is_none() { "enforced" } else { "off" },
        "landlock_rules": rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prints which layers this process's probe leaves on; run in a child process by
    /// `a_command_that_breaks_bin_true_cannot_switch_the_sandbox_off`.
    #[test]
    #[ignore]
    fn probe_report() {
        let Ok(state) = std::env::var("KENNY_PROBE_STATE") else {
            return;
        };
        crate::guard::register(crate::guard::AgentPaths {
            state_dir: Some(PathBuf::from(state)),
            binary: std::env::current_exe().ok(),
            ..Default::default()
        });
        let mut sb = build();
        probe(&mut sb);
        println!(
            "PROBE landlock={} mounts={}",
            sb.landlock_off.is_none(),
            sb.mounts_off.is_none()
        );
    }

    fn layers(wrapper: &[&str], state: &std::path::Path) -> String {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(wrapper[0])
            .args(&wrapper[1..])
            .arg(&exe)
            .args([
                "--ignored",
                "--exact",
                "sandbox::child::tests::probe_report",
                "--nocapture",
            ])
            .env("KENNY_PROBE_STATE", state)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| l.starts_with("PROBE "))
            .unwrap_or_else(|| panic!("no probe report: {text}{}", String::from_utf8_lossy(&out.stderr)))
            .to_owned()
    }

    /// A command could replace `/bin/true` (it runs as root); a probe that ran it would
    /// then report the sandbox broken at the next start and switch it off.
    #[test]
    fn a_command_that_breaks_bin_true_cannot_switch_the_sandbox_off() {
        if !has_sys_admin() || !std::path::Path::new("/usr/bin/unshare").exists() {
            eprintln!("SKIPPED: needs root and unshare(1) to give a child a /bin/true that fails");
            return;
        }
        let state = tempfile::tempdir().unwrap();
        let plain = layers(&["/bin/sh", "-c", "exec \"$@\"", "sh"], state.path());
        let broken = layers(
            &[
                "/usr/bin/unshare",
                "--mount",
                "--propagation",
                "private",
                "/bin/sh",
                "-c",
                "mount --bind /bin/false /bin/true && exec \"$@\"",
                "sh",
            ],
            state.path(),
        );
        assert_eq!(
            plain, broken,
            "the layers that work here must stay on when /bin/true fails"
        );
    }

    /// Cost of the kernel layer per command, for docs/benchmarks.md (needs root for the
    /// mount layer): `cargo test --release -p kenny-agent --lib sandbox -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn sandbox_cost() {
        let state = tempfile::tempdir().unwrap();
        crate::guard::register(crate::guard::AgentPaths {
            state_dir: Some(state.path().to_path_buf()),
            binary: std::env::current_exe().ok(),
            ..Default::default()
        });
        prepare();
        let rounds = 300;
        let time = |sandboxed: bool| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let started = std::time::Instant::now();
            for _ in 0..rounds {
                let mut cmd = tokio::process::Command::new("/bin/true");
                if sandboxed {
                    apply(&mut cmd).unwrap();
                }
                let status = rt.block_on(async { cmd.status().await.unwrap() });
                assert!(status.success());
            }
            started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
        };
        let plain = time(false);
        let boxed = time(true);
        println!("{}", status());
        println!(
            "spawn /bin/true: plain {plain:.0} µs, in the sandbox {boxed:.0} µs, cost {:.0} µs",
            boxed - plain
        );
        if let Some(sb) = STATE.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            sb.mounts_off = Some("measuring Landlock alone".into());
        }
        let landlock_only = time(true);
        println!(
            "spawn /bin/true under Landlock alone: {landlock_only:.0} µs, cost {:.0} µs",
            landlock_only - plain
        );
    }
}
