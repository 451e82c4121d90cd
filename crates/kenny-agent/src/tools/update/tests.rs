use std::time::Duration;

use ed25519_dalek::SigningKey;
use kenny_proto::catalog::Tool;
use kenny_proto::update::{MANIFEST_PURPOSE, Manifest, UpdateOrder};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const SERVER: &str = "http://127.0.0.1:9";

fn server_key() -> SigningKey {
    SigningKey::from_bytes(&[3; 32])
}

fn context() -> UpdateContext {
    UpdateContext {
        server_url: SERVER.into(),
        agent_id: "pc-a".into(),
        pinned: Some(server_key().verifying_key()),
        trial: Duration::from_secs(30),
    }
}

fn manifest() -> Manifest {
    Manifest {
        purpose: MANIFEST_PURPOSE.into(),
        order_id: "o-1".into(),
        agent_id: "pc-a".into(),
        version: "0.2.0".into(),
        os: "linux".into(),
        arch: "x86_64".into(),
        file: "kenny-agent-0.2.0-linux-x86_64".into(),
        size: 4,
        sha256: hex::encode(Sha256::digest(b"good")),
        allow_downgrade: false,
        issued_at: time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap(),
    }
}

fn order_signed_by(m: &Manifest, key: &SigningKey) -> UpdateOrder {
    let (text, signature) = m.sign(key);
    UpdateOrder {
        version: m.version.clone(),
        url: format!("{SERVER}/d/agent/{}", m.file),
        sha256: m.sha256.clone(),
        manifest: text,
        signature,
    }
}

fn check(m: &Manifest) -> Result<Manifest, ToolError> {
    check_order(
        &order_signed_by(m, &server_key()),
        &context(),
        "0.1.0",
        "linux",
        "x86_64",
    )
}

fn code_of(r: Result<Manifest, ToolError>) -> String {
    r.map(|_| "ok".to_owned())
        .unwrap_or_else(|e| e.code.as_str().to_owned())
}

#[test]
fn a_signed_order_for_this_agent_and_platform_passes() {
    let m = manifest();
    assert_eq!(check(&m).unwrap(), m);
}

#[test]
fn orders_not_signed_by_the_pinned_key_are_refused() {
    let forged = order_signed_by(&manifest(), &SigningKey::from_bytes(&[4; 32]));
    let err = check_order(&forged, &context(), "0.1.0", "linux", "x86_64").unwrap_err();
    assert_eq!(err.code, ErrorCode::Blocked);
    assert!(
        err.message.contains("does not verify against the pinned server key"),
        "{err:?}"
    );
    // An agent on the legacy token path pins no key: it takes no updates at all.
    let token_agent = UpdateContext {
        pinned: None,
        ..context()
    };
    let err = check_order(
        &order_signed_by(&manifest(), &server_key()),
        &token_agent,
        "0.1.0",
        "linux",
        "x86_64",
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::Unsupported);
    assert!(err.message.contains("--server-pubkey"), "{err:?}");
}

#[test]
fn orders_for_another_agent_os_or_arch_are_refused() {
    let cases = [
        (
            Manifest {
                agent_id: "pc-b".into(),
                ..manifest()
            },
            "signed for agent",
        ),
        (
            Manifest {
                arch: "aarch64".into(),
                ..manifest()
            },
            "for linux/aarch64",
        ),
        (
            Manifest {
                os: "windows".into(),
                ..manifest()
            },
            "for windows/x86_64",
        ),
    ];
    for (m, needle) in cases {
        let err = check(&m).unwrap_err();
        assert_eq!(err.code, ErrorCode::Blocked, "{m:?}");
        assert!(err.message.contains(needle), "{err:?}");
    }
}

#[test]
fn versions_only_go_forward_unless_a_downgrade_was_signed() {
    let at = |version: &str, allow_downgrade: bool| {
        code_of(check(&Manifest {
            version: version.into(),
            allow_downgrade,
            ..manifest()
        }))
    };
    assert_eq!(at("0.1.1", false), "ok");
    assert_eq!(at("0.1.0", false), "bad_args");
    assert_eq!(at("0.1.0", true), "bad_args");
    assert_eq!(at("0.0.9", false), "bad_args");
    assert_eq!(at("0.0.9", true), "ok");
}

