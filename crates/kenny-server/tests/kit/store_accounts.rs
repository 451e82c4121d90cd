//! Accounts, tokens, sessions, TOTP and OAuth grants in the store, on both backends
//! (see `store_backends`): the same checks against SQLite and a real PostgreSQL.

use kenny_server::principal::{CredentialKind, Role};
use kenny_server::store::{CodeGrant, Exchange, NewSession, NewTokenPair, StoreError, UserPatch};

use crate::store_backends::on_both;

const NOW: &str = "2030-01-01T00:00:00.000Z";
const LATER: &str = "2030-01-01T00:01:00.000Z";

#[test]
fn users_tokens_and_sessions_behave_the_same_on_both_backends() {
    on_both("accounts_on_both_backends", |store| {
        store.create_agent("pc-1", "h", NOW).unwrap();
        assert_eq!(store.count_users().unwrap(), 0);
        let root = store.create_first_user("root", "hash", Role::Superuser, NOW).unwrap();
        assert!(matches!(
            store.create_first_user("again", "hash", Role::Superuser, NOW),
            Err(StoreError::Conflict(m)) if m.contains("already done")
        ));
        let kim = store
            .create_user(
                "kim",
                "h2",
                Role::User,
                &["pc-1".into(), "pc-1".into(), "pc-2".into()],
                NOW,
            )
            .unwrap();
        assert!(kim > root);
        assert!(matches!(
            store.create_user("kim", "h", Role::User, &[], NOW),
            Err(StoreError::Conflict(m)) if m.contains("already exists")
        ));
        let record = store.user(kim).unwrap().unwrap();
        assert_eq!(
            (record.role, record.hosts.clone()),
            (Role::User, vec!["pc-1".to_owned(), "pc-2".to_owned()])
        );
        assert!(!record.disabled && !record.totp_enabled);
        assert_eq!(store.user_id("kim").unwrap(), kim);
        assert!(matches!(store.user_id("nobody"), Err(StoreError::NotFound(_))));
        assert_eq!(store.first_superuser().unwrap().as_deref(), Some("root"));
        assert_eq!(store.count_superusers().unwrap(), 1);

        // The last superuser cannot be demoted, disabled or deleted.
        let demote = UserPatch {
            role: Some(Role::Operator),
            ..Default::default()
        };
        assert!(
            matches!(store.update_user(root, &demote), Err(StoreError::Conflict(m)) if m.contains("last enabled superuser"))
        );
        assert!(matches!(store.delete_user(root), Err(StoreError::Conflict(_))));
        assert_eq!(
            store.user(root).unwrap().unwrap().role,
            Role::Superuser,
            "the refusal changed nothing"
        );

        // A personal token finds its principal, with the user's hosts; revoked, it does not.
        let token = store
            .create_token(kim, CredentialKind::Pat, Some("laptop"), "pat-hash", NOW)
            .unwrap();
        let p = store
            .principal_for_token(CredentialKind::Pat, "pat-hash")
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.user_id, p.username.as_str(), p.credential_id.clone()),
            (kim, "kim", token.to_string())
        );
        assert_eq!(
            p.hosts.unwrap().iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["pc-1", "pc-2"]
        );
        store.touch_tokens(&[(token, LATER.into())]).unwrap();
        assert_eq!(store.user_tokens(kim).unwrap()[0].last_used_at.as_deref(), Some(LATER));
        assert_eq!(store.user(kim).unwrap().unwrap().live_tokens, 1);

        // Sessions: live until revoked or expired; a password change ends all but one.
        let session = |hash: &'static str| NewSession {
            user_id: kim,
            token_hash: hash,
            csrf_token: "csrf",
            created_at: NOW,
            expires_at: LATER,
            client: Some("127.0.0.1"),
            user_agent: None,
        };
        let s1 = store.create_session(&session("s1")).unwrap();
        let s2 = store.create_session(&session("s2")).unwrap();
        let (who, csrf) = store.session_principal("s1", NOW).unwrap().unwrap();
        assert_eq!((who.user_id, csrf.as_str()), (kim, "csrf"));
        assert_eq!(store.session_principal("s1", LATER).unwrap(), None, "expired");
        assert_eq!(store.user_sessions(kim, NOW).unwrap().len(), 2);
        assert_eq!(store.set_password(kim, "new-hash", Some(s2), true, NOW).unwrap(), 1);
        assert_eq!(store.session_principal("s1", NOW).unwrap(), None);
        assert!(
            store.session_principal("s2", NOW).unwrap().is_some(),
            "the session that changed it stays"
        );
        assert_eq!(
            store.principal_for_token(CredentialKind::Pat, "pat-hash").unwrap(),
            None,
            "tokens revoked"
        );
        assert_eq!(store.user_login("kim").unwrap().unwrap().password_hash, "new-hash");
        assert!(store.revoke_user_session(kim, s2, NOW).unwrap());
        assert!(!store.revoke_user_session(kim, s1, NOW).unwrap());

        // TOTP: pending, enabled once, a step is good once.
        store.set_totp_pending(kim, "SECRET").unwrap();
        assert_eq!(store.totp_pending(kim).unwrap().as_deref(), Some("SECRET"));
        store
            .enable_totp(kim, "SECRET", 10, &["rc1".into(), "rc2".into()])
            .unwrap();
        assert!(matches!(
            store.enable_totp(kim, "SECRET", 11, &[]),
            Err(StoreError::Conflict(_))
        ));
        assert!(store.user(kim).unwrap().unwrap().totp_enabled);
        assert!(!store.advance_totp_step(kim, 10).unwrap(), "a replayed step");
        assert!(store.advance_totp_step(kim, 11).unwrap());
        assert!(store.use_recovery_code(kim, "rc1", NOW).unwrap());
        assert!(!store.use_recovery_code(kim, "rc1", NOW).unwrap(), "used up");
        store.disable_totp(kim).unwrap();
        assert!(!store.user(kim).unwrap().unwrap().totp_enabled);

        // A patch moves the role and hosts; the user then goes, with everything of it.
        let op = store
            .update_user(
                kim,
                &UserPatch {
                    role: Some(Role::Operator),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(op.hosts.is_empty(), "an operator has no host list");
        let users: Vec<String> = store.users().unwrap().into_iter().map(|u| u.username).collect();
        assert_eq!(users, ["kim", "root"]);
        store.delete_user(kim).unwrap();
        assert_eq!(store.user(kim).unwrap(), None);
        assert!(store.user_tokens(kim).unwrap().is_empty(), "its tokens went with it");
        let next = store.create_user("later", "h", Role::Operator, &[], NOW).unwrap();
        assert!(next > kim, "ids are never reused");
    });
}

