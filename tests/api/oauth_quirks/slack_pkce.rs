//! Slack takes PKCE only from an app that turned it on in its settings,
//! which makes the app a public client for good: the shipped entry, a
//! confidential web client, sends none; an operator whose app has it on
//! may turn it on in the entry too, and the verifier is then checked.

use provider_fakes::{FakeProvider, slack};

use super::app_with_edit;
use crate::provider_flows::{app_with, connect};

/// The authorize request's challenge and the exchange's verifier, as the
/// fake received them.
fn pkce_sent(fake: &FakeProvider) -> (Option<String>, Option<String>) {
    let authorize = fake.last_authorize().expect("an authorize request");
    let exchange = fake
        .seen("/api/oauth.v2.access")
        .pop()
        .expect("an exchange");
    (
        authorize.get("code_challenge").cloned(),
        exchange.form.get("code_verifier").cloned(),
    )
}

#[tokio::test]
async fn the_shipped_entry_connects_an_app_without_pkce() {
    let fake = slack::start().await;
    let app = app_with(&fake, "slack").await;
    let body = connect(&app, &fake, "slack").await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "alice",
        "{body}"
    );
    assert_eq!(pkce_sent(&fake), (None, None));
}

#[tokio::test]
async fn an_app_with_pkce_on_connects_with_it_when_the_entry_says_so() {
    let fake = slack::start().await;
    fake.turn_pkce_on();
    let app = app_with_edit(&fake, "slack", "pkce = true").await;
    connect(&app, &fake, "slack").await;
    let (challenge, verifier) = pkce_sent(&fake);
    assert!(challenge.is_some() && verifier.is_some());
    let method = fake.last_authorize().unwrap()["code_challenge_method"].clone();
    assert_eq!(method, "S256");
}
