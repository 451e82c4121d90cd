//! `alert_silence_set`, `alert_silence_list`, `alert_silence_clear`: the MCP face of
//! [`crate::alerts::silences`]. A change is audited like a forwarded call.

use serde_json::{Value, json};

use super::{ALERT_SILENCE_CLEAR, ALERT_SILENCE_SET};
use crate::alerts::silences::{self, SilenceRequest};
use crate::forward::CallFailure;
use crate::principal::Principal;
use crate::state::Fleet;
use kenny_proto::server_args::{AlertSilenceClearArgs, AlertSilenceListArgs, AlertSilenceSetArgs};

pub(super) async fn set(fleet: &Fleet, who: &Principal, a: AlertSilenceSetArgs) -> Result<Value, CallFailure> {
    let row = silences::set(
        fleet,
        who,
        SilenceRequest {
            agent_id: &a.agent_id,
            section: a.section.as_deref(),
            duration: &a.duration,
            reason: &a.reason,
        },
    )
    .await?;
    fleet.forwarder.audit_served(who, &a.agent_id, ALERT_SILENCE_SET).await;
    Ok(json!({ "silence": silences::shown(&row) }))
}

pub(super) async fn list(fleet: &Fleet, who: &Principal, a: AlertSilenceListArgs) -> Result<Value, CallFailure> {
    let rows = silences::list(fleet, who, a.agent_id.as_deref()).await?;
    Ok(json!({ "silences": rows.iter().map(silences::shown).collect::<Vec<_>>() }))
}

pub(super) async fn clear(fleet: &Fleet, who: &Principal, a: AlertSilenceClearArgs) -> Result<Value, CallFailure> {
    let ended = silences::clear(fleet, who, &a.agent_id, a.section.as_deref()).await?;
    fleet
        .forwarder
        .audit_served(who, &a.agent_id, ALERT_SILENCE_CLEAR)
        .await;
    Ok(json!({ "silences": ended.iter().map(silences::shown).collect::<Vec<_>>() }))
}
