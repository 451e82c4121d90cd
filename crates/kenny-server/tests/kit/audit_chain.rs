//! The audit chain's checkpoints: a server that stops signs the rows it wrote last, so
//! cutting them off while it is down shows in `audit verify`.

use kenny_server::store::Store;
use kenny_testkit::TestServer;
use serde_json::json;

use crate::common::{self, answered, shell_result};

#[tokio::test]
async fn a_server_signs_the_chains_head_when_it_stops() {
    let server = TestServer::start().await.unwrap();
    let mut agent = server.agent("pc-a").await.unwrap();
    let mcp = server.mcp(server.admin_token());
    let (_, outcome) = answered(
        &mcp,
        &mut agent,
        "shell_exec",
        json!({"agent_id": "pc-a", "command": "echo last"}),
        shell_result("last\n"),
    )
    .await;
    assert!(!outcome.is_error);
    common::audit_until(&server, "?tool=shell_exec", |rows| {
        rows.iter().any(|r| r["outcome"] == "ok")
    })
    .await;
    drop(agent);
    let dir = server.stop().await.unwrap();
    let data = dir.path().join("data");
    let store = Store::open(&data).unwrap();
    assert_eq!(
        store.audit_chain_unsigned_head().unwrap(),
        None,
        "every event is under a checkpoint"
    );
    let key = kenny_server::server_key::server_key(&store, &data).unwrap();
    let report = kenny_server::ledger::verify(&store, &key.verifying_key()).unwrap();
    assert!(report.is_intact() && report.signed_through.is_some(), "{report:?}");
    assert!(report.rows_verified >= 1, "{report:?}");
}
