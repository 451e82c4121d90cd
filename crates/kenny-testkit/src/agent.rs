//! An agent driven by the test: it enrolls its key and logs in with mutual auth over a
//! real WebSocket exactly as kenny-agent does, answers the server's pings, and hands
//! each `request` to the test, which answers it as it likes.

use std::time::Duration;

use anyhow::{Context, bail};
use ed25519_dalek::SigningKey;
use futures_util::{SinkExt, StreamExt};
use kenny_proto::auth;
use kenny_proto::frame::{AgentMeta, Auth, Frame, Limits, Register, Request, Response, decode, encode};
use kenny_server::admin::AgentEnrollment;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::TestServer;

/// What the agent says of itself in `register`.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    pub protocol: String,
    pub meta: AgentMeta,
    /// Signs results with this key instead of the agent's own (a forged answer).
    pub result_key: Option<SigningKey>,
}

impl Default for AgentOptions {
    /// kenny's own agent on Linux.
    fn default() -> Self {
        AgentOptions {
            protocol: kenny_proto::AGENT_PROTOCOL.into(),
            result_key: None,
            meta: AgentMeta {
                hostname: "testkit-host".into(),
                os: "linux".into(),
                version: "0.0.0".into(),
                arch: Some("x86_64".into()),
                channel: None,
                dialect: Some(kenny_proto::dialect::CURRENT.into()),
            },
        }
    }
}

impl AgentOptions {
    /// kenny's agent of the protocol before signed results (0.17): it answers unsigned.
    pub fn unsigned() -> Self {
        AgentOptions {
            protocol: "0.17".into(),
            ..AgentOptions::default()
        }
    }

    /// An agent of the existing kenny on Windows: protocol 0.17, no dialect.
    pub fn existing_kenny_on_windows() -> Self {
        AgentOptions {
            protocol: "0.17".into(),
            result_key: None,
            meta: AgentMeta {
                hostname: "OLD-PC".into(),
                os: "windows".into(),
                version: "0.1.0".into(),
                arch: Some("x86_64".into()),
                channel: Some("stable".into()),
                dialect: None,
            },
        }
    }
}

/// A connected agent. Dropping it closes its connection.
pub struct TestAgent {
    pub agent_id: String,
    /// Kept so the same PC can log in again ([`TestAgent::reconnect`]).
    key: SigningKey,
    server_key: ed25519_dalek::VerifyingKey,
    options: AgentOptions,
    requests: mpsc::Receiver<Request>,
    others: mpsc::UnboundedReceiver<Frame>,
    outbox: mpsc::UnboundedSender<String>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Set when the server's challenge said it checks signed results.
    signer: Option<SigningKey>,
    /// Each request's tool and argument digest, by id, for signing its answer.
    asked: Asked,
}

type Asked = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, (String, String)>>>;

impl Drop for TestAgent {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl TestAgent {
    /// Enrolls a fresh key with the agent's token, then logs in.
    pub async fn enroll_and_connect(
        server: &TestServer,
        enrollment: &AgentEnrollment,
        options: AgentOptions,
    ) -> anyhow::Result<TestAgent> {
        let key = SigningKey::generate(&mut rand::rngs::OsRng);
        let reply = server
            .anonymous()
            .with_token(&enrollment.token)
            .post(
                &format!("/api/agents/{}/enroll", enrollment.agent_id),
                serde_json::json!({"public_key": auth::encode_b64(key.verifying_key().as_bytes())}),
            )
            .await?;
        anyhow::ensure!(reply.status == 200, "enrolling {}: {reply:?}", enrollment.agent_id);
        let server_key = auth::parse_public_key(&enrollment.server_pubkey)?;
        Self::connect(&server.ws_url(), &enrollment.agent_id, &key, &server_key, options).await
    }

    /// Logs in with an enrolled key: `register`, check the server's signature, `auth`.
    pub async fn connect(
        ws_url: &str,
        agent_id: &str,
        key: &SigningKey,
        server_key: &ed25519_dalek::VerifyingKey,
        options: AgentOptions,
    ) -> anyhow::Result<TestAgent> {
        // Small buffers: the benchmark holds thousands of these.
        let config = WebSocketConfig::default().read_buffer_size(4096).write_buffer_size(0);
        let (mut ws, _) = tokio_tungstenite::connect_async_with_config(ws_url, Some(config), true)
            .await
            .with_context(|| format!("connecting to {ws_url}"))?;
        let client_nonce = kenny_server::secrets::random_nonce();
        let register = Frame::Register(Register {
            agent_id: agent_id.to_owned(),
            token: None,
            protocol: Some(options.protocol.clone()),
            client_nonce: Some(auth::encode_b64(&client_nonce)),
            meta: Some(options.meta.clone()),
        });
        ws.send(Message::text(encode(&register))).await?;
        let text = match ws.next().await {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(frame))) => bail!("{agent_id}: the server closed the connection: {frame:?}"),
            other => bail!("{agent_id}: no challenge ({other:?})"),
        };
        let Frame::Challenge(challenge) = decode(text.as_str(), Limits::HANDSHAKE)? else {
            bail!("{agent_id}: expected a challenge, got {text}")
        };
        let server_nonce: [u8; 32] = auth::decode_fixed("server_nonce", &challenge.server_nonce)?;
        let transcript = auth::transcript(agent_id, &client_nonce, &server_nonce);
        auth::verify(server_key, &transcript, &challenge.server_sig)?;
        let proof = Frame::Auth(Auth {
            agent_sig: auth::sign(key, &transcript),
        });
        ws.send(Message::text(encode(&proof))).await?;

