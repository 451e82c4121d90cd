//! Checking an agent's signed result (protocol 0.18, [`kenny_proto::proof`]) against
//! the key enrolled for it, before anyone sees the result.
//!
//! The server rebuilds the signed message from what it knows, not from what the agent
//! claims: the request id, tool and argument digest of the call it sent, the connection's
//! authenticated agent id, and the digest of the answer it received. Only the agent's
//! clock reading and the signature come from the wire, so a valid proof vouches for this
//! exchange and nothing else.

use ed25519_dalek::VerifyingKey;
use kenny_proto::frame::Response;
use kenny_proto::proof::ResultProof;

/// The call a response answers, as the server sent it (its request id is the
/// response's own: the response was matched to the call by it).
pub(crate) struct Sent<'a> {
    pub agent_id: &'a str,
    pub tool: &'a str,
    pub args_sha256: String,
}

/// Why an answer was refused; carries the proof that failed, if the agent sent one, so
/// the audit row can keep it.
pub(crate) struct Refused {
    pub why: String,
    pub proof: Option<Box<ResultProof>>,
}

/// Checks `response` against `key`: the proof the audit row and the caller get.
pub(crate) fn check(key: &VerifyingKey, sent: Sent<'_>, response: &Response) -> Result<ResultProof, Refused> {
    let Some(wire) = &response.proof else {
        return Err(Refused {
            why: format!(
                "agent {} answered {} without a signature, though it speaks the protocol that signs every result",
                sent.agent_id, sent.tool
            ),
            proof: None,
        });
    };
    let proof = response.full_proof(sent.agent_id, sent.tool, sent.args_sha256, wire.clone());
    match proof.verify(key) {
        Ok(()) => Ok(proof),
        Err(e) => Err(Refused {
            why: format!(
                "the answer to {} from agent {} does not carry a valid signature from the key enrolled for it ({e}): it was not made by that PC for this call, or was changed on the way",
                sent.tool, sent.agent_id
            ),
            proof: Some(Box::new(proof)),
        }),
    }
}

/// Debug builds only: with `KENNY_TEST_TAMPER_RESULTS=1` every successful answer is
/// changed after it arrives and before it is checked, as a fault in the server's memory
/// would change it. The tests use it to show that such a result is refused; release
/// builds have no such switch.
#[cfg(debug_assertions)]
pub(crate) fn tamper_for_tests(response: &mut Response) {
    static ON: std::sync::LazyLock<bool> =
        std::sync::LazyLock::new(|| std::env::var_os("KENNY_TEST_TAMPER_RESULTS").is_some_and(|v| v == "1"));
    if *ON
        && response.ok
        && let Some(serde_json::Value::Object(result)) = &mut response.result
    {
        result.insert("tampered".into(), serde_json::Value::Bool(true));
    }
}

#[cfg(not(debug_assertions))]
pub(crate) fn tamper_for_tests(_: &mut Response) {}

/// What a saved result's proof showed: the call it answers.
#[derive(Debug, PartialEq, Eq)]
pub struct SavedCheck {
    pub agent_id: String,
    pub tool: String,
    pub request_id: String,
    pub at_ms: u64,
    /// Whether the arguments were given and matched too.
    pub args_checked: bool,
}

