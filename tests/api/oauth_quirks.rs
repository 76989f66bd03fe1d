//! Shipped catalog entries whose OAuth departs from RFC 6749, pointed at
//! local fakes that hold their providers to the same quirks: Notion (the
//! client only as HTTP Basic, a JSON token request, a token that never
//! expires, a version header on every API call) and Dropbox (a refresh
//! token only with `token_access_type=offline`, four-hour access tokens,
//! an RPC API of POSTs without bodies, bearer revocation). GitHub revokes
//! by deleting the app's grant. Slack, with writes allowed, still keeps its
//! grant methods from the model, and takes PKCE only from an app that
//! turned it on. Google grants only the scopes the person left ticked.
//! Each connects through the real pages, from a raw MCP client and from
//! rmcp's. LinkedIn reports a cancel with codes of its own.

mod dropbox;
mod github;
mod google;
mod linkedin;
mod notion;
mod slack;
mod slack_pkce;

use serde_json::Value;

use provider_fakes::FakeProvider;

use crate::{
    helpers::{TestApp, spawn_app_with},
    rmcp_person::{self, Connects},
};

/// The app with the shipped `name` entry pointed at `fake`, with `edit`
/// (TOML) merged over the operator's table.
pub(crate) async fn app_with_edit(fake: &FakeProvider, name: &str, edit: &str) -> TestApp {
    let mut table = fake.provider_table();
    let over: toml::Table = edit.parse().unwrap();
    table.extend(over);
    spawn_app_with(|t| {
        let providers = t
            .entry("providers")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(providers) = providers {
            providers.insert(name.to_owned(), table.into());
        }
    })
    .await
}

/// Whether the one connection's row satisfies `predicate` (SQL written by
/// the test itself).
pub(crate) async fn connection_has(app: &TestApp, predicate: &str) -> bool {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {predicate} FROM connections"
    )))
    .fetch_one(&app.db)
    .await
    .unwrap()
}

/// `api_request` as alice; the structured result.
pub(crate) async fn api(app: &TestApp, args: Value) -> Value {
    let (_, body) = app.call_tool("alice", "api_request", args).await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    body["result"]["structuredContent"].clone()
}

/// `api_request` as alice from rmcp's client, connecting at `fake` on the
/// way: the structured result of the completed call, which reached the API.
pub(crate) async fn rmcp_api(app: &TestApp, fake: &FakeProvider, args: Value) -> Value {
    let oauth = Connects::OAuth {
        provider_base: fake.base.clone(),
    };
    let result = rmcp_person::call(app, oauth, "api_request", args).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let content = result.structured_content.expect("structuredContent");
    assert_eq!(content["http_status"], 200, "{content}");
    assert_eq!(fake.calls().api, 1, "the retry reached the API");
    content
}
