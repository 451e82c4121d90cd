//! A throwaway PostgreSQL server for tests: Debian's binaries, a data directory in a
//! temporary directory, listening on 127.0.0.1 only, stopped (by its PID) when dropped.
//! Run as root, the server runs as the `postgres` account, which PostgreSQL requires.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const READY_WITHIN: Duration = Duration::from_secs(30);
const SUPERUSER: &str = "kenny";

pub struct TestPostgres {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl TestPostgres {
    /// Whether this machine can run one, and if not, why (for a test to say it skipped).
    pub fn unavailable() -> Option<String> {
        match bin_dir() {
            Some(_) => None,
            None => Some("PostgreSQL is not installed (Debian: apt-get install postgresql)".into()),
        }
    }

    /// Initialises a cluster and starts it; returns once it accepts connections.
    pub fn start() -> anyhow::Result<TestPostgres> {
        let bin = bin_dir().context("PostgreSQL is not installed (Debian: apt-get install postgresql)")?;
        let dir = tempfile::Builder::new().prefix("kenny-pg").tempdir()?;
        let data = dir.path().join("data");
        let account = run_as()?;
        if let Some((uid, gid)) = account {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        let init = as_account(Command::new(bin.join("initdb")), account)
            .args([
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
                "-D",
            ])
            .arg(&data)
            .stdout(Stdio::null())
            .output()
            .context("running initdb")?;
        if !init.status.success() {
            bail!("initdb failed: {}", String::from_utf8_lossy(&init.stderr));
        }
        let port = free_port()?;
        let child = as_account(Command::new(bin.join("postgres")), account)
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-k"])
            .arg(dir.path())
            // Throwaway data: durability costs time and buys nothing here.
            .args([
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ])
            .args(["-c", "max_connections=200"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting postgres")?;
        let server = TestPostgres { child, port, _dir: dir };
        server.wait_ready()?;
        Ok(server)
    }

    /// A URL for the `postgres` maintenance database.
    pub fn admin_url(&self) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/postgres", self.port)
    }

    /// Creates an empty database and returns its URL: one per test keeps tests apart.
    pub fn database(&self, name: &str) -> anyhow::Result<String> {
        let mut client = postgres::Client::connect(&self.admin_url(), postgres::NoTls)?;
        client.batch_execute(&format!("CREATE DATABASE \"{name}\""))?;
        Ok(format!("postgres://{SUPERUSER}@127.0.0.1:{}/{name}", self.port))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            if postgres::Client::connect(&self.admin_url(), postgres::NoTls).is_ok() {
                return Ok(());
            }
            if started.elapsed() > READY_WITHIN {
                bail!(
                    "PostgreSQL did not accept connections within {}s",
                    READY_WITHIN.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        // SIGINT is PostgreSQL's fast shutdown: open sessions are ended, nothing waits.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("postgres").exists() && bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

/// PostgreSQL refuses to run as root: as root, run it as the `postgres` account.
fn run_as() -> anyhow::Result<Option<(u32, u32)>> {
    if !is_root() {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    let entry = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .context("running as root, and there is no postgres account to run PostgreSQL as")?;
    let fields: Vec<&str> = entry.split(':').collect();
    let id = |i: usize| -> anyhow::Result<u32> { Ok(fields.get(i).context("a short passwd entry")?.parse()?) };
    Ok(Some((id(2)?, id(3)?)))
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

fn as_account(mut command: Command, account: Option<(u32, u32)>) -> Command {
    if let Some((uid, gid)) = account {
        command.uid(uid).gid(gid).env("HOME", "/tmp");
    }
    command
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether a test that needs PostgreSQL must fail rather than skip: in CI, where the
/// suite installs it, a missing server is a broken set-up, not a reason to skip.
pub fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// For a test: a server, or `None` after saying why there is none here.
pub fn start_or_skip(test: &str) -> Option<TestPostgres> {
    if let Some(why) = TestPostgres::unavailable() {
        assert!(!required(), "{test}: {why}, and CI=true requires it");
        eprintln!("skipped {test}: {why}");
        return None;
    }
    match TestPostgres::start() {
        Ok(pg) => Some(pg),
        Err(e) => panic!("{test}: could not start PostgreSQL: {e:#}"),
    }
}
