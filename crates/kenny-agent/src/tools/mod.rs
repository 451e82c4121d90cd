//! Tool execution: looks a call up in the shared catalog, checks that this OS supports
//! it and that its arguments fit the tool's argument type, decodes them into a
//! [`ToolCall`] once, then runs the handler with the agent's [`ToolContext`] (where
//! the tools act).

mod accounts;
mod autostart;
mod bounded;
mod context;
mod diag;
mod eventlog;
mod fs;
mod net;
mod netctl;
mod netinfo;
mod netprobe;
mod packages;
mod process;
mod psjson;
mod remotehelp;
mod screen;
mod services;
mod shell;
mod systemd;
mod telemetry;
pub mod update;
mod webfilter;
mod winsession;

use kenny_proto::args::NoArgs;
use kenny_proto::catalog::{self, Os, Tool, ToolCall};
use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value};

pub use context::ToolContext;
/// The install plan quotes paths for PowerShell the same way the tools do.
pub(crate) use shell::{powershell_encoded_args, powershell_literal};
pub use telemetry::collect as collect_telemetry;

/// A failed call as the agent reports it on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
        }
    }

    pub fn bad_args(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadArgs, message)
    }

    pub fn exec_failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ExecFailed, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// Maps an I/O error on `path` to the code a caller can act on.
    pub fn io(path: &str, err: &std::io::Error) -> Self {
        match err.kind() {
            std::io::ErrorKind::NotFound => Self::not_found(format!("{path}: no such file or directory")),
            std::io::ErrorKind::PermissionDenied => {
                Self::exec_failed(format!("{path}: permission denied for the agent's account"))
            }
            _ => Self::exec_failed(format!("{path}: {err}")),
        }
    }
}

pub type ToolResult = Result<Value, ToolError>;

const HANDLER_SLACK: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs one call. Never panics on bad input: every problem becomes a `ToolError`.
pub async fn execute(tool: &str, args: Map<String, Value>) -> ToolResult {
    execute_with(
        tool,
        args,
        &crate::guard::OperatorRules::default(),
        &ToolContext::default(),
    )
    .await
}

/// Runs one call under the operator's rules as well as the built-in guard.
pub async fn execute_with(
    tool: &str,
    args: Map<String, Value>,
    operator: &crate::guard::OperatorRules,
    ctx: &ToolContext,
) -> ToolResult {
    let Some(spec) = catalog::find(tool) else {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "this agent (kenny-agent {}) has no tool named `{tool}`",
                env!("CARGO_PKG_VERSION")
            ),
        ));
    };
    let os = Os::current();
    if !os.is_some_and(|os| spec.supports(os)) {
        let on: Vec<_> = spec.platforms.iter().map(|o| o.as_str()).collect();
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "{tool} is not available on {}: it runs on {}{}{}",
                std::env::consts::OS,
                on.join(", "),
                why_not_here(tool).map(|w| format!(" ({w})")).unwrap_or_default(),
                alternative(tool)
                    .map(|a| format!("; use {a} here instead"))
                    .unwrap_or_default()
            ),
        ));
    }
    // An update order is built by the server, not typed by a caller: its handler decodes
    // and verifies it strictly instead.
    // A server that speaks the existing kenny's argument names is understood too.
    let mut args = args;
    if !spec.args_built_by_server() {
        spec.normalize_args(&mut args).map_err(ToolError::bad_args)?;
        // Decoding follows below, once, into the handler's type.
        spec.check_args(&args).map_err(ToolError::bad_args)?;
    }
    crate::guard::check_all(tool, &args, operator).map_err(|b| ToolError::new(ErrorCode::Blocked, b.message()))?;
    // Every handler answers within the call's limit, however many steps it takes
    // (package installs chain several): dropping it kills the programs it started. A
    // moment's slack lets a handler with its own timeout (shell_exec) report it first.
    let limit = spec.work_limit(&args);
    let call = ToolCall::decode(spec.tool, &args).map_err(|e| undecodable(spec.tool, &e))?;
    match tokio::time::timeout(limit + HANDLER_SLACK, dispatch(call, ctx)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{tool} did not finish within {}s and was stopped; programs it started were killed",
                limit.as_secs()
            ),
        )),
    }
}

