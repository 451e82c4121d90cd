//! `/install/{token}`, the one route of kenny a PC reaches without any credential but
//! the link. `GET` shows a page (what the link is for and the command to run) and uses
//! nothing; `POST` uses the link and answers with the install script, or with a
//! refusal that a shell prints.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;

use super::script::{Bundle, SignedBuild, refusal};
use super::{TargetOs, command};
use crate::principal::Principal;
use crate::secrets;
use crate::state::{Fleet, Site};
use crate::store::{InstallLinkRow, LinkRefusal};
use crate::updates::releases;

fn refusal_reason(refused: &LinkRefusal) -> String {
    match refused {
        LinkRefusal::Unknown => {
            "this install link does not exist (mistyped, or not made by this server); ask for a new one".into()
        }
        LinkRefusal::Used { at } => {
            format!("this install link was already used, at {at}; each link works once: ask for a new one")
        }
        LinkRefusal::Revoked { at } => format!("this install link was revoked at {at}; ask for a new one"),
        LinkRefusal::Expired { at } => format!("this install link expired at {at}; ask for a new one"),
    }
}

fn refusal_status(refused: &LinkRefusal) -> StatusCode {
    match refused {
        LinkRefusal::Unknown => StatusCode::NOT_FOUND,
        _ => StatusCode::GONE,
    }
}

/// What a token opens now: the link, its OS and the time it was judged at, or why not.
enum Looked {
    Usable(InstallLinkRow, TargetOs, String),
    Refused(LinkRefusal),
    Failed(Response),
}

async fn look(fleet: &Fleet, token: &str) -> Looked {
    let hash = secrets::token_hash(token);
    let row = match fleet.store.blocking(move |s| s.install_link_by_token(&hash)).await {
        Ok(row) => row,
        Err(e) => return Looked::Failed(internal(&e.to_string())),
    };
    let now = fleet.clock.now();
    let Some(row) = row else {
        return Looked::Refused(LinkRefusal::Unknown);
    };
    if let Some(refused) = row.refusal(&now) {
        return Looked::Refused(refused);
    }
    match TargetOs::parse(&row.os) {
        Ok(os) => Looked::Usable(row, os, now),
        Err(_) => Looked::Failed(internal("the link names an OS this server has no script for")),
    }
}

/// `GET /install/{token}`: a page for a person (or a chat app's preview); uses nothing.
pub(crate) async fn show(State(fleet): State<Fleet>, State(site): State<Site>, Path(token): Path<String>) -> Response {
    let (row, os) = match look(&fleet, &token).await {
        Looked::Usable(row, os, _) => (row, os),
        Looked::Failed(response) => return response,
        Looked::Refused(refused) => {
            let body = html! {
                div.card {
                    h1 { "Install link refused" }
                    p.error { (refusal_reason(&refused)) }
                }
            };
            return (refusal_status(&refused), crate::web::html::page("Install link", body)).into_response();
        }
    };
    let url = format!("{}/install/{token}", site.base_url.trim_end_matches('/'));
    let (who, how) = match os {
        TargetOs::Linux => ("Linux", "in a terminal (it asks for sudo)"),
        TargetOs::Windows => ("Windows", "in PowerShell started as Administrator"),
    };
    let body = html! {
        div.card {
            h1 { "Install kenny on " (row.agent_id) }
            p { "On the " (who) " PC that should become " strong { (row.agent_id) } ", run this " (how) ":" }
            pre { code { (command(os, &url)) } }
            p.muted {
                "The link works once, until " (row.expires_at) ". Opening this page used nothing. "
                "Whoever runs it enrolls that PC as " (row.agent_id) ", so keep it to yourself."
            }
        }
    };
    crate::web::html::page("Install kenny", body).into_response()
}