        let signer = challenge
            .protocol
            .as_deref()
            .is_some_and(kenny_proto::proof::signs_results)
            .then(|| options.result_key.clone().unwrap_or_else(|| key.clone()));
        let asked = Asked::default();
        let (mut sink, mut stream) = ws.split();
        let (outbox, mut to_send) = mpsc::unbounded_channel::<String>();
        let (request_tx, requests) = mpsc::channel(64);
        let (other_tx, others) = mpsc::unbounded_channel();
        let writer = tokio::spawn(async move {
            while let Some(text) = to_send.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    return;
                }
            }
        });
        let pong = outbox.clone();
        let remember = (signer.is_some()).then(|| asked.clone());
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Text(text) = message else { continue };
                match decode(text.as_str(), Limits::AUTHENTICATED) {
                    Ok(Frame::Ping {}) => {
                        let _ = pong.send(encode(&Frame::Pong));
                    }
                    Ok(Frame::Request(request)) => {
                        if let Some(asked) = &remember {
                            let digest = kenny_proto::proof::args_digest(&request.args);
                            let mut asked = asked.lock().unwrap_or_else(|p| p.into_inner());
                            asked.insert(request.id.clone(), (request.tool.clone(), digest));
                        }
                        if request_tx.send(request).await.is_err() {
                            return;
                        }
                    }
                    Ok(other) => {
                        let _ = other_tx.send(other);
                    }
                    Err(_) => {}
                }
            }
        });
        Ok(TestAgent {
            agent_id: agent_id.to_owned(),
            key: key.clone(),
            server_key: *server_key,
            options,
            requests,
            others,
            outbox,
            tasks: vec![writer, reader],
            signer,
            asked,
        })
    }

    /// Closes this connection and logs in again with the same key, at `ws_url`: the
    /// same PC coming back, to this server or to one restarted on its data. It returns
    /// once the agent has sent its proof; wait for the server to list it before a call.
    pub async fn reconnect(self, ws_url: &str) -> anyhow::Result<TestAgent> {
        let (agent_id, key, server_key, options) = (
            self.agent_id.clone(),
            self.key.clone(),
            self.server_key,
            self.options.clone(),
        );
        drop(self);
        Self::connect(ws_url, &agent_id, &key, &server_key, options).await
    }

    /// The next call the server sends, within `within`.
    pub async fn next_request(&mut self, within: Duration) -> anyhow::Result<Request> {
        tokio::time::timeout(within, self.requests.recv())
            .await
            .with_context(|| format!("no request reached agent {} within {within:?}", self.agent_id))?
            .with_context(|| format!("agent {}'s connection is closed", self.agent_id))
    }

    /// Whether a call is waiting (without waiting for one).
    pub fn has_request(&mut self) -> bool {
        !self.requests.is_empty()
    }

    /// The next frame other than a request or a ping (a `policy`, say).
    pub async fn next_other(&mut self, within: Duration) -> anyhow::Result<Frame> {
        tokio::time::timeout(within, self.others.recv())
            .await
            .with_context(|| format!("no frame reached agent {} within {within:?}", self.agent_id))?
            .context("the connection is closed")
    }

    /// Answers a request with `result`, signed as kenny-agent signs it when the server
    /// checks signatures.
    pub fn respond(&self, request_id: &str, result: Value) -> anyhow::Result<()> {
        self.answer(Response::success(request_id, result))
    }

    pub fn fail(&self, request_id: &str, code: &str, message: &str) -> anyhow::Result<()> {
        self.answer(Response::failure(request_id, code, message))
    }

    /// Sends `response`, signed when the server checks signatures.
    pub fn answer(&self, mut response: Response) -> anyhow::Result<()> {
        let asked = self
            .asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&response.id);
        if let (Some(key), Some((tool, args_sha256))) = (&self.signer, asked) {
            response.sign(key, &self.agent_id, &tool, args_sha256, 1);
        }
        self.send(&Frame::Response(response))
    }

    /// Whether the server told this connection to sign its results.
    pub fn signs_results(&self) -> bool {
        self.signer.is_some()
    }

    /// Any frame, as the agent would send it.
    pub fn send(&self, frame: &Frame) -> anyhow::Result<()> {
        self.outbox
            .send(encode(frame))
            .map_err(|_| anyhow::anyhow!("agent {}'s connection is closed", self.agent_id))
    }
}
