//! Windows: the agent as a service under the Service Control Manager. The SCM starts
//! `kenny-agent service --config ...`; this reports the service running, turns the
//! SCM's stop and shutdown requests into the agent's own shutdown, and exits non-zero
//! on failure so the restart actions set by `install` apply.
//!
//! Windows-only and therefore not compiled on the Linux machines kenny is built and
//! tested on; everything it needs from the rest of the agent is shared code.

use std::ffi::OsString;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::anyhow;
use tokio_util::sync::CancellationToken;
use windows_service::service::{
    ServiceControl, ServiceControlAccept, ServiceExitCode, ServiceState, ServiceStatus, ServiceType,
};
use windows_service::service_control_handler::{self, ServiceControlHandlerResult};
use windows_service::{define_windows_service, service_dispatcher};

use crate::AgentConfig;
use crate::service::SERVICE_NAME;

static CONFIG: OnceLock<AgentConfig> = OnceLock::new();

define_windows_service!(ffi_service_main, service_main);

/// Hands the process to the SCM; returns when the service has stopped.
pub fn run_as_service(config: AgentConfig) -> anyhow::Result<()> {
    CONFIG
        .set(config)
        .map_err(|_| anyhow!("the service was started twice"))?;
    service_dispatcher::start(SERVICE_NAME, ffi_service_main)
        .map_err(|e| anyhow!("not started by the Windows service manager ({e}); use `kenny-agent run` from a console"))
}

fn service_main(_arguments: Vec<OsString>) {
    if let Err(e) = serve() {
        tracing::error!(error = %format!("{e:#}"), "agent service stopped with an error");
    }
}

fn serve() -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let handler = move |control| match control {
        ServiceControl::Stop | ServiceControl::Shutdown => {
            stop.cancel();
            ServiceControlHandlerResult::NoError
        }
        ServiceControl::Interrogate => ServiceControlHandlerResult::NoError,
        _ => ServiceControlHandlerResult::NotImplemented,
    };
    let status = service_control_handler::register(SERVICE_NAME, handler)?;
    let report = |state: ServiceState, accepts: ServiceControlAccept, code: u32| {
        status.set_service_status(ServiceStatus {
            service_type: ServiceType::OWN_PROCESS,
            current_state: state,
            controls_accepted: accepts,
            exit_code: ServiceExitCode::Win32(code),
            checkpoint: 0,
            wait_hint: Duration::default(),
            process_id: None,
        })
    };
    report(
        ServiceState::Running,
        ServiceControlAccept::STOP | ServiceControlAccept::SHUTDOWN,
        0,
    )?;
    let config = CONFIG.get().cloned().ok_or_else(|| anyhow!("no agent settings"))?;
    let result = tokio::runtime::Runtime::new()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(crate::run(config, shutdown)));
    // A non-zero code marks a failure, which is what makes the SCM restart the service.
    report(
        ServiceState::Stopped,
        ServiceControlAccept::empty(),
        if result.is_ok() { 0 } else { 1 },
    )?;
    result
}