/// `POST /install/{token}`: uses the link and answers with the script.
pub(crate) async fn redeem(
    State(fleet): State<Fleet>,
    State(site): State<Site>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(token): Path<String>,
) -> Response {
    // A web page cannot spend someone's link from their browser.
    if !crate::guard::same_origin(&site.base_url, &headers) {
        return script_response(
            StatusCode::FORBIDDEN,
            refusal("install links are used from a shell on the PC, not from another web site"),
        );
    }
    let (row, os, now) = match look(&fleet, &token).await {
        Looked::Usable(row, os, now) => (row, os, now),
        Looked::Failed(response) => return response,
        Looked::Refused(refused) => {
            return script_response(refusal_status(&refused), refusal(&refusal_reason(&refused)));
        }
    };
    let hash = secrets::token_hash(&token);
    // The builds are found before the link is spent: without one there is nothing to
    // install, and the link stays good for when a build is added.
    let builds = match signed_builds(&site, &row.agent_id, os, &now).await {
        Ok(b) if !b.is_empty() => b,
        Ok(_) => {
            return script_response(
                StatusCode::SERVICE_UNAVAILABLE,
                refusal(&format!(
                    "this server has no {} agent build to install; the link is still good: add a build with 'kenny-server releases add' and run the command again",
                    os.as_str()
                )),
            );
        }
        Err(e) => return internal(&format!("reading the agent builds failed: {e}")),
    };
    let enroll_token = secrets::new_token(secrets::AGENT_TOKEN_PREFIX);
    let agent_hash = secrets::token_hash(&enroll_token);
    let (from, at) = (peer.ip().to_string(), now.clone());
    let redeemed = match fleet
        .store
        .blocking(move |s| s.redeem_install_link(&hash, &agent_hash, &from, &at))
        .await
    {
        Ok(Ok(r)) => r,
        // Used or revoked between the look and the use: the transaction decides.
        Ok(Err(refused)) => return script_response(refusal_status(&refused), refusal(&refusal_reason(&refused))),
        Err(e) => return internal(&e.to_string()),
    };
    let who = Principal {
        client_addr: Some(peer.ip().to_string()),
        ..Principal::server(format!(
            "install link {} made by {}",
            redeemed.link_id, redeemed.created_by
        ))
    };
    let action = if redeemed.replaced_existing {
        "install link used (the PC's old key was forgotten)"
    } else {
        "install link used (new PC)"
    };
    let mut row = crate::forward::audit_row(&fleet.clock, &who, action, None);
    row.agent_id = Some(redeemed.agent_id.clone());
    row.target = Some(format!("/install/{}", redeemed.link_id));
    fleet.audit.record(row).await;
    tracing::info!(agent = %redeemed.agent_id, link = redeemed.link_id, from = %peer.ip(), "install link used");
    let script = Bundle {
        server: &site.base_url,
        agent_id: &redeemed.agent_id,
        server_key: &site.server_key,
        enroll_token: &enroll_token,
        builds: &builds,
        made_at: &now,
    }
    .render(os);
    script_response(StatusCode::OK, script)
}

async fn signed_builds(site: &Site, agent_id: &str, os: TargetOs, now: &str) -> std::io::Result<Vec<SignedBuild>> {
    let dir = releases::dir(&site.config.data_dir);
    let (key, agent_id, now) = (site.server_key.clone(), agent_id.to_owned(), now.to_owned());
    tokio::task::spawn_blocking(move || {
        releases::newest_per_arch(&dir, os.as_str())
            .into_iter()
            .map(|build| {
                let (size, sha256) = releases::size_and_sha256(&build.path)?;
                // Hashed as it is now: the script checks the size read with the hash.
                let build = releases::Build { size, ..build };
                Ok(SignedBuild::sign(&key, &agent_id, &build, sha256, &now))
            })
            .collect()
    })
    .await
    .map_err(std::io::Error::other)?
}

fn script_response(status: StatusCode, text: String) -> Response {
    let mut response = (status, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn internal(detail: &str) -> Response {
    tracing::error!(error = %detail, "install link failed");
    script_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        refusal("the server failed to answer this install link; see the server log, then try again"),
    )
}
