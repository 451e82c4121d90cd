//! `kenny-agent install` / `uninstall`: carries out a [`crate::service`] plan on this PC.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::service::{InstallPlan, InstallSettings, Step, linux_plan, powershell_argv, windows_plan};

/// The plan for this OS; `root` stages a Linux install under another directory.
pub fn plan_here(root: Option<&Path>, settings: &InstallSettings) -> anyhow::Result<InstallPlan> {
    let plan = if cfg!(windows) {
        let dir = |var: &str, default: &str| PathBuf::from(std::env::var_os(var).unwrap_or_else(|| default.into()));
        windows_plan(
            &dir("ProgramFiles", r"C:\Program Files"),
            &dir("ProgramData", r"C:\ProgramData"),
            settings,
        )
    } else {
        linux_plan(root.unwrap_or(Path::new("/")), settings)
    };
    plan.map_err(|e| anyhow::anyhow!(e))
}

/// Copies this binary, writes the settings (private) and the unit, then registers and
/// starts the service unless `start` is false.
pub fn install(plan: &InstallPlan, start: bool) -> anyhow::Result<()> {
    let me = std::env::current_exe().context("finding this program's own path")?;
    if !same_file(&me, &plan.binary) {
        create_parent(&plan.binary)?;
        // Copy next to the target, then rename: a running old agent keeps its file.
        let staging = plan.binary.with_extension("new");
        std::fs::copy(&me, &staging).with_context(|| format!("copying {} to {}", me.display(), staging.display()))?;
        set_mode(&staging, 0o755)?;
        std::fs::rename(&staging, &plan.binary).with_context(|| format!("installing {}", plan.binary.display()))?;
    }
    // The directories first, private before anything secret goes in them.
    for step in &plan.setup {
        match step {
            Step::MakeDir { path, mode } => {
                std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
                set_mode(path, *mode)?;
            }
            Step::Run(argv) => run(argv).context("restricting access to the agent's settings and key")?,
            Step::PowerShell(script) => run(&powershell_argv(script))
                .context("checking that the agent's settings and key directories are private")?,
            Step::WriteSettings => write_private(&plan.config, plan.config_text.as_bytes())?,
        }
    }
    if let Some((path, text)) = &plan.unit {
        create_parent(path)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        set_mode(path, 0o644)?;
    }
    println!("installed {}", plan.binary.display());
    println!(
        "settings  {} (private: it holds the enrollment token)",
        plan.config.display()
    );
    if let Some((path, _)) = &plan.unit {
        println!("unit      {}", path.display());
    }
    if !start {
        println!("not started (--no-start); to start: {}", render(&plan.start));
        return Ok(());
    }
    if !cfg!(windows) && !Path::new("/run/systemd/system").exists() {
        bail!(
            "files are in place, but systemd is not running on this PC (PID 1 is {}), so the service cannot be registered; start `{} run --config {}` with this PC's init system instead",
            pid1_name(),
            plan.binary.display(),
            plan.config.display()
        );
    }
    for argv in &plan.start {
        run(argv)?;
    }
    println!("service started; it restarts on failure and at boot");
    Ok(())
}

/// Stops and removes the service and the binary; settings and state (the agent's key)
/// stay unless `purge`, so a reinstall keeps its identity.
pub fn uninstall(plan: &InstallPlan, stop: bool, purge: bool) -> anyhow::Result<()> {
    if stop {
        if cfg!(windows) || Path::new("/run/systemd/system").exists() {
            for argv in &plan.stop {
                if let Err(e) = run(argv) {
                    eprintln!("warning: {e:#}");
                }
            }
        } else {
            eprintln!("systemd is not running on this PC; no service to stop");
        }
    }
    if let Some((path, _)) = &plan.unit {
        remove_file(path)?;
    }
    remove_file(&plan.binary)?;
    if purge {
        remove_file(&plan.config)?;
        for dir in [&plan.state_dir, &plan.switch_dir] {
            if dir.exists() {
                std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
            }
        }
        println!("removed the service, the binary, the settings and the agent's key");
    } else {
        println!(
            "removed the service and the binary; kept {} and {} (use --purge to remove them too)",
            plan.config.display(),
            plan.state_dir.display()
        );
    }
    Ok(())
}

fn run(argv: &[String]) -> anyhow::Result<()> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .with_context(|| format!("running {}", argv.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn render(commands: &[Vec<String>]) -> String {
    commands.iter().map(|c| c.join(" ")).collect::<Vec<_>>().join(" && ")
}

fn create_parent(path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

/// Created with owner-only permissions from the start (on Windows, with its private
/// directory's ACL), so the token is never readable by others, not even for a moment.
/// The temporary file is created new: a stale one, or a link someone left in its place,
/// is removed rather than written through.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    create_parent(path)?;
    let tmp = path.with_extension("tmp");
    remove_file(&tmp)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("setting permissions of {}", path.display()))?;
    }
    let _ = (path, mode);
    Ok(())
}

fn remove_file(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn pid1_name() -> String {
    std::fs::read_to_string("/proc/1/comm")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}
