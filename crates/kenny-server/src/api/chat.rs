//! `/api/chat`: the dashboard's conversations. A user sees and continues only their own
//! conversations; replies stream back as server-sent events (`text`, `tool_call`,
//! `tool_result`, `held`, `error`, `done`).

use std::convert::Infallible;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{ApiError, BodyShape, JsonBody, SignedIn};
use crate::chat::{Chat, ChatEvent, NO_KEY_MESSAGE, engine};
use crate::principal::Principal;
use crate::state::{Conversations, Fleet};
use crate::store::{ChatCall, ChatSession, call_status};

const MAX_MESSAGE_CHARS: usize = 20_000;
const NEW_TITLE: &str = "New conversation";

pub(super) async fn status(
    State(conversations): State<Conversations>,
    SignedIn(who): SignedIn,
) -> Result<Json<Value>, ApiError> {
    let settings = &conversations.chat.settings;
    let enabled = settings.api_key.is_some();
    let (user, day) = (who.user_id, conversations.clock.today());
    let used = conversations.store.blocking(move |s| s.chat_usage(user, &day)).await?;
    Ok(Json(json!({
        "enabled": enabled,
        "model": enabled.then(|| settings.model.clone()),
        "message": (!enabled).then_some(NO_KEY_MESSAGE),
        "usage": {
            "day": conversations.clock.today(),
            "tokens": used.tokens(),
            "turns": used.turns,
            "daily_limit": (settings.daily_tokens_per_user > 0).then_some(settings.daily_tokens_per_user),
        },
    })))
}

pub(super) async fn list(
    State(conversations): State<Conversations>,
    SignedIn(who): SignedIn,
) -> Result<Json<Value>, ApiError> {
    let user = who.user_id;
    let sessions = conversations.store.blocking(move |s| s.chat_sessions(user)).await?;
    Ok(Json(json!({ "sessions": sessions })))
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct NewSession {
    selected_agent: Option<String>,
}

impl BodyShape for NewSession {
    const SHAPE: &'static str = r#"{"selected_agent"?: "<agent id>"}"#;
}

pub(super) async fn create(
    State(conversations): State<Conversations>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<NewSession>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if let Some(agent) = &body.selected_agent {
        check_selectable(&conversations, &who, agent).await?;
    }
    let now = conversations.clock.now();
    let session = ChatSession {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: who.user_id,
        title: NEW_TITLE.into(),
        selected_agent: body.selected_agent,
        created_at: now.clone(),
        updated_at: now,
    };
    let stored = session.clone();
    conversations
        .store
        .blocking(move |s| s.create_chat_session(&stored))
        .await?;
    Ok((StatusCode::CREATED, Json(json!(session))))
}

pub(super) async fn show(
    State(conversations): State<Conversations>,
    SignedIn(who): SignedIn,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let session = own_session(&conversations, &who, &id).await?;
    let sid = session.id.clone();
    let (messages, calls) = conversations
        .store
        .blocking(move |s| Ok((s.chat_messages(&sid)?, s.chat_calls(&sid)?)))
        .await?;
    Ok(Json(json!({"session": session, "messages": messages, "calls": calls})))
}

pub(super) async fn delete(
    State(conversations): State<Conversations>,
    SignedIn(who): SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    // Whose it is comes first: someone else's conversation is "not found" whether or not
    // a reply is being written in it, and their request never touches its turn lock.
    let session = own_session(&conversations, &who, &id).await?;
    let user = who.user_id;
    let _turn = conversations.chat.try_lock(&session.id).ok_or_else(busy)?;
    if conversations
        .store
        .blocking(move |s| s.delete_chat_session(&id, user))
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Selection {
    agent_id: Option<String>,
}

impl BodyShape for Selection {
    const SHAPE: &'static str = r#"{"agent_id": "<agent id>" or null}"#;
}

/// Changes which PC the conversation works on from now on. Calls already proposed
/// (held ones included) keep the target they were frozen with.
pub(super) async fn select(
    State(conversations): State<Conversations>,
    SignedIn(who): SignedIn,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Selection>,
) -> Result<Json<Value>, ApiError> {
    let session = own_session(&conversations, &who, &id).await?;
    if let Some(agent) = &body.agent_id {
        check_selectable(&conversations, &who, agent).await?;
    }
    let now = conversations.clock.now();
    let (sid, title, agent) = (session.id.clone(), session.title.clone(), body.agent_id.clone());
    conversations
        .store
        .blocking(move |s| s.update_chat_session(&sid, &title, agent.as_deref(), &now))
        .await?;
    Ok(Json(json!({"id": session.id, "selected_agent": body.agent_id})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UserText {
    text: String,
}

impl BodyShape for UserText {
    const SHAPE: &'static str = r#"{"text": "..."}"#;
}

pub(super) async fn message(
    State(conversations): State<Conversations>,
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<UserText>,
) -> Result<Response, ApiError> {
    let text = body.text.trim().to_owned();
    if text.is_empty() || text.chars().count() > MAX_MESSAGE_CHARS {
        return Err(ApiError::bad_request(format!(
            "text must be 1 to {MAX_MESSAGE_CHARS} characters"
        )));
    }
    chat_enabled(&conversations.chat)?;
    let session = own_session(&conversations, &who, &id).await?;
    let turn = conversations.chat.try_lock(&session.id).ok_or_else(busy)?;
    // Checked before the message is stored, so a refused message leaves no trace.
    match engine::allowance_left(&conversations, &who).await {
        Ok(()) => {}
        Err(engine::EngineError::Model(e)) => {
            return Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.code, e.message));
        }
        Err(engine::EngineError::Store(e)) => return Err(e.into()),
    }
    let pending = held(&conversations, &session).await?;
    if !pending.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "held_calls",
            format!(
                "approve or deny the {} waiting call(s) in this conversation first",
                pending.len()
            ),
        ));
    }
    if session.title == NEW_TITLE {
        let title: String = text.chars().take(60).collect();
        let (sid, agent, now) = (
            session.id.clone(),
            session.selected_agent.clone(),
            conversations.clock.now(),
        );
        conversations
            .store
            .blocking(move |s| s.update_chat_session(&sid, &title, agent.as_deref(), &now))
            .await?;
    }
    Ok(stream(move |tx| async move {
        let _turn = turn;
        engine::user_message(&conversations, &fleet, &who, &session, &text, &tx).await;
    }))
}

