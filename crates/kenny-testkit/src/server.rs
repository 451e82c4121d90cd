//! A real kenny server in this process: its own temporary data directory, a port on
//! 127.0.0.1 the OS picks, a superuser with a personal access token, and the clock the
//! server decides by.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use kenny_server::admin::{self, AgentEnrollment};
use kenny_server::clock::Clock;
use kenny_server::principal::Role;
use kenny_server::state::AppState;
use kenny_server::{RunningServer, ServeConfig};
use tokio_util::sync::CancellationToken;

use crate::{AgentOptions, Api, Browser, Mcp, TestAgent};

type Tweak = Box<dyn FnOnce(&mut ServeConfig) + Send>;

/// Settings for a [`TestServer`] before it starts.
#[derive(Default)]
pub struct TestServerBuilder {
    tweaks: Vec<Tweak>,
    without_users: bool,
}

impl TestServerBuilder {
    /// Changes the server's configuration (timeouts, OAuth lifetimes, chat) before start.
    pub fn configure(mut self, tweak: impl FnOnce(&mut ServeConfig) + Send + 'static) -> Self {
        self.tweaks.push(Box::new(tweak));
        self
    }

    /// Starts with no account at all, as a fresh install is before its first-run
    /// set-up (`/setup`). There is no superuser then, so [`TestServer::admin_token`]
    /// panics; [`TestServer::user`] still adds accounts.
    pub fn without_users(mut self) -> Self {
        self.without_users = true;
        self
    }

    pub async fn start(self) -> anyhow::Result<TestServer> {
        let dir = tempfile::tempdir().context("creating the server's data directory")?;
        let data_dir = dir.path().join("data");
        let listen = "127.0.0.1:0".parse().context("loopback address")?;
        let mut config = ServeConfig::new(listen, data_dir.clone());
        for tweak in self.tweaks {
            tweak(&mut config);
        }
        let admin_token = if self.without_users {
            None
        } else {
            let (token, _) = tokio::task::spawn_blocking(move || provision(&data_dir, "admin", Role::Superuser, &[]))
                .await
                .context("creating the superuser")??;
            Some(token)
        };
        let clock = Clock::system();
        let shutdown = CancellationToken::new();
        let running = kenny_server::server::start_with_clock(config, shutdown.clone(), clock.clone()).await?;
        Ok(TestServer {
            base_url: running.state.site.base_url.to_string(),
            state: running.state.clone(),
            running,
            _stop_on_drop: shutdown.clone().drop_guard(),
            shutdown,
            clock,
            admin_token,
            dir,
        })
    }
}

/// A user with a password and a personal access token, straight in the store.
fn provision(data_dir: &Path, name: &str, role: Role, hosts: &[String]) -> anyhow::Result<(String, i64)> {
    let store = kenny_server::store::Store::open(data_dir)?;
    let id = admin::add_user(&store, name, role, hosts, TestServer::PASSWORD)?;
    Ok((admin::create_token(&store, name, Some("testkit"))?, id))
}

/// The server, stopped when dropped.
pub struct TestServer {
    base_url: String,
    state: Arc<AppState>,
    running: RunningServer,
    shutdown: CancellationToken,
    _stop_on_drop: tokio_util::sync::DropGuard,
    clock: Clock,
    /// `None` for a server started [`TestServerBuilder::without_users`].
    admin_token: Option<String>,
    dir: tempfile::TempDir,
}

impl TestServer {
    /// Every user the kit creates has this password.
    pub const PASSWORD: &'static str = "testkit-password-0123";

    pub async fn start() -> anyhow::Result<TestServer> {
        TestServer::builder().start().await
    }

    pub fn builder() -> TestServerBuilder {
        TestServerBuilder::default()
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn ws_url(&self) -> String {
        format!("{}/agent/ws", self.base_url.replacen("http://", "ws://", 1))
    }

    /// The running server's state: its store, registry and settings.
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The clock the server decides by; [`Clock::advance`] moves it on.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn data_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    /// The superuser `admin`'s personal access token. Panics on a server started
    /// [`TestServerBuilder::without_users`], which has no `admin`.
    #[expect(
        clippy::expect_used,
        reason = "a test asking a server without users for its admin is wrong, and should stop saying so"
    )]
    pub fn admin_token(&self) -> &str {
        self.admin_token
            .as_deref()
            .expect("this server was started without users: there is no admin token")
    }

    pub fn api(&self, token: &str) -> Api {
        Api::new(&self.base_url, Some(token))
    }

    /// `/api` without credentials.
    pub fn anonymous(&self) -> Api {
        Api::new(&self.base_url, None)
    }

    /// A browser with no cookies yet.
    pub fn browser(&self) -> Browser {
        Browser::new(&self.base_url)
    }

    pub fn mcp(&self, token: &str) -> Mcp {
        Mcp::new(&self.base_url, token)
    }

    /// A new user (password [`TestServer::PASSWORD`]) and its personal access token.
    pub async fn user(&self, name: &str, role: Role, hosts: &[&str]) -> anyhow::Result<(i64, String)> {
        let id = self.person(name, role, hosts).await?;
        let (store, name) = (self.state.accounts.store.clone(), name.to_owned());
        let token = tokio::task::spawn_blocking(move || admin::create_token(&store, &name, Some("testkit"))).await??;
        Ok((id, token))
    }

    /// A new user with the kit's password and no token of their own, so that what lists
    /// their tokens shows only what a test made.
    pub async fn person(&self, name: &str, role: Role, hosts: &[&str]) -> anyhow::Result<i64> {
        let (store, name) = (self.state.accounts.store.clone(), name.to_owned());
        let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        tokio::task::spawn_blocking(move || admin::add_user(&store, &name, role, &hosts, TestServer::PASSWORD)).await?
    }

    /// Registers an agent as `kenny-server agent add` does.
    pub async fn enroll(&self, agent_id: &str) -> anyhow::Result<AgentEnrollment> {
        let (store, dir, id) = (self.state.fleet.store.clone(), self.data_dir(), agent_id.to_owned());
        tokio::task::spawn_blocking(move || admin::add_agent(&store, &dir, &id)).await?
    }

    /// An agent of kenny's dialect, registered, connected with mutual auth and online.
    pub async fn agent(&self, agent_id: &str) -> anyhow::Result<TestAgent> {
        self.agent_with(agent_id, AgentOptions::default()).await
    }

    /// An agent with its own `register` values (say, the existing kenny's).
    pub async fn agent_with(&self, agent_id: &str, options: AgentOptions) -> anyhow::Result<TestAgent> {
        let enrollment = self.enroll(agent_id).await?;
        let agent = TestAgent::enroll_and_connect(self, &enrollment, options).await?;
        self.wait_online(agent_id).await?;
        Ok(agent)
    }

    /// Waits (up to 10 s) until the registry holds a live link for `agent_id`.
    pub async fn wait_online(&self, agent_id: &str) -> anyhow::Result<()> {
        for _ in 0..1000 {
            if self.state.fleet.registry.get(agent_id).is_some() {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        anyhow::bail!("agent {agent_id} did not come online within 10 s")
    }

    /// Stops the server and waits until it has written everything it holds (audit
    /// rows included); the data directory stays until the returned guard is dropped,
    /// so a test can start another server on it.
    pub async fn stop(self) -> anyhow::Result<tempfile::TempDir> {
        let TestServer {
            state,
            running,
            shutdown,
            dir,
            ..
        } = self;
        shutdown.cancel();
        // Our handle on the state would keep its audit writer, and so the server, alive.
        drop(state);
        running.finished().await?;
        Ok(dir)
    }
}
