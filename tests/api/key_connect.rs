//! Providers connected with an API key or a Basic credential instead of
//! OAuth, through the same ticketed connect page: a Datadog-like provider
//! (two key headers, the site in the host) and a Twilio-like one (Basic,
//! the account SID in every path), both local fakes. Each test drives the
//! real pages and the MCP rounds; the shared steps live here.

mod account_limit;
mod datadog;
mod refusals;
pub(crate) mod rmcp_client;
mod twilio;

use serde_json::{Value, json};

use provider_fakes::key_providers::KeyFake;

use crate::{
    browser::{Browser, Page},
    full_flow::elicit,
    helpers::{TestApp, count, spawn_app_with},
};

/// The shipped `datadog` entry pointed at the fake: the site stays in the
/// host, limited to the two names that reach it.
pub(crate) fn datadog_entry(fake: &KeyFake) -> toml::Table {
    format!(
        "userinfo_url = \"http://{{site}}:{p}/api/v2/validate_keys\"\n\
         api_base_url = \"http://{{site}}:{p}/api/\"\n\
         [params.site]\n\
         pattern = \"127\\\\.0\\\\.0\\\\.1|localhost\"\n\
         default = \"127.0.0.1\"\n\
         example = \"localhost\"\n",
        p = fake.port
    )
    .parse()
    .unwrap()
}

/// The shipped `twilio` entry pointed at the fake.
pub(crate) fn twilio_entry(fake: &KeyFake) -> toml::Table {
    format!(
        "userinfo_url = \"{b}/2010-04-01/Accounts/{{account_sid}}.json\"\n\
         api_base_url = \"{b}/2010-04-01/Accounts/{{account_sid}}/\"\n",
        b = fake.base
    )
    .parse()
    .unwrap()
}

pub(crate) async fn app_with(fake: &KeyFake, name: &str, entry: toml::Table) -> TestApp {
    spawn_app_with(|t| fake.configure(t, name, entry)).await
}

/// Opens the elicitation URL in a fresh browser, signs in as `user` on the
/// way, and answers the connect page with its form.
pub(crate) async fn open_form(app: &TestApp, url: &str, user: &str) -> (Browser, Page) {
    let browser = Browser::new(app);
    let form = open_form_in(&browser, url, user).await;
    (browser, form)
}

/// [`open_form`] in a given browser.
pub(crate) async fn open_form_in(browser: &Browser, url: &str, user: &str) -> Page {
    let opened = browser.get(url).await;
    assert_eq!(opened.status, 303, "{}", opened.body);
    let mut page = browser.sign_in_from(opened, user).await;
    while page.status == 303 {
        page = browser.follow(&page).await;
    }
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("<form"), "{}", page.body);
    page
}

/// Presses Connect on the form with these inputs.
pub(crate) async fn submit(browser: &Browser, form: &Page, inputs: &[(&str, &str)]) -> Page {
    let mut extra = vec![("action", "continue")];
    extra.extend_from_slice(inputs);
    browser.submit(form, "/connect", &extra).await
}

/// The first round of `api_request` (not connected yet): the connect link
/// and the request state.
pub(crate) async fn first_round(app: &TestApp, args: &Value, provider: &str) -> (String, String) {
    elicit(
        app,
        "alice",
        "api_request",
        args.clone(),
        &format!("connect_{provider}"),
    )
    .await
}

/// Disconnects alice's `provider` account with the `disconnect` tool's
/// confirmation form, as an MCP client would; the completed answer.
pub(crate) async fn disconnect(app: &TestApp, provider: &str) -> Value {
    let args = json!({"provider": provider});
    let (_, asked) = app.call_tool("alice", "disconnect", args.clone()).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap();
    let (_, gone) = app
        .mcp("alice", "tools/call", json!({"name": "disconnect", "arguments": args, "requestState": state,
            "inputResponses": {"confirm_disconnect": {"action": "accept", "content": {"confirm": true}}}}))
        .await;
    assert_eq!(gone["result"]["resultType"], "complete", "{gone}");
    let alices = "SELECT count(*) FROM connections WHERE subject = 'alice'";
    assert_eq!(count(app, alices).await, 0);
    gone
}

/// Neither the page nor the stored row holds any of `secrets` in clear.
pub(crate) async fn assert_not_stored_in_clear(app: &TestApp, secrets: &[String]) {
    let rows: Vec<(Vec<u8>, String)> =
        sqlx::query_as("SELECT access_token, params::text FROM connections")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert!(!rows.is_empty());
    for (sealed, params) in rows {
        for secret in secrets {
            assert!(!params.contains(secret.as_str()));
            assert!(
                !sealed.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "a credential is stored in clear"
            );
        }
    }
}