#[test]
fn what_a_caller_could_type_is_not_an_order() {
    // The attack this replaces: a caller-chosen URL (here the server's own /healthz)
    // and the SHA-256 of what it serves.
    let args = json!({
        "version": "9.9.9",
        "url": "http://127.0.0.1:9/healthz",
        "sha256": hex::encode(Sha256::digest(b"ok")),
    });
    let err = kenny_proto::catalog::ToolCall::decode(Tool::AgentUpdate, args.as_object().unwrap())
        .map_err(|e| super::malformed_order(&e))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::BadArgs);
    assert!(err.message.contains("not signed by the server"), "{err:?}");
}

/// A one-shot HTTP server on loopback answering every request with `response`.
async fn serve_once(response: Vec<u8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            let _ = conn.write_all(&response).await;
            let _ = conn.shutdown().await;
        }
    });
    format!("http://{addr}/d/agent/kenny-agent-0.2.0-linux-x86_64")
}

fn http(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 {status}\r\nconnection: close\r\n{headers}\r\n").into_bytes();
    r.extend_from_slice(body);
    r
}

#[tokio::test]
async fn downloads_take_exactly_the_signed_size_and_never_follow_redirects() {
    let url = serve_once(http("200 OK", "content-length: 4\r\n", b"good")).await;
    assert_eq!(download(&url, 4).await.unwrap(), b"good");

    let elsewhere = serve_once(http("200 OK", "content-length: 4\r\n", b"evil")).await;
    let url = serve_once(http(
        "302 Found",
        &format!("location: {elsewhere}\r\ncontent-length: 0\r\n"),
        b"",
    ))
    .await;
    let err = download(&url, 4).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Blocked);
    assert!(err.message.contains("never follow redirects"), "{err:?}");

    let url = serve_once(http("200 OK", "content-length: 5\r\n", b"good!")).await;
    let err = download(&url, 4).await.unwrap_err();
    assert!(err.message.contains("the signed manifest says 4"), "{err:?}");

    // No length announced: the body is cut off as soon as it outgrows the signed size.
    let url = serve_once(http("200 OK", "", &[b'x'; 64 * 1024])).await;
    let err = download(&url, 4).await.unwrap_err();
    assert!(err.message.contains("larger than the signed 4 bytes"), "{err:?}");

    let url = serve_once(http("200 OK", "", b"go")).await;
    let err = download(&url, 4).await.unwrap_err();
    assert!(err.message.contains("ended after 2 of the signed 4 bytes"), "{err:?}");

    let url = serve_once(http("404 Not Found", "content-length: 0\r\n", b"")).await;
    assert_eq!(download(&url, 4).await.unwrap_err().code, ErrorCode::ExecFailed);
}

#[test]
fn only_a_standalone_agent_updates_itself_and_stages_beside_itself() {
    assert!(is_standalone_agent(Path::new("/usr/local/bin/kenny-agent")));
    assert!(is_standalone_agent(Path::new("C:/Program Files/kenny/kenny-agent.exe")));
    assert!(!is_standalone_agent(Path::new("/usr/bin/kenny")));
    assert_eq!(
        staged_path(Path::new("/usr/local/bin/kenny-agent")),
        Path::new("/usr/local/bin/kenny-agent.new")
    );
    let dir = tempfile::tempdir().unwrap();
    let staged = dir.path().join("kenny-agent.new");
    std::fs::write(&staged, b"stale").unwrap();
    write_executable(&staged, b"fresh").unwrap();
    assert_eq!(std::fs::read(&staged).unwrap(), b"fresh");
}

#[test]
fn an_old_downgrade_order_cannot_be_replayed() {
    let stale = Manifest {
        version: "0.0.9".into(),
        allow_downgrade: true,
        issued_at: "2026-01-01T00:00:00Z".into(),
        ..manifest()
    };
    let err = check(&stale).unwrap_err();
    assert_eq!(err.code, ErrorCode::Blocked);
    assert!(err.message.contains("ask for it again"), "{err:?}");
    // An upgrade order is not time-bound: replaying it can only move forward.
    let old_upgrade = Manifest {
        issued_at: "2026-01-01T00:00:00Z".into(),
        ..manifest()
    };
    assert_eq!(code_of(check(&old_upgrade)), "ok");
    let now = time::OffsetDateTime::now_utc();
    assert!(recently_issued(
        &(now - time::Duration::hours(5))
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap(),
        now
    ));
    assert!(!recently_issued("not a time", now));
}
