//! What signed results cost per call: the agent's side (digest the arguments it got and
//! its answer, sign) and the server's (digest what it sent and got, verify), timed in
//! this process on answers of the sizes tools give, so the figures are CPU alone.

use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use kenny_proto::frame::Response;
use kenny_proto::proof::{self, ResultProof};
use serde_json::{Value, json};

use crate::stats;

/// An answer of about `bytes` bytes, shaped like a shell command's.
fn answer(bytes: usize) -> Value {
    let line = "drwxr-xr-x  2 root root 4096 Dec  2 05:19 some-directory-name\n";
    let stdout: String = line.repeat(bytes / line.len() + 1).chars().take(bytes).collect();
    json!({"stdout": stdout, "stderr": "", "exit_code": 0, "truncated": false})
}

fn agent_side(key: &SigningKey, args: &serde_json::Map<String, Value>, response: &Response) -> ResultProof {
    ResultProof {
        request_id: response.id.clone(),
        agent_id: "bench-pc".into(),
        tool: "shell_exec".into(),
        args_sha256: proof::args_digest(args),
        outcome_sha256: response.outcome_digest(),
        at_ms: 1,
        sig: String::new(),
    }
    .signed(key)
}

pub(crate) fn run(iterations: usize) -> anyhow::Result<()> {
    let key = SigningKey::from_bytes(&[7; 32]);
    let verifying = key.verifying_key();
    let args = json!({"command": "ls -la /var/lib", "timeout_s": 30});
    let args = args.as_object().cloned().unwrap_or_default();
    println!("size\tside\tp50_us\tp99_us\tcalls_per_core_s");
    for (name, bytes) in [
        ("200 B", 200),
        ("64 KiB", 64 << 10),
        ("1 MiB", 1 << 20),
        ("8 MiB", 8 << 20),
    ] {
        let response = Response::success("6f1c1f0e-2b7a-4c55-9d0e-3a1b2c3d4e5f", answer(bytes));
        let rounds = (iterations * 200 / (bytes / 1024 + 200)).max(20);
        let mut signing = Vec::with_capacity(rounds);
        let mut checking = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let started = Instant::now();
            let signed = agent_side(&key, &args, &response);
            signing.push(started.elapsed());
            let started = Instant::now();
            let rebuilt = ResultProof {
                args_sha256: proof::args_digest(&args),
                outcome_sha256: response.outcome_digest(),
                ..signed
            };
            rebuilt
                .verify(&verifying)
                .map_err(|e| anyhow::anyhow!("the bench's own proof failed: {e}"))?;
            checking.push(started.elapsed());
        }
        for (side, samples) in [
            ("agent: digest + sign", &mut signing),
            ("server: digest + verify", &mut checking),
        ] {
            let s = stats::summarize(samples);
            println!(
                "{name}\t{side}\t{:.1}\t{:.1}\t{:.0}",
                micros(s.p50),
                micros(s.p99),
                1.0 / s.p50.as_secs_f64().max(1e-9)
            );
        }
    }
    Ok(())
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
