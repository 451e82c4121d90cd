//! `/mcp`: the MCP endpoint, served statelessly through the official SDK (`rmcp`).
//! This is the only module that knows rmcp; it turns MCP calls into fleet listings
//! and forwarded calls, and their outcomes into tool results.

mod approval;
mod results;
mod target;
mod tools;

use std::sync::Arc;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use crate::forward::CallFailure;
use crate::principal::Principal;
use crate::state::Fleet;
pub(crate) use approval::{failure_result, run_approved};
use kenny_proto::error::ErrorCode;
use target::take_target;
pub(crate) use tools::SELECT_AGENT;

const INSTRUCTIONS: &str = "kenny runs administration tools on the PCs of a small fleet. \
Every tool that acts on a PC takes a required `agent_id`; call list_agents to see the ids and which PCs are online. \
Nothing is remembered between calls: select_agent only checks that an id exists and is online, it does not set a default. \
A call that changes a PC may wait for a person's approval: it then answers awaiting_approval with an approval id, and approval_status tells where it stands; do not repeat the call.";

#[derive(Clone)]
pub(crate) struct KennyMcp {
    fleet: Fleet,
    tools: Arc<Vec<Tool>>,
}

/// The tower service mounted at `/mcp` (behind [`crate::guard::require_bearer`]),
/// answering for the hosts `public_url` allows.
pub(crate) fn service(fleet: Fleet, public_url: Option<&str>) -> StreamableHttpService<KennyMcp, NeverSessionManager> {
    let handler = KennyMcp {
        tools: Arc::new(tools::all()),
        fleet,
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(crate::config::allowed_hosts(public_url));
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

impl ServerHandler for KennyMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kenny", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let Some(who) = principal(&context) else {
            // The guard in front of /mcp makes this unreachable; fail closed anyway.
            return Ok(results::failure(&CallFailure::new(ErrorCode::Forbidden, "no authenticated principal")).into());
        };
        let args = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        if !self.tools.iter().any(|t| t.name == name) {
            return Err(self.unknown_tool(&who, name, &args).await);
        }
        // The answer to an elicitation about a held call, whatever the rules say now.
        if let Some(id) = request.request_state.as_deref() {
            return Ok(approval::answer(&self.fleet, &who, name, args, id, request.input_responses).await);
        }
        let rule = match approval::changes_state(name) {
            true => crate::approvals::required(&self.fleet, &who).await,
            false => Ok(None),
        };
        match rule {
            Ok(None) => {}
            Ok(Some(elicitation_allowed)) => {
                let elicit = elicitation_allowed && approval::can_elicit(&context);
                return Ok(approval::hold(&self.fleet, &who, name, args, elicit).await);
            }
            Err(failure) => return Ok(results::failure(&failure).into()),
        }
        Ok(self.dispatch(&who, name, args).await.into())
    }
}

impl KennyMcp {
    /// One call as `who` makes it, free to run: a server tool, `select_agent`, or a
    /// call forwarded to the PC its `agent_id` names.
    async fn dispatch(&self, who: &Principal, name: &str, mut args: serde_json::Map<String, Value>) -> CallToolResult {
        if let Some(outcome) = crate::server_tools::call(&self.fleet, who, name, args.clone()).await {
            return results::outcome(outcome);
        }
        match name {
            tools::SELECT_AGENT => self.select_agent(who, args).await,
            name => match take_target(&mut args) {
                Ok(target) => {
                    let forwarded = self.fleet.forwarder.forward_proved(who, &target, name, args).await;
                    results::proved(forwarded, target.as_str())
                }
                Err(failure) => {
                    self.fleet
                        .forwarder
                        .audit_refusal(who, None, name, &args, &failure)
                        .await;
                    self.fleet.metrics.call(name, "refused", std::time::Duration::ZERO);
                    results::failure(&failure)
                }
            },
        }
    }

    /// A name not in tools/list gets the protocol's answer (invalid params, naming the
    /// tool) before anything reads the arguments, so an `agent_id` that is unknown,
    /// offline or out of the caller's reach neither changes the answer nor learns
    /// anything about that PC. The refusal is still audited and counted (as `other`).
    async fn unknown_tool(
        &self,
        who: &Principal,
        name: &str,
        args: &serde_json::Map<String, Value>,
    ) -> rmcp::ErrorData {
        let message =
            format!("unknown tool {name:?}: kenny has no tool by that name; tools/list shows the tools it has");
        let failure = CallFailure::refusal(ErrorCode::Unsupported, message.clone());
        self.fleet
            .forwarder
            .audit_refusal(who, None, name, args, &failure)
            .await;
        self.fleet.metrics.call(name, "refused", std::time::Duration::ZERO);
        rmcp::ErrorData::invalid_params(message, Some(json!({ "tool": name })))
    }

    /// Advisory only: reports on the id and changes nothing anywhere.
    async fn select_agent(&self, who: &Principal, mut args: serde_json::Map<String, Value>) -> CallToolResult {
        let agent_id = match take_target(&mut args) {
            Ok(id) => id.into_string(),
            Err(f) => return results::failure(&f),
        };
        if let Err(f) = self.fleet.forwarder.check_reach(who, &agent_id) {
            self.fleet
                .forwarder
                .audit_refusal(who, Some(agent_id), tools::SELECT_AGENT, &args, &f)
                .await;
            return results::failure(&f);
        }
        if let Some(meta) = self.fleet.registry.online_meta(&agent_id) {
            return results::success(json!({
                "agent_id": agent_id,
                "online": true,
                "hostname": meta.as_ref().map(|m| m.hostname.clone()),
                "os": meta.as_ref().map(|m| m.os.clone()),
                "note": "select_agent sets nothing: pass agent_id on every call.",
            }));
        }
        let failure = self.fleet.forwarder.not_connected(&agent_id).await;
        if failure.code == ErrorCode::Offline.as_str() {
            results::success(json!({
                "agent_id": agent_id,
                "online": false,
                "note": failure.message,
            }))
        } else {
            results::failure(&failure)
        }
    }
}

fn principal(context: &RequestContext<RoleServer>) -> Option<Principal> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
}
