//! The browser side of the connect flow, over real HTTP against the real
//! application and its dev identity provider: sign-in and sessions, the
//! ticket link, the identity check, consent, the single-use ticket, CSRF,
//! the provider callback's bindings, security headers, sign-out. Shared
//! steps live here; the tests are grouped by stage below.

mod callback;
mod callback_keys;
mod callback_reload;
mod client_address;
mod consent;
mod idle;
mod link;
mod link_mismatch;
mod sign_in;
mod sign_in_replay;
mod sign_out;
mod signed_out;

use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{
    browser::{Browser, Page},
    helpers::{TestApp, count, spawn_app},
};

/// A ticket for `subject` to connect `demo`, valid for `ttl_secs` (negative:
/// already expired). Returns the ticket string and its id.
async fn ticket(app: &TestApp, subject: &str, ttl_secs: i64) -> (String, Uuid) {
    // The shape the server issues (256 random bits, base64url): anything
    // else is refused before it is looked up.
    let secret = mcp_connect::connect::tickets::TicketSecret::generate()
        .expose()
        .to_owned();
    let id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, expires_at)
         VALUES ($1, $2, $3, $4, 'test-client', 'demo', now() + make_interval(secs => $5))",
    )
    .bind(id)
    .bind(Sha256::digest(secret.as_bytes()).to_vec())
    .bind(app.dev.issuer())
    .bind(subject)
    .bind(ttl_secs as f64)
    .execute(&app.db)
    .await
    .unwrap();
    (secret, id)
}

async fn signed_in(app: &TestApp, user: &str) -> Browser {
    let browser = Browser::new(app);
    let landed = browser.sign_in(user).await;
    assert_eq!(landed.location.as_deref(), Some("/connections"));
    browser
}

/// Opens the ticket link as a signed-in owner and returns the consent page.
async fn consent(browser: &Browser, ticket: &str) -> Page {
    let opened = browser.get(&format!("/connect?ticket={ticket}")).await;
    assert_eq!(opened.status, 303, "{}", opened.body);
    assert_sent_to_consent(&opened);
    let page = browser.follow(&opened).await;
    assert_eq!(page.status, 200, "{}", page.body);
    page
}

/// Asserts that `page` sends the browser to a link's own consent address.
fn assert_sent_to_consent(page: &Page) {
    assert!(
        page.location
            .as_deref()
            .is_some_and(|l| l.starts_with("/connect/consent?t=")),
        "{:?}",
        page.location
    );
}

/// Continue on the consent page; returns the provider's authorize URL.
async fn start_flow(app: &TestApp, browser: &Browser, ticket: &str) -> url::Url {
    let page = consent(browser, ticket).await;
    let answer = browser
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    let location = url::Url::parse(answer.location.as_deref().unwrap()).unwrap();
    assert!(
        location
            .as_str()
            .starts_with(&format!("{}/dev/demo/authorize?", app.base)),
        "{location}"
    );
    location
}

pub(crate) fn param(url: &url::Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

async fn flow_exists(app: &TestApp, state: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM oauth_flows WHERE state_hash = $1)")
        .bind(Sha256::digest(state.as_bytes()).to_vec())
        .fetch_one(&app.db)
        .await
        .unwrap()
}
