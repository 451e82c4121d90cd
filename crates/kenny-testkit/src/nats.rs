//! A throwaway NATS server with JetStream, for clusters of kenny replicas in tests and
//! benchmarks: Debian's `nats-server` on 127.0.0.1 at a free port, its store in a
//! temporary directory, stopped by its PID when dropped.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const READY_WITHIN: Duration = Duration::from_secs(15);

pub struct TestNats {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl TestNats {
    /// Why a NATS server cannot be started here, if it cannot.
    pub fn unavailable() -> Option<String> {
        binary()
            .is_none()
            .then(|| "nats-server is not installed (Debian: apt-get install nats-server)".to_owned())
    }

    pub fn start() -> anyhow::Result<TestNats> {
        let exe = binary().context("nats-server is not installed (Debian: apt-get install nats-server)")?;
        let dir = tempfile::Builder::new().prefix("kenny-nats").tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let conf = dir.path().join("nats.conf");
        // A relayed result may be as large as an agent frame (8 MiB) plus its envelope.
        std::fs::write(
            &conf,
            format!(
                "listen: \"127.0.0.1:{port}\"\nmax_payload: 16MB\njetstream {{ store_dir: \"{}\", max_memory_store: 256MB, max_file_store: 256MB }}\n",
                dir.path().join("js").display()
            ),
        )?;
        let child = Command::new(exe)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting nats-server")?;
        let nats = TestNats { child, port, _dir: dir };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > READY_WITHIN {
                bail!("nats-server did not listen within {}s", READY_WITHIN.as_secs());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nats)
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for TestNats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("nats-server"));
    on_path
        .chain([PathBuf::from("/usr/sbin/nats-server")])
        .find(|p| p.is_file())
}