fn pair<'a>(access: &'a str, refresh: &'a str) -> NewTokenPair<'a> {
    NewTokenPair {
        access_hash: access,
        refresh_hash: refresh,
        created_at: NOW,
        access_expires_at: LATER,
        refresh_expires_at: LATER,
    }
}

#[test]
fn oauth_codes_and_refresh_tokens_rotate_the_same_on_both_backends() {
    on_both("oauth_on_both_backends", |store| {
        store.create_agent("pc-1", "h", NOW).unwrap();
        let resource = "http://127.0.0.1:1/mcp";
        let kim = store.create_user("kim", "x", Role::Operator, &[], NOW).unwrap();
        let client = kenny_server::store::OAuthClient {
            client_id: "c".into(),
            client_name: Some("Claude".into()),
            redirect_uris: vec!["http://127.0.0.1:9/cb".into()],
        };
        store.create_oauth_client(&client, NOW).unwrap();
        assert_eq!(
            store.oauth_client("c").unwrap().unwrap().redirect_uris,
            client.redirect_uris
        );
        let grant = CodeGrant {
            client_id: "c".into(),
            user_id: kim,
            redirect_uri: "http://127.0.0.1:9/cb".into(),
            code_challenge: "x".into(),
            resource: resource.into(),
            scope: None,
            family: "family-1".into(),
            expires_at: LATER.into(),
        };
        store.create_code("code-1", &grant).unwrap();
        let ok = |_: &_| Ok::<(), ()>(());
        assert!(matches!(
            store.exchange_code("code-1", NOW, &pair("a1", "r1"), ok).unwrap(),
            Exchange::Issued(_)
        ));
        assert_eq!(
            store.oauth_principal("a1", resource, NOW).unwrap().unwrap().user_id,
            kim
        );
        assert_eq!(store.oauth_principal("a1", "http://elsewhere/mcp", NOW).unwrap(), None);
        let grants = store.user_grants(kim, NOW).unwrap();
        assert_eq!(grants.len(), 1);
        assert_eq!(
            (grants[0].client_name.as_deref(), grants[0].redirect_uri.as_deref()),
            (Some("Claude"), Some("http://127.0.0.1:9/cb"))
        );

        let ok = |_: &_| Ok::<(), ()>(());
        assert!(matches!(
            store.exchange_refresh("r1", NOW, &pair("a2", "r2"), ok).unwrap(),
            Exchange::Issued(_)
        ));
        // The used refresh token again: theft; the whole family goes.
        let ok = |_: &_| Ok::<(), ()>(());
        assert_eq!(
            store.exchange_refresh("r1", NOW, &pair("a3", "r3"), ok).unwrap(),
            Exchange::Reused
        );
        assert_eq!(store.oauth_principal("a2", resource, NOW).unwrap(), None);
        // The code again: reused, nothing issued.
        let ok = |_: &_| Ok::<(), ()>(());
        assert_eq!(
            store.exchange_code("code-1", NOW, &pair("a4", "r4"), ok).unwrap(),
            Exchange::Reused
        );
        assert!(store.user_grants(kim, NOW).unwrap().is_empty());
        assert!(!store.revoke_oauth_token("unknown", NOW).unwrap());
    });
}
