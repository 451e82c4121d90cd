//! The operator policy in storage: one row holding the rule list as JSON.

use super::db::args;
use super::{Result, Store};

/// The policy as last saved: rules as JSON text (already validated), who and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPolicy {
    pub rules_json: String,
    pub updated_by: String,
    pub updated_at: String,
}

impl Store {
    pub fn operator_policy(&self) -> Result<Option<StoredPolicy>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT rules, updated_by, updated_at FROM operator_policy WHERE id = 1",
                args![],
                |r| {
                    Ok(StoredPolicy {
                        rules_json: r.get(0)?,
                        updated_by: r.get(1)?,
                        updated_at: r.get(2)?,
                    })
                },
            )
        })
    }

    pub fn save_operator_policy(&self, policy: &StoredPolicy) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO operator_policy (id, rules, updated_by, updated_at) VALUES (1, ?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET rules = excluded.rules, updated_by = excluded.updated_by,
                 updated_at = excluded.updated_at",
                args![&policy.rules_json, &policy.updated_by, &policy.updated_at],
            )?;
            Ok(())
        })
    }
}
