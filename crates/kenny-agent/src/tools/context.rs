//! Where the tools act, decided once when the agent starts and handed to every call:
//! the system's own files and namespaces, or the stand-ins a test names, and for
//! `agent_update` whom this agent is and where a staged build waits for the tunnel.
//! Only the binaries read these from the environment ([`ToolContext::from_env`]); no
//! handler looks at an environment variable to decide where to write.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::update::{Staged, UpdateContext};

#[derive(Clone, Debug, Default)]
pub struct ToolContext {
    /// The hosts file the web filter edits; the system's when unset.
    pub hosts_file: Option<PathBuf>,
    /// What browser policy paths are rooted at; `/` when unset.
    pub policy_root: Option<PathBuf>,
    /// A syslog-format file `diag_eventlog` reads instead of the journal (tests, and
    /// PCs whose log is somewhere else).
    pub syslog_file: Option<PathBuf>,
    /// The network namespace `net_adapter_reset` works in (`ip -n NAME`: how the tests
    /// reset an adapter without touching the host); the agent's own when unset.
    pub netns: Option<String>,
    /// What `diag_autostart` treats as `/` when it looks for XDG autostart files, home
    /// directories and crontabs (tests); `/` when unset.
    pub autostart_root: Option<PathBuf>,
    /// Names the web filter must never block: the kenny server's own.
    pub protected_hosts: Vec<String>,
    /// Who this agent is to its server, for checking update orders; set by the tunnel
    /// before the first call. Without it `agent_update` refuses.
    pub update: Option<UpdateContext>,
    /// A build `agent_update` checked and wrote beside the running binary: the tunnel
    /// takes it after sending the answer and hands over to it. Shared by the clones of
    /// one context.
    pub(crate) staged: Arc<Mutex<Option<Staged>>>,
}

/// The environment variables a test sets to give the tools stand-ins.
pub(super) const HOSTS_FILE_ENV: &str = "KENNY_HOSTS_FILE";
pub(super) const POLICY_ROOT_ENV: &str = "KENNY_POLICY_ROOT";
pub(super) const SYSLOG_FILE_ENV: &str = "KENNY_SYSLOG_FILE";
pub(super) const NETNS_ENV: &str = "KENNY_NETNS";
pub(super) const AUTOSTART_ROOT_ENV: &str = "KENNY_AUTOSTART_ROOT";

impl ToolContext {
    /// The stand-ins named in this process's environment (empty values mean unset).
    pub fn from_env() -> ToolContext {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        ToolContext {
            hosts_file: var(HOSTS_FILE_ENV).map(PathBuf::from),
            policy_root: var(POLICY_ROOT_ENV).map(PathBuf::from),
            syslog_file: var(SYSLOG_FILE_ENV).map(PathBuf::from),
            netns: var(NETNS_ENV).and_then(|v| v.into_string().ok()),
            autostart_root: var(AUTOSTART_ROOT_ENV).map(PathBuf::from),
            ..ToolContext::default()
        }
    }

    pub(crate) fn stage(&self, build: Staged) {
        *self.staged.lock().unwrap_or_else(|e| e.into_inner()) = Some(build);
    }

    /// The build to hand over to, if a call just staged one.
    pub fn take_staged(&self) -> Option<Staged> {
        self.staged.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Keeps the host of the server this agent reports to out of any block list.
    pub fn protecting_server(mut self, server_url: &str) -> ToolContext {
        if let Some(name) = super::webfilter::server_host_name(server_url)
            && !self.protected_hosts.contains(&name)
        {
            self.protected_hosts.push(name);
        }
        self
    }

    pub(crate) fn policy_root(&self) -> PathBuf {
        self.policy_root.clone().unwrap_or_else(|| PathBuf::from("/"))
    }

    pub(crate) fn autostart_root(&self) -> PathBuf {
        self.autostart_root.clone().unwrap_or_else(|| PathBuf::from("/"))
    }
}