/// Checks a saved MCP tool result (the `CallToolResult` object, or the JSON-RPC
/// response holding it) against an agent's public key (base64), and, when given, the
/// arguments the call was made with (`agent_id` among them or not). The proof is the
/// result's `_meta["kenny/result-proof"]` (docs/protocol.md, "Signed results").
pub fn verify_saved(
    saved: &serde_json::Value,
    public_key: &str,
    args: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<SavedCheck, String> {
    use serde_json::Value;
    let result = match saved.get("result") {
        Some(inner) if saved.get("content").is_none() => inner,
        _ => saved,
    };
    let key = kenny_proto::auth::parse_public_key(public_key).map_err(|e| format!("the public key: {e}"))?;
    let Some(meta) = result.get("_meta").and_then(|m| m.get(PROOF_META_KEY)) else {
        return Err(format!(
            "the result has no _meta[{PROOF_META_KEY:?}]: save the whole tool result, as the server sent it"
        ));
    };
    if meta.get("signed") != Some(&Value::Bool(true)) {
        let why = meta.get("why").and_then(Value::as_str).unwrap_or("no reason given");
        return Err(format!("the result is not signed: {why}"));
    }
    let mut fields = meta.as_object().cloned().unwrap_or_default();
    let answer_in = fields.remove("answer_in").unwrap_or(Value::Null);
    let image_in = fields.remove("image_in");
    fields.remove("signed");
    let proof: ResultProof =
        serde_json::from_value(Value::Object(fields)).map_err(|e| format!("the proof is malformed: {e}"))?;
    let structured = result.get("structuredContent").cloned().unwrap_or(Value::Null);
    let outcome_sha256 = match answer_in.as_str() {
        Some("structuredContent") => {
            let mut answer = structured;
            if let (Some(image), Some(object)) = (image_in, answer.as_object_mut()) {
                let index = image.get("content_index").and_then(Value::as_u64).unwrap_or(0) as usize;
                let field = image.get("field").and_then(Value::as_str).unwrap_or("data_base64");
                let data = result
                    .get("content")
                    .and_then(|c| c.get(index))
                    .and_then(|c| c.get("data"))
                    .cloned()
                    .ok_or("the image content the proof names is missing")?;
                object.insert(field.to_owned(), data);
            }
            kenny_proto::proof::outcome_digest(Ok(&answer))
        }
        Some("structuredContent.value") => {
            kenny_proto::proof::outcome_digest(Ok(structured.get("value").unwrap_or(&Value::Null)))
        }
        Some("structuredContent.error") => {
            let text = |k: &str| structured["error"][k].as_str().unwrap_or_default().to_owned();
            kenny_proto::proof::outcome_digest(Err((&text("code"), &text("message"))))
        }
        _ => {
            return Err(
                "this result is the server's account of the call, not the agent's answer; the proof kept with its audit row covers that answer"
                    .into(),
            );
        }
    };
    if outcome_sha256 != proof.outcome_sha256 {
        return Err("the result does not match its proof: it was changed after the agent signed it".into());
    }
    let args_checked = match args {
        Some(args) => {
            let mut sent = args.clone();
            // The target travels as the connection, never in the arguments.
            sent.remove(kenny_proto::catalog::AGENT_ID_ARG);
            if kenny_proto::proof::args_digest(&sent) != proof.args_sha256 {
                return Err("the arguments given are not the ones the agent signed for".into());
            }
            true
        }
        None => false,
    };
    proof.verify(&key).map_err(|e| {
        format!("the signature does not verify with this key ({e}): another PC's key, or the proof was changed")
    })?;
    Ok(SavedCheck {
        agent_id: proof.agent_id,
        tool: proof.tool,
        request_id: proof.request_id,
        at_ms: proof.at_ms,
        args_checked,
    })
}

/// The `_meta` key of a forwarded call's proof (docs/protocol.md, "Signed results").
pub const PROOF_META_KEY: &str = "kenny/result-proof";

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;
    use kenny_proto::proof;
    use serde_json::json;

    fn sent(args: &serde_json::Value) -> Sent<'static> {
        Sent {
            agent_id: "pc-1",
            tool: "shell_exec",
            args_sha256: proof::args_digest(args.as_object().unwrap()),
        }
    }

    /// What an honest agent sends: its answer, signed over what it received.
    fn answered(key: &SigningKey, args: &serde_json::Value, result: serde_json::Value) -> Response {
        let mut response = Response::success("r-1", result);
        response.sign(
            key,
            "pc-1",
            "shell_exec",
            proof::args_digest(args.as_object().unwrap()),
            7,
        );
        response
    }

    #[test]
    fn an_honest_answer_passes_and_any_change_or_other_key_is_refused() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let args = json!({"command": "hostname"});
        let response = answered(&key, &args, json!({"stdout": "pc-1"}));
        let proof = check(&key.verifying_key(), sent(&args), &response).ok().unwrap();
        assert_eq!((proof.agent_id.as_str(), proof.at_ms), ("pc-1", 7));

        let mut changed = response.clone();
        tamper(&mut changed);
        let refused = check(&key.verifying_key(), sent(&args), &changed).err().unwrap();
        assert!(refused.why.contains("valid signature"), "{}", refused.why);
        assert!(refused.proof.is_some());

        let other = SigningKey::from_bytes(&[4; 32]);
        let forged = answered(&other, &args, json!({"stdout": "pc-1"}));
        assert!(check(&key.verifying_key(), sent(&args), &forged).is_err());

        // Signed over other arguments than the server sent.
        let asked_else = answered(&key, &json!({"command": "id"}), json!({"stdout": "pc-1"}));
        assert!(check(&key.verifying_key(), sent(&args), &asked_else).is_err());

        let mut unsigned = response;
        unsigned.proof = None;
        let refused = check(&key.verifying_key(), sent(&args), &unsigned).err().unwrap();
        assert!(refused.why.contains("without a signature"), "{}", refused.why);
    }

    fn tamper(response: &mut Response) {
        response.result.as_mut().unwrap()["stdout"] = json!("someone else");
    }
}
