//! Who a request's session cookie belongs to. Both the bearer guard in front of `/api`
//! (`guard`) and the dashboard pages (`web`) ask; it sits below both so neither needs
//! the other for it.

use axum::http::HeaderMap;

use crate::accounts::Accounts;
use crate::principal::Principal;
use crate::web::cookies;

/// The signed-in principal and its session's CSRF token, from the session cookie.
pub(crate) async fn signed_in(accounts: &Accounts, headers: &HeaderMap) -> Option<(Principal, String)> {
    let token = cookies::get(headers, cookies::SESSION)?;
    crate::accounts::session(&accounts.store, &accounts.clock, &token).await
}