/// One arm per catalog tool and no wildcard: a tool added to the catalog
/// (`kenny_proto::catalog`, which generates [`ToolCall`]) without a handler here is a
/// compile error (E0004, non-exhaustive patterns), not an `unsupported` answer found
/// at run time. Each handler gets its tool's typed arguments.
async fn dispatch(call: ToolCall, ctx: &ToolContext) -> ToolResult {
    match call {
        ToolCall::ShellExec(args) => shell::shell_exec(args).await,
        ToolCall::PowershellExec(args) => shell::powershell_exec(args).await,
        ToolCall::FsList(args) => fs::list(args).await,
        ToolCall::FsRead(args) => fs::read(args).await,
        ToolCall::FsSearch(args) => fs::search(args).await,
        ToolCall::FsDiskUsage(args) => fs::disk_usage(args).await,
        ToolCall::DiagProcesses(args) => diag::processes(args).await,
        ToolCall::DiagServices(args) => services::list(args).await,
        ToolCall::DiagEventlog(args) => eventlog::query(args, ctx).await,
        ToolCall::DiagAutostart(NoArgs {}) => autostart::list(ctx).await,
        ToolCall::NetConfig(NoArgs {}) => net::config().await,
        ToolCall::NetDnsFlush(NoArgs {}) => netctl::dns_flush().await,
        ToolCall::NetAdapterReset(args) => netctl::adapter_reset(args, ctx).await,
        ToolCall::NetPing(args) => netprobe::ping(args).await,
        ToolCall::NetDnsLookup(args) => netprobe::dns_lookup(args).await,
        ToolCall::NetPortCheck(args) => netprobe::port_check(args).await,
        ToolCall::ScreenCapture(args) => screen::capture(args).await,
        ToolCall::WingetList(args) => packages::list(args).await,
        ToolCall::WingetInstall(args) => packages::install(args).await,
        ToolCall::WingetUninstall(args) => packages::uninstall(args).await,
        ToolCall::WingetUpdate(args) => packages::update(args).await,
        ToolCall::WebfilterStatus(NoArgs {}) => webfilter::status(ctx).await,
        ToolCall::WebfilterApply(args) => webfilter::apply(args, ctx).await,
        ToolCall::WebfilterClear(NoArgs {}) => webfilter::clear(ctx).await,
        ToolCall::RemotehelpStatus(NoArgs {}) => remotehelp::status().await,
        ToolCall::RemotehelpStart(NoArgs {}) => remotehelp::start().await,
        ToolCall::RemotehelpStop(NoArgs {}) => remotehelp::stop().await,
        ToolCall::TelemetryCollect(args) => telemetry::collect_tool(args).await,
        ToolCall::AgentUpdate(order) => update::update(order, ctx).await,
        ToolCall::AccountCreate(args) => accounts::create(args).await,
        ToolCall::AccountDelete(args) => accounts::delete(args).await,
        ToolCall::AccountSetEnabled(args) => accounts::set_enabled(args).await,
        ToolCall::AccountSetAdmin(args) => accounts::set_admin(args).await,
        ToolCall::AccountSetLogonRights(args) => accounts::set_logon_rights(args).await,
        ToolCall::AccountSessionAction(args) => accounts::session_action(args).await,
        ToolCall::PasswordPolicySet(args) => accounts::password_policy(args).await,
    }
}

/// Arguments that passed the checks above and still do not decode: only a server that
/// builds them wrongly (or an update order not built by a signing server) gets here.
fn undecodable(tool: Tool, e: &serde_json::Error) -> ToolError {
    match tool {
        Tool::AgentUpdate => update::malformed_order(e),
        _ => ToolError::bad_args(format!("the arguments of {tool} do not fit: {e}")),
    }
}

fn why_not_here(tool: &str) -> Option<&'static str> {
    tool.starts_with("remotehelp_")
        .then_some("it drives Quick Assist, which exists only on Windows; on other PCs ask the person to start their own screen-sharing tool")
}

fn alternative(tool: &str) -> Option<&'static str> {
    match tool {
        "shell_exec" => Some("powershell_exec"),
        "powershell_exec" => Some("shell_exec"),
        _ => None,
    }
}

/// Test helper: a JSON object literal decoded as a tool's typed arguments.
#[cfg(test)]
pub(crate) fn typed<T: serde::de::DeserializeOwned>(value: Value) -> T {
    match serde_json::from_value(value) {
        Ok(args) => args,
        Err(e) => panic!("test args do not decode: {e}"),
    }
}

#[cfg(all(test, unix))]
mod limit_tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn every_call_answers_within_its_limit() {
        // shell_exec has a timeout of its own; its more detailed message wins the race
        // against the general limit.
        let started = std::time::Instant::now();
        let err = execute("shell_exec", typed(json!({"command": "sleep 30", "timeout_s": 1})))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::Timeout);
        assert!(err.message.contains("command exceeded 1s"), "{err:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let spec = catalog::find("winget_install").unwrap();
        assert_eq!(spec.work_limit(&Map::new()).as_secs(), spec.default_timeout_s);
        let shell = catalog::find("shell_exec").unwrap();
        assert_eq!(shell.work_limit(&typed(json!({"timeout_s": 7}))).as_secs(), 7);
    }
}
