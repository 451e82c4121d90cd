//! Who is making a request: a user, by which credential, with which reach.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Operator,
    Superuser,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Operator => "operator",
            Role::Superuser => "superuser",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "user" => Some(Role::User),
            "operator" => Some(Role::Operator),
            "superuser" => Some(Role::Superuser),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    /// Personal access token (`kenny_pat_`).
    Pat,
    /// Dashboard sign-in session (cookie).
    Session,
    /// OAuth 2.1 access token issued by kenny for the MCP resource.
    OAuth,
    /// The server acting on its own (a web filter schedule): no person, no token.
    Server,
}

impl CredentialKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Pat => "pat",
            CredentialKind::Session => "session",
            CredentialKind::OAuth => "oauth",
            CredentialKind::Server => "server",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user_id: i64,
    pub username: String,
    pub role: Role,
    /// The hosts a `user` may reach; `None` for roles that reach every host.
    pub hosts: Option<Vec<kenny_proto::AgentId>>,
    pub credential_kind: CredentialKind,
    pub credential_id: String,
    /// Where the request came from (the peer address), for the audit trail.
    pub client_addr: Option<String>,
}

/// The name the server's own actions carry in the audit trail.
pub const SERVER_NAME: &str = "kenny";

impl Principal {
    /// The server acting on its own, for `rule` (what made it act; the audit trail
    /// keeps it as the credential). It reaches every PC and holds no user id.
    pub fn server(rule: impl Into<String>) -> Principal {
        Principal {
            user_id: 0,
            username: SERVER_NAME.to_owned(),
            role: Role::Superuser,
            hosts: None,
            credential_kind: CredentialKind::Server,
            credential_id: rule.into(),
            client_addr: None,
        }
    }

    /// The PCs this principal is limited to, as a JSON array for a store query;
    /// `None` when it may reach every PC.
    pub fn hosts_json(&self) -> Option<String> {
        self.hosts
            .as_ref()
            .map(|hosts| serde_json::Value::from(hosts.iter().map(|h| h.as_str()).collect::<Vec<_>>()).to_string())
    }

    pub fn may_reach(&self, agent_id: &str) -> bool {
        match &self.hosts {
            None => true,
            Some(hosts) => hosts.iter().any(|h| h.as_str() == agent_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_scoped_principals_are_limited() {
        let mut p = Principal {
            user_id: 1,
            username: "kim".into(),
            role: Role::User,
            hosts: Some(vec![kenny_proto::AgentId::parse("pc-a").unwrap()]),
            credential_kind: CredentialKind::Pat,
            credential_id: "1".into(),
            client_addr: None,
        };
        assert!(p.may_reach("pc-a"));
        assert!(!p.may_reach("pc-b"));
        assert!(!p.may_reach("pc-a "));
        p.hosts = None;
        assert!(p.may_reach("pc-b"));
        assert!(Role::Superuser > Role::Operator && Role::Operator > Role::User);
    }
}