/// `approve` or `deny` a held call.
pub(super) async fn decide(
    State(conversations): State<Conversations>,
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path((call_id, decision)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let approve = match decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "use .../approve or .../deny",
            ));
        }
    };
    let cid = call_id.clone();
    let call: ChatCall = conversations
        .store
        .blocking(move |s| s.chat_call(&cid))
        .await?
        .ok_or_else(not_found)?;
    let session = own_session(&conversations, &who, &call.session_id).await?;
    if approve {
        chat_enabled(&conversations.chat)?;
    }
    let turn = conversations.chat.try_lock(&session.id).ok_or_else(busy)?;
    if call.status != call_status::HELD {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("this call is no longer waiting (it is {})", call.status),
        ));
    }
    Ok(stream(move |tx| async move {
        let _turn = turn;
        engine::decide(&conversations, &fleet, &who, &session, call, approve, &tx).await;
    }))
}

/// Runs `work` on its own task (a browser that goes away does not cut a reply in half)
/// and streams its events.
fn stream<F, Fut>(work: F) -> Response
where
    F: FnOnce(mpsc::Sender<ChatEvent>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<ChatEvent>(256);
    tokio::spawn(work(tx));
    Sse::new(events(rx)).keep_alive(KeepAlive::default()).into_response()
}

fn events(rx: mpsc::Receiver<ChatEvent>) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(rx, |mut rx| async move {
        let event = rx.recv().await?;
        let mut value = serde_json::to_value(&event).unwrap_or(Value::Null);
        let name = value
            .as_object_mut()
            .and_then(|o| o.remove("event"))
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "message".into());
        Some((Ok(Event::default().event(name).data(value.to_string())), rx))
    })
}

async fn held(conversations: &Conversations, session: &ChatSession) -> Result<Vec<ChatCall>, ApiError> {
    let sid = session.id.clone();
    let calls = conversations.store.blocking(move |s| s.chat_calls(&sid)).await?;
    Ok(calls.into_iter().filter(|c| c.status == call_status::HELD).collect())
}

/// The conversation, if it is this user's; anyone else's looks the same as none.
async fn own_session(conversations: &Conversations, who: &Principal, id: &str) -> Result<ChatSession, ApiError> {
    let sid = id.to_owned();
    let session = conversations.store.blocking(move |s| s.chat_session(&sid)).await?;
    session.filter(|s| s.user_id == who.user_id).ok_or_else(not_found)
}

async fn check_selectable(conversations: &Conversations, who: &Principal, agent: &str) -> Result<(), ApiError> {
    let unknown = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_agent",
            format!("no PC named {agent} that you can reach; the fleet page lists yours"),
        )
    };
    if !who.may_reach(agent) {
        return Err(unknown());
    }
    let id = agent.to_owned();
    let known = conversations.store.blocking(move |s| s.agent(&id)).await?.is_some();
    if known { Ok(()) } else { Err(unknown()) }
}

fn chat_enabled(chat: &Chat) -> Result<(), ApiError> {
    if chat.settings.api_key.is_some() {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "chat_disabled",
            NO_KEY_MESSAGE,
        ))
    }
}

fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such conversation or call of yours",
    )
}

fn busy() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "busy",
        "a reply is still being written in this conversation; wait for it to finish",
    )
}
