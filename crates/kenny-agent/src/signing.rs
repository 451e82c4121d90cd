//! Signing each answer with the agent's key (protocol 0.18, [`kenny_proto::proof`]), so
//! the server, and anyone it hands the proof to, can check the answer came from this PC
//! for that call.

use ed25519_dalek::SigningKey;
use kenny_proto::frame::Response;

/// Signs answers for one connection whose server said it checks them.
pub(crate) struct ResultSigner {
    key: SigningKey,
    agent_id: String,
}

impl ResultSigner {
    pub(crate) fn new(key: SigningKey, agent_id: String) -> Self {
        ResultSigner { key, agent_id }
    }

    /// Adds the proof to `response`, the answer to `tool` called with arguments whose
    /// digest is `args_sha256` ([`kenny_proto::proof::args_digest`], taken as received).
    pub(crate) fn sign(&self, tool: &str, args_sha256: String, response: &mut Response) {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        response.sign(&self.key, &self.agent_id, tool, args_sha256, at_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::proof::ResultProof;
    use serde_json::json;

    #[test]
    fn a_signed_answer_verifies_with_the_agents_public_key() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let signer = ResultSigner::new(key.clone(), "pc-9".into());
        let args = json!({"command": "uptime"});
        let mut response = Response::success("r-9", json!({"stdout": "up"}));
        signer.sign(
            "shell_exec",
            kenny_proto::proof::args_digest(args.as_object().unwrap()),
            &mut response,
        );
        let wire = response.proof.clone().unwrap();
        let rebuilt = ResultProof {
            request_id: "r-9".into(),
            agent_id: "pc-9".into(),
            tool: "shell_exec".into(),
            args_sha256: kenny_proto::proof::args_digest(args.as_object().unwrap()),
            outcome_sha256: response.outcome_digest(),
            at_ms: wire.at_ms,
            sig: wire.sig,
        };
        rebuilt.verify(&key.verifying_key()).unwrap();
    }
}
