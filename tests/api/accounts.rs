//! Several accounts at one provider: with several and none named the call
//! asks which (a form-mode elicitation listing the labels of the accounts
//! the client is approved for, and numbering the others), the retry goes
//! on with the choice, an unknown choice is asked again, and grants are per
//! account.

use mcp_connect::domain::{ProviderName, UserRef};
use std::time::Duration;

use mcp_connect::{
    connect::vault::{NewConnection, store_connection},
    providers::{Account, TokenSet},
};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::{
    accounts_disconnect::call_declaring,
    browser::{Browser, Page},
    helpers::{CLIENT_ID, TestApp, count, spawn_app, spawn_app_with},
};

pub(crate) async fn store(app: &TestApp, id: &str, label: &str, client: &str) {
    let tokens = TokenSet {
        access_token: SecretString::from(format!("at-{id}")),
        received: std::time::Instant::now(),
        refresh_token: None,
        expires_in: Some(Duration::from_secs(3600)),
        scopes: Some(vec!["profile".to_owned()]),
        token_type: "Bearer".to_owned(),
    };
    store_connection(
        &app.state.connect,
        NewConnection {
            user: UserRef::new(&app.dev.issuer(), "alice"),
            provider: &ProviderName::parse("demo").unwrap(),
            account: &Account {
                id: id.to_owned(),
                label: label.to_owned(),
            },
            tokens: &tokens,
            requested_scopes: &[],
            client_id: Some(client),
        },
    )
    .await
    .unwrap();
}

async fn connect(app: &TestApp, client: &str, extra: Value) -> Value {
    let mut params = json!({"name": "connect", "arguments": {"provider": "demo"}});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            if k == "arguments" {
                params["arguments"]
                    .as_object_mut()
                    .unwrap()
                    .extend(v.as_object().unwrap().clone());
            } else {
                params[k] = v;
            }
        }
    }
    let (status, body) = app.mcp_as(client, "alice", "tools/call", params).await;
    assert_eq!(status, 200, "{body}");
    body
}

pub(crate) fn form(body: &Value) -> &Value {
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let request = &body["result"]["inputRequests"]["account_demo"];
    assert_eq!(request["method"], "elicitation/create", "{body}");
    let params = &request["params"];
    assert!(
        params["mode"].is_null() || params["mode"] == "form",
        "{body}"
    );
    params
}

pub(crate) fn choose(state: &str, choice: &str) -> Value {
    json!({"requestState": state,
        "inputResponses": {"account_demo": {"action": "accept", "content": {"account": choice}}}})
}

#[tokio::test]
async fn with_two_accounts_the_user_is_asked_which_and_the_retry_uses_it() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;

    let first = connect(&app, CLIENT_ID, json!({})).await;
    let params = form(&first);
    assert_eq!(
        params["requestedSchema"]["properties"]["account"]["enum"],
        json!(["work", "personal"]),
        "{first}"
    );
    let state = first["result"]["requestState"].as_str().unwrap();

    // An answer that names no account: the form again.
    let unknown = connect(&app, CLIENT_ID, choose(state, "nope")).await;
    let again = form(&unknown);
    assert!(
        again["message"].as_str().unwrap().contains("not one of"),
        "{unknown}"
    );
    let state = unknown["result"]["requestState"].as_str().unwrap();

    let done = connect(&app, CLIENT_ID, choose(state, "personal")).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["account_id"], "p-2",
        "{done}"
    );
    // Named in the arguments: no question.
    let named = connect(&app, CLIENT_ID, json!({"arguments": {"account": "work"}})).await;
    assert_eq!(
        named["result"]["structuredContent"]["account_id"], "w-1",
        "{named}"
    );
    // Declining the question is a decline.
    let state = first["result"]["requestState"].as_str().unwrap();
    let declined = connect(
        &app,
        CLIENT_ID,
        json!({"requestState": state, "inputResponses": {"account_demo": {"action": "decline"}}}),
    )
    .await;
    assert_eq!(declined["result"]["isError"], true, "{declined}");
}

/// An answer to a question the round did not ask is none: a decline under
/// the connect link's key after an account question, or a choice under
/// the account question's key after a round that showed a link, leaves
/// the question that was asked open, and it is asked again (mrtr.mdx: the
/// server ignores what it did not ask for, and asks again for what is
/// missing).
#[tokio::test]
async fn an_answer_to_a_question_the_round_did_not_ask_is_ignored() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let first = connect(&app, CLIENT_ID, json!({})).await;
    let state = first["result"]["requestState"].as_str().unwrap();
    let unasked = connect(
        &app,
        CLIENT_ID,
        json!({"requestState": state, "inputResponses": {"connect_demo": {"action": "decline"}}}),
    )
    .await;
    assert_eq!(
        unasked["result"]["resultType"], "input_required",
        "{unasked}"
    );
    assert!(
        unasked["result"]["inputRequests"]["account_demo"].is_object(),
        "{unasked}"
    );

    // A round that showed a link (bob has no demo account): a
    // choice under the account key is no answer to it.
    let first = app
        .call_tool("bob", "connect", json!({"provider": "demo"}))
        .await
        .1;
    assert!(
        first["result"]["inputRequests"]["connect_demo"].is_object(),
        "{first}"
    );
    let state = first["result"]["requestState"].as_str().unwrap();
    let (_, unasked) = app
        .mcp(
            "bob",
            "tools/call",
            json!({"name": "connect", "arguments": {"provider": "demo"},
                   "requestState": state,
                   "inputResponses": {"account_demo": {"action": "decline"}}}),
        )
        .await;
    assert_eq!(
        unasked["result"]["resultType"], "input_required",
        "{unasked}"
    );
    assert!(
        unasked["result"]["inputRequests"]["connect_demo"].is_object(),
        "{unasked}"
    );
}

/// The account chosen in an earlier round was disconnected before the
/// retry: the user is asked again among those left, instead of being sent
/// to reconnect an account that no longer exists, round after round.
#[tokio::test]
async fn a_chosen_account_disconnected_meanwhile_is_asked_again() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    sqlx::query("UPDATE connections SET status = 'needs_reauth' WHERE account_id = 'w-1'")
        .execute(&app.db)
        .await
        .unwrap();
    let first = connect(&app, CLIENT_ID, json!({})).await;
    let state = first["result"]["requestState"].as_str().unwrap();
    // "work" needs the user again: a link to reconnect it.
    let relink = connect(&app, CLIENT_ID, choose(state, "work")).await;
    assert_eq!(relink["result"]["resultType"], "input_required", "{relink}");
    assert_eq!(
        relink["result"]["inputRequests"]["connect_demo"]["params"]["mode"], "url",
        "{relink}"
    );
    let state = relink["result"]["requestState"].as_str().unwrap();
    sqlx::query("DELETE FROM connections WHERE account_id = 'w-1'")
        .execute(&app.db)
        .await
        .unwrap();
    let retry = json!({"requestState": state,
        "inputResponses": {"connect_demo": {"action": "accept"}}});
    let asked = connect(&app, CLIENT_ID, retry).await;
    let question = form(&asked);
    assert_eq!(
        question["requestedSchema"]["properties"]["account"]["enum"],
        json!(["personal"]),
        "{asked}"
    );
    assert!(
        question["message"]
            .as_str()
            .unwrap()
            .contains("no longer connected"),
        "{asked}"
    );
}

#[tokio::test]
async fn one_account_asks_nothing() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    let body = connect(&app, CLIENT_ID, json!({})).await;
    assert_eq!(
        body["result"]["structuredContent"]["account_id"], "w-1",
        "{body}"
    );
}

#[tokio::test]
async fn grants_are_per_account() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", "other-client").await;
    let work = connect(&app, CLIENT_ID, json!({"arguments": {"account": "work"}})).await;
    assert_eq!(work["result"]["resultType"], "complete", "{work}");
    // Chosen through the form, where the account this client is not
    // approved for has no name: the choice is kept into the approval round.
    let first = connect(&app, CLIENT_ID, json!({})).await;
    assert_eq!(
        form(&first)["requestedSchema"]["properties"]["account"]["enum"],
        json!(["work", UNAPPROVED_2]),
        "{first}"
    );
    let state = first["result"]["requestState"].as_str().unwrap();
    let personal = connect(&app, CLIENT_ID, choose(state, UNAPPROVED_2)).await;
    assert_eq!(
        personal["result"]["resultType"], "input_required",
        "{personal}"
    );
    let approval = &personal["result"]["inputRequests"]["connect_demo"]["params"];
    assert_eq!(approval["mode"], "url", "{personal}");
    for hidden in ["personal", "p-2"] {
        assert!(
            !personal.to_string().contains(hidden),
            "{hidden}: {personal}"
        );
    }
    // Its retry, still unapproved, keeps asking about the personal account.
    let state = personal["result"]["requestState"].as_str().unwrap();
    let retry = connect(
        &app,
        CLIENT_ID,
        json!({"requestState": state, "inputResponses": {"connect_demo": {"action": "accept"}}}),
    )
    .await;
    assert_eq!(
        retry["result"]["inputRequests"]["connect_demo"]["params"]["url"], approval["url"],
        "{retry}"
    );
}

/// How the account chooser names the second of the user's demo accounts
/// to a client not approved for it.
const UNAPPROVED_2: &str = "Demo account 2 (not yet approved for this client)";

/// A client approved for none of the user's accounts learns that they
/// exist, not which (as `connections_list` tells it): the chooser numbers
/// them, a label it guesses matches nothing — for `disconnect` too, which
/// answers a right guess as it answers a wrong one — and the person sees
/// which account it is on the approval page only.
#[tokio::test]
async fn an_unapproved_client_is_offered_the_accounts_without_their_names() {
    let app = spawn_app().await;
    store(&app, "id-corp", "acme-corp", CLIENT_ID).await;
    store(&app, "id-family", "family-mail", CLIENT_ID).await;
    let stranger = "stranger-client";
    let hidden = |body: &Value| {
        for name in ["acme-corp", "family-mail", "id-corp", "id-family"] {
            assert!(!body.to_string().contains(name), "{name}: {body}");
        }
    };

    let first = connect(&app, stranger, json!({})).await;
    hidden(&first);
    assert_eq!(
        form(&first)["requestedSchema"]["properties"]["account"]["enum"],
        json!([
            "Demo account 1 (not yet approved for this client)",
            UNAPPROVED_2
        ]),
        "{first}"
    );

    // A guessed label or id is no account: asked again, nothing confirmed.
    for guess in ["family-mail", "id-family"] {
        let named = connect(&app, stranger, json!({"arguments": {"account": guess}})).await;
        hidden(&named);
        assert!(
            form(&named)["message"]
                .as_str()
                .unwrap()
                .contains("not one of"),
            "{named}"
        );
    }
    let disconnect = |account: &'static str| {
        let app = &app;
        async move {
            let params = json!({"name": "disconnect",
                "arguments": {"provider": "demo", "account": account}});
            let (status, body) = app.mcp_as(stranger, "alice", "tools/call", params).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let right = disconnect("family-mail").await;
    let wrong = disconnect("holiday").await;
    hidden(&right);
    let schema = |b: &Value| b["result"]["inputRequests"]["account_demo"]["params"].clone();
    assert_eq!(schema(&right), schema(&wrong), "{right} / {wrong}");
    assert!(schema(&right).is_object(), "{right}");

    // Its numbered entry goes on to the approval page, which names it.
    let state = first["result"]["requestState"].as_str().unwrap();
    let chosen = connect(&app, stranger, choose(state, UNAPPROVED_2)).await;
    hidden(&chosen);
    let approval = &chosen["result"]["inputRequests"]["connect_demo"]["params"];
    assert_eq!(approval["mode"], "url", "{chosen}");
    let browser = Browser::new(&app);
    let page = crate::grants::approval_page(&browser, approval["url"].as_str().unwrap()).await;
    assert!(page.body.contains("family-mail"), "{}", page.body);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 2);
}

/// A numbered entry names the account the question offered under that
/// number, whatever happened to the others before the answer came.
#[tokio::test]
async fn a_numbered_choice_keeps_naming_the_account_it_was_offered_for() {
    let app = spawn_app().await;
    store(&app, "id-corp", "acme-corp", CLIENT_ID).await;
    store(&app, "id-family", "family-mail", CLIENT_ID).await;
    let stranger = "stranger-client";
    let first = connect(&app, stranger, json!({})).await;
    let state = first["result"]["requestState"].as_str().unwrap();
    // The first account goes before the answer: "account 2" is still the
    // second one offered, not whichever is second now.
    sqlx::query("DELETE FROM connections WHERE account_id = 'id-corp'")
        .execute(&app.db)
        .await
        .unwrap();
    let chosen = connect(&app, stranger, choose(state, UNAPPROVED_2)).await;
    let approval = &chosen["result"]["inputRequests"]["connect_demo"]["params"];
    assert_eq!(approval["mode"], "url", "{chosen}");
    let browser = Browser::new(&app);
    let page = crate::grants::approval_page(&browser, approval["url"].as_str().unwrap()).await;
    assert!(page.body.contains("family-mail"), "{}", page.body);
}

#[tokio::test]
async fn connect_adds_another_account_through_the_providers_chooser() {
    use crate::{
        browser::Browser,
        full_flow::{approve_at_demo, connect_demo, elicit, open_and_continue, retry_accepted},
    };
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let args = json!({"provider": "demo", "another_account": true});
    let (url, state) = elicit(&app, "alice", "connect", args.clone(), "connect_demo").await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let location = to_provider.location.clone().unwrap();
    assert!(location.contains("prompt=select_account"), "{location}");
    approve_at_demo(&browser, &to_provider, "hubot").await;
    let done = retry_accepted(&app, "alice", "connect", args, &state, "connect_demo").await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["account"], "hubot",
        "{done}"
    );

    // Two accounts now: which one, asked by form; named, the provider's own answer.
    let (_, asked) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        form(&asked)["requestedSchema"]["properties"]["account"]["enum"],
        json!(["octo", "hubot"]),
        "{asked}"
    );
    for name in ["hubot", "octo"] {
        let (_, body) = app
            .call_tool(
                "alice",
                "whoami",
                json!({"provider": "demo", "account": name}),
            )
            .await;
        assert_eq!(
            body["result"]["structuredContent"]["account"], name,
            "{body}"
        );
    }
}

/// A user has at most `flow.accounts_per_provider` accounts at one
/// provider: a new one past it is not stored (the page says why and what
/// to do, and the access just granted is revoked), while reconnecting one
/// they have still works. Another account is refused before its link
/// once the limit is reached (below); past the consent it is reached by
/// two links opened before either account was stored.
#[tokio::test]
async fn a_new_account_past_the_limit_is_not_stored_and_a_reconnect_is() {
    use crate::full_flow::{allow_at_demo, approve_at_demo};
    let app = spawn_limited_app(1).await;
    let first = to_demo(&app, json!({"provider": "demo"})).await;
    let another = json!({"provider": "demo", "another_account": true});
    let second = to_demo(&app, another).await;
    approve_at_demo(&first.0, &first.1, "octo").await;

    let back = allow_at_demo(&second.0, &second.1, "hubot").await;
    let refused = second.0.follow(&back).await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    for said in [
        "was not connected",
        "You have 1 Demo account connected here",
        "The access you had just granted was revoked.",
        "Disconnect one",
    ] {
        assert!(refused.body.contains(said), "{said}: {}", refused.body);
    }
    let accounts: Vec<String> =
        sqlx::query_scalar("SELECT account_label FROM connections ORDER BY account_label")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(accounts, ["octo"]);
    // On the record: whose, where, the limit and that the access went.
    let (subject, provider, detail): (String, String, Value) = sqlx::query_as(
        "SELECT subject, provider, detail FROM audit_events WHERE kind = 'account_limit_reached'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((subject.as_str(), provider.as_str()), ("alice", "demo"));
    assert_eq!(detail["limit"], 1, "{detail}");
    assert_eq!(detail["revoked"], true, "{detail}");
    assert_eq!(detail["via"], "oauth", "{detail}");

    // Reconnecting the one account is no new account.
    sqlx::query("UPDATE connections SET status = 'needs_reauth'")
        .execute(&app.db)
        .await
        .unwrap();
    let (browser, to_provider) = to_demo(&app, json!({"provider": "demo"})).await;
    approve_at_demo(&browser, &to_provider, "octo").await;
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT account_label, status FROM connections")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(
        rows,
        [("octo".to_owned(), "active".to_owned())],
        "the reconnect replaced the one account"
    );
    let limited = "SELECT count(*) FROM audit_events WHERE kind = 'account_limit_reached'";
    assert_eq!(count(&app, limited).await, 1, "a reconnect is no refusal");
}

/// At the limit, another account is refused before anything is asked of
/// the provider: the tool says so without a link, the connections page
/// offers no "Add another" and refuses the form, and a link made before
/// the limit was reached is refused on its consent page (Cancel still
/// works). Nothing is granted at the provider, so nothing is left to
/// revoke.
#[tokio::test]
async fn another_account_at_the_limit_is_refused_before_the_provider_is_asked() {
    use crate::{browser::Browser, full_flow::approve_at_demo};
    let app = spawn_limited_app(2).await;
    crate::full_flow::connect_demo(&app, "alice", "octo").await;
    let another = json!({"provider": "demo", "another_account": true});
    // Made while below the limit, opened up to the consent page.
    let (url, _) =
        crate::full_flow::elicit(&app, "alice", "connect", another.clone(), "connect_demo").await;
    let early = Browser::new(&app);
    let (consent, consent_at) = consent_page(&early, &url).await;
    // The second account, through another link.
    let (browser, to_provider) = to_demo(&app, another.clone()).await;
    approve_at_demo(&browser, &to_provider, "hubot").await;

    let tickets = "SELECT count(*) FROM connect_tickets";
    let before = count(&app, tickets).await;
    let (status, body) = app.call_tool("alice", "connect", another).await;
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    assert_eq!(result["resultType"], "complete", "{body}");
    assert_eq!(result["isError"], true, "{body}");
    let outcome = &result["structuredContent"];
    assert_eq!(outcome["error"]["kind"], "refused", "{body}");
    assert_eq!(outcome["next_step"], "ask_user", "{body}");
    let message = outcome["error"]["message"].as_str().unwrap_or_default();
    for said in ["You have 2 Demo accounts connected here", "Disconnect one"] {
        assert!(message.contains(said), "{said}: {message}");
    }
    assert_eq!(count(&app, tickets).await, before, "no link was made");

    let page = browser.get("/connections").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains("as many accounts as this server allows (2) are connected"),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains("Add another Demo account"),
        "{}",
        page.body
    );
    // The form posted all the same (an older page): refused.
    let posted = browser
        .submit(&page, "/connections/demo/reconnect", &[("another", "1")])
        .await;
    assert_eq!(posted.status, 409, "{}", posted.body);
    assert!(
        posted.body.contains("You have 2 Demo accounts"),
        "{}",
        posted.body
    );
    assert_eq!(count(&app, tickets).await, before, "no link was made");

    // The link made before: Continue is refused, and so is the page.
    let continued = early
        .submit(&consent, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(continued.status, 409, "{}", continued.body);
    assert!(
        continued.body.contains("Disconnect one"),
        "{}",
        continued.body
    );
    let again = early.get(&consent_at).await;
    assert_eq!(again.status, 409, "{}", again.body);
    let cancelled = early
        .submit(&consent, "/connect", &[("action", "cancel")])
        .await;
    assert!(cancelled.status < 400, "{}", cancelled.body);
    let flows = "SELECT count(*) FROM oauth_flows WHERE kind <> 'login'";
    assert_eq!(
        count(&app, flows).await,
        2,
        "only the two accounts' connects"
    );
    let limited = "SELECT count(*) FROM audit_events WHERE kind = 'account_limit_reached'";
    assert_eq!(count(&app, limited).await, 0, "nothing granted to refuse");
}

/// At the limit, reconnecting one of several accounts goes through the
/// provider's account chooser (a plain reconnect would take the account
/// signed in there): the row's Reconnect reaches the one that needs it.
#[tokio::test]
async fn at_the_limit_a_reconnect_of_one_of_several_accounts_shows_the_chooser() {
    use crate::{browser::Browser, full_flow::approve_at_demo};
    let app = spawn_limited_app(2).await;
    crate::full_flow::connect_demo(&app, "alice", "octo").await;
    let another = json!({"provider": "demo", "another_account": true});
    let (browser, to_provider) = to_demo(&app, another).await;
    approve_at_demo(&browser, &to_provider, "hubot").await;
    sqlx::query("UPDATE connections SET status = 'needs_reauth' WHERE account_label = 'hubot'")
        .execute(&app.db)
        .await
        .unwrap();

    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let page = browser.get("/connections").await;
    let consent = browser
        .submit(&page, "/connections/demo/reconnect", &[])
        .await;
    assert_eq!(consent.status, 303, "{}", consent.body);
    let consent = browser.follow(&consent).await;
    assert_eq!(consent.status, 200, "{}", consent.body);
    let continued = browser
        .submit(&consent, "/connect", &[("action", "continue")])
        .await;
    let location = continued.location.clone().unwrap_or_default();
    assert!(location.contains("prompt=select_account"), "{location}");
    // Back, and Continue again: the same flow, asked afresh, still with
    // the chooser.
    let to_provider = browser
        .submit(&consent, "/connect", &[("action", "continue")])
        .await;
    let location = to_provider.location.clone().unwrap_or_default();
    assert!(location.contains("prompt=select_account"), "{location}");
    approve_at_demo(&browser, &to_provider, "hubot").await;
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT account_label, status FROM connections ORDER BY account_label")
            .fetch_all(&app.db)
            .await
            .unwrap();
    let active = |label: &str| (label.to_owned(), "active".to_owned());
    assert_eq!(rows, [active("hubot"), active("octo")]);
    let limited = "SELECT count(*) FROM audit_events WHERE kind = 'account_limit_reached'";
    assert_eq!(count(&app, limited).await, 0);
}

/// An app allowing `limit` accounts per person and provider.
async fn spawn_limited_app(limit: i64) -> TestApp {
    spawn_app_with(|t| {
        let mut flow = toml::Table::new();
        flow.insert("accounts_per_provider".into(), limit.into());
        t.insert("flow".into(), toml::Value::Table(flow));
    })
    .await
}

/// A connect link for alice (the tool called with `args`), opened in a
/// browser of its own and continued: the browser and its redirect to
/// the demo provider.
async fn to_demo(app: &TestApp, args: Value) -> (crate::browser::Browser, crate::browser::Page) {
    let (url, _) = crate::full_flow::elicit(app, "alice", "connect", args, "connect_demo").await;
    let browser = crate::browser::Browser::new(app);
    let to_provider = crate::full_flow::open_and_continue(&browser, &url, "alice").await;
    (browser, to_provider)
}

/// Opens link `url` in `browser`, signing in as alice, up to its consent
/// page (not continued): the page and where it is.
async fn consent_page(
    browser: &crate::browser::Browser,
    url: &str,
) -> (crate::browser::Page, String) {
    let opened = browser.get(url).await;
    let mut page = browser.sign_in_from(opened, "alice").await;
    let mut at = String::new();
    while page.status == 303 {
        at = page.location.clone().unwrap_or_default();
        page = browser.follow(&page).await;
    }
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Continue"), "{}", page.body);
    (page, at)
}

/// A 2025-11-25 client has no `requestState`: its plain retry after the
/// link must still complete with the account that link connected, and a
/// later request for another account must ask again.
#[tokio::test]
async fn a_legacy_client_adds_another_account_and_its_retry_completes() {
    use crate::{
        browser::Browser,
        full_flow::{approve_at_demo, connect_demo, open_and_continue},
    };
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let args = json!({"provider": "demo", "another_account": true});
    let link = |body: &Value| {
        assert_eq!(body["error"]["code"], -32042, "{body}");
        body["error"]["data"]["elicitations"][0]["url"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (_, asked) = app.legacy_call("alice", "connect", args.clone()).await;
    let url = link(&asked);
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    approve_at_demo(&browser, &to_provider, "hubot").await;

    let (_, done) = app.legacy_call("alice", "connect", args.clone()).await;
    assert_eq!(
        done["result"]["structuredContent"]["account"], "hubot",
        "{done}"
    );
    // Answered: yet another account is a new link, not hubot again.
    let (_, again) = app.legacy_call("alice", "connect", args).await;
    assert_ne!(link(&again), url);
}

/// The person pressed Continue, then gave up at the provider; meanwhile
/// the account they already had changed (a refresh). The client's retry
/// must not take that account for the new one.
#[tokio::test]
async fn another_account_abandoned_at_the_provider_never_completes_with_an_older_one() {
    use crate::{
        browser::Browser,
        full_flow::{connect_demo, elicit, open_and_continue, retry_accepted},
        helpers::spawn_app_with,
    };
    let app = spawn_app_with(|t| {
        t.insert(
            "flow".into(),
            toml::Value::Table(toml::from_str("connect_wait_ms = 200").unwrap()),
        );
    })
    .await;
    connect_demo(&app, "alice", "octo").await;
    let args = json!({"provider": "demo", "another_account": true});
    let (url, state) = elicit(&app, "alice", "connect", args.clone(), "connect_demo").await;
    let browser = Browser::new(&app);
    open_and_continue(&browser, &url, "alice").await;
    sqlx::query("UPDATE connections SET updated_at = now() + interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    let body = retry_accepted(&app, "alice", "connect", args, &state, "connect_demo").await;
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
}

/// The connection id of alice's demo account `account_id`.
async fn connection_id(app: &TestApp, account_id: &str) -> uuid::Uuid {
    sqlx::query_scalar("SELECT id FROM connections WHERE account_id = $1")
        .bind(account_id)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// Renames the connection `id` to `label` with the form of its row on the
/// connections page, as a person would.
async fn rename(browser: &Browser, id: uuid::Uuid, label: &str) -> Page {
    let page = browser.get("/connections").await;
    let marker = format!("name=\"connection\" value=\"{id}\"");
    let at = page.body.find(&marker).expect("a label form");
    let start = page.body[..at].rfind("<form").unwrap();
    let end = at + page.body[at..].find("</form>").unwrap() + "</form>".len();
    let mut fields =
        crate::browser::form_fields(&page.body[start..end], "/connections/label").unwrap();
    fields.retain(|(k, _)| k != "label");
    fields.push(("label".into(), label.into()));
    browser.post_form("/connections/label", &fields).await
}

#[tokio::test]
async fn a_label_renamed_on_the_connections_page_is_the_account_name_and_survives_reconnects() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let id = connection_id(&app, "p-2").await;
    let renamed = rename(&browser, id, "home").await;
    assert_eq!(renamed.status, 303, "{}", renamed.body);
    // A forged form (no CSRF token) renames nothing.
    let forged: Vec<(String, String)> = vec![
        ("connection".into(), id.to_string()),
        ("label".into(), "evil".into()),
    ];
    assert_eq!(
        browser
            .post_form("/connections/label", &forged)
            .await
            .status,
        403
    );

    store(&app, "p-2", "personal", CLIENT_ID).await;
    let body = connect(&app, CLIENT_ID, json!({"arguments": {"account": "home"}})).await;
    assert_eq!(
        body["result"]["structuredContent"]["account_id"], "p-2",
        "{body}"
    );
    assert_eq!(
        body["result"]["structuredContent"]["account"], "home",
        "{body}"
    );
}

/// A rename waits for a refresh of the same connection under way, which
/// holds the row while the provider answers (longer than the statements'
/// own lock timeout, 300 ms here), instead of failing the person's form.
#[tokio::test]
async fn a_rename_waits_for_a_refresh_that_holds_the_row() {
    let app = crate::helpers::spawn_app_with(|t| {
        let mut database = toml::Table::new();
        database.insert("lock_timeout_ms".into(), 300.into());
        t.insert("database".into(), toml::Value::Table(database));
    })
    .await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let id = connection_id(&app, "w-1").await;
    let mut refreshing = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections FOR NO KEY UPDATE")
        .fetch_one(&mut *refreshing)
        .await
        .unwrap();
    let released = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        refreshing.commit().await.unwrap();
    });
    let renamed = rename(&browser, id, "office").await;
    released.await.unwrap();
    assert_eq!(renamed.status, 303, "{}", renamed.body);
    let label: String = sqlx::query_scalar("SELECT account_label FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(label, "office");
}

/// A label tells the user's accounts at a provider apart: renaming one to
/// the label another already has (or to its account id) is refused on the
/// page, and nothing is stored. Its own label again, or any other, is a rename like any.
#[tokio::test]
async fn a_label_another_account_has_is_refused_on_the_connections_page() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let id = connection_id(&app, "p-2").await;
    let refused = rename(&browser, id, "work").await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(
        refused.body.contains("Nothing was changed"),
        "{}",
        refused.body
    );
    assert!(
        refused.body.contains("already has this label"),
        "{}",
        refused.body
    );
    // Nor another account's id, which names that account first.
    let refused = rename(&browser, id, "w-1").await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    let labels: Vec<String> =
        sqlx::query_scalar("SELECT account_label FROM connections ORDER BY account_id")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(labels, ["personal", "work"]);
    let edited: bool = sqlx::query_scalar("SELECT label_edited FROM connections WHERE id = $1")
        .bind(id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(!edited, "nothing stored");

    for label in ["personal", "home"] {
        let renamed = rename(&browser, id, label).await;
        assert_eq!(renamed.status, 303, "{label}: {}", renamed.body);
    }
    let named = connect(&app, CLIENT_ID, json!({"arguments": {"account": "work"}})).await;
    assert_eq!(
        named["result"]["structuredContent"]["account_id"], "w-1",
        "{named}"
    );
}

/// A label is what a person reads to tell accounts apart: one with a
/// control character or an invisible one (a direction override that makes
/// `work` read as something else, a zero-width space), or longer than 64
/// characters, is refused and nothing is stored; letters of any script
/// and emoji are a label like any.
#[tokio::test]
async fn a_label_with_characters_a_reader_cannot_see_is_refused() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let id = connection_id(&app, "w-1").await;
    let too_long = "x".repeat(65);
    for label in [
        "kro\u{202E}w",
        "wo\u{200B}rk",
        "tab\there",
        too_long.as_str(),
    ] {
        let refused = rename(&browser, id, label).await;
        assert_eq!(refused.status, 400, "{label:?}: {}", refused.body);
        assert!(
            refused.body.contains("1 to 64 characters"),
            "{}",
            refused.body
        );
    }
    let label: String = sqlx::query_scalar("SELECT account_label FROM connections WHERE id = $1")
        .bind(id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(label, "work");
    let renamed = rename(&browser, id, "Arbeit 仕事 💼").await;
    assert_eq!(renamed.status, 303, "{}", renamed.body);
}

/// Two renames of two accounts to one label at the same moment: the second
/// waits for the first and finds the label taken, so the labels still tell
/// the accounts apart. (Both are held back by a transaction that has the
/// rows locked, and let go together.)
#[tokio::test]
async fn of_two_renames_to_one_label_at_once_only_one_is_made() {
    use mcp_connect::db::connections::Renamed;
    use sqlx::Connection;
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let (work, personal) = (
        connection_id(&app, "w-1").await,
        connection_id(&app, "p-2").await,
    );
    let url = format!("{}/{}", crate::helpers::server_url(), app.db_name);
    let issuer = app.dev.issuer();
    // A refresh holds its account's row while it waits for the provider:
    // renaming another account does not wait for it.
    let mut refreshing = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut refresh = refreshing.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections WHERE id = $1 FOR UPDATE")
        .bind(work)
        .execute(&mut *refresh)
        .await
        .unwrap();
    let alone = tokio::time::timeout(
        Duration::from_secs(2),
        app.state
            .connect
            .rename(UserRef::new(&issuer, "alice"), personal, "home"),
    )
    .await
    .expect("the rename waited for another account's row")
    .unwrap();
    assert_eq!(alone, Renamed::Renamed);
    refresh.rollback().await.unwrap();
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut held = holder.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections ORDER BY id FOR UPDATE")
        .execute(&mut *held)
        .await
        .unwrap();
    let renames = [work, personal].map(|id| {
        let (connect, issuer) = (app.state.connect.clone(), issuer.clone());
        tokio::spawn(async move {
            connect
                .rename(UserRef::new(&issuer, "alice"), id, "shared")
                .await
                .unwrap()
        })
    });
    crate::helpers::until_blocked(&app, 2).await;
    held.commit().await.unwrap();
    let mut outcomes = Vec::new();
    for rename in renames {
        outcomes.push(rename.await.unwrap());
    }
    outcomes.sort_by_key(|o| *o != Renamed::Renamed);
    assert_eq!(outcomes, [Renamed::Renamed, Renamed::LabelTaken]);
    let shared = count(
        &app,
        "SELECT count(*) FROM connections WHERE account_label = 'shared'",
    )
    .await;
    assert_eq!(shared, 1);
}

/// Two accounts may share a label (GitLab labels by user name: two people's
/// "alice" on two instances a public client serves). Each choice then names its account
/// by id too, and the answer is that very account; an `account` argument
/// that is their label is no choice: the user is asked, or a client that
/// cannot ask is told to name the account by its id. An id always wins.
#[tokio::test]
async fn accounts_that_share_a_label_are_told_apart_and_never_guessed() {
    let app = spawn_app().await;
    store(&app, "a-1", "alice", CLIENT_ID).await;
    store(&app, "a-2", "alice", CLIENT_ID).await;
    store(&app, "w-3", "work", CLIENT_ID).await;
    let choices = json!(["alice (id a-1)", "alice (id a-2)", "work"]);
    let account_id = |body: &Value| body["result"]["structuredContent"]["account_id"].clone();

    let first = connect(&app, CLIENT_ID, json!({})).await;
    assert_eq!(
        form(&first)["requestedSchema"]["properties"]["account"]["enum"],
        choices,
        "{first}"
    );
    let state = first["result"]["requestState"].as_str().unwrap();
    let done = connect(&app, CLIENT_ID, choose(state, "alice (id a-2)")).await;
    assert_eq!(account_id(&done), "a-2", "{done}");

    // Named by the label they share: asked which, and the answer holds
    // although the retry's arguments still say "alice".
    let shared = json!({"arguments": {"account": "alice"}});
    let asked = connect(&app, CLIENT_ID, shared.clone()).await;
    let question = form(&asked);
    assert_eq!(
        question["requestedSchema"]["properties"]["account"]["enum"], choices,
        "{asked}"
    );
    assert!(
        question["message"].as_str().unwrap().contains("Several"),
        "{asked}"
    );
    let state = asked["result"]["requestState"].as_str().unwrap();
    let mut retry = choose(state, "alice (id a-2)");
    retry["arguments"] = json!({"account": "alice"});
    let done = connect(&app, CLIENT_ID, retry).await;
    assert_eq!(account_id(&done), "a-2", "{done}");
    // Declined: nothing is taken.
    let mut declined = json!({"requestState": state,
        "inputResponses": {"account_demo": {"action": "decline"}}});
    declined["arguments"] = json!({"account": "alice"});
    let declined = connect(&app, CLIENT_ID, declined).await;
    assert_eq!(declined["result"]["isError"], true, "{declined}");

    // By id, or by the choice's name: that one, at once.
    for (name, id) in [("a-2", "a-2"), ("alice (id a-1)", "a-1"), ("work", "w-3")] {
        let body = connect(&app, CLIENT_ID, json!({"arguments": {"account": name}})).await;
        assert_eq!(account_id(&body), id, "{name}: {body}");
    }

    // A client that cannot ask (no form elicitation; a 2025-11-25 client):
    // a tool error the model can act on, naming the ids, no account used.
    let args = json!({"provider": "demo", "account": "alice"});
    let (_, no_form) = call_declaring(&app, json!({"url": {}}), "whoami", args.clone()).await;
    let (_, legacy) = app.legacy_call("alice", "whoami", args).await;
    for body in [no_form, legacy] {
        assert_eq!(body["result"]["isError"], true, "{body}");
        let result = &body["result"]["structuredContent"];
        assert_eq!(result["error"]["kind"], "refused", "{body}");
        assert_eq!(result["next_step"], "change_request", "{body}");
        assert!(result.get("account_id").is_none(), "{body}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("alice (id a-1)")
                && message.contains("alice (id a-2)")
                && message.contains("by its id"),
            "{body}"
        );
    }
}

/// A label that is another account's id (the provider chose it: a user
/// name made of digits, say) names the other account as an `account`
/// argument, where ids win: the question gives that label its id, so that
/// the name it shows names the account it stands for.
#[tokio::test]
async fn a_label_that_is_another_accounts_id_is_told_apart() {
    let app = spawn_app().await;
    store(&app, "1234", "octo", CLIENT_ID).await;
    store(&app, "5678", "1234", CLIENT_ID).await;
    let first = connect(&app, CLIENT_ID, json!({})).await;
    assert_eq!(
        form(&first)["requestedSchema"]["properties"]["account"]["enum"],
        json!(["octo", "1234 (id 5678)"]),
        "{first}"
    );
    let account_id = |body: &Value| body["result"]["structuredContent"]["account_id"].clone();
    for (name, id) in [
        ("1234", "1234"),
        ("1234 (id 5678)", "5678"),
        ("octo", "1234"),
    ] {
        let body = connect(&app, CLIENT_ID, json!({"arguments": {"account": name}})).await;
        assert_eq!(account_id(&body), id, "{name}: {body}");
    }
}

#[tokio::test]
async fn the_connections_page_disconnects_the_account_of_its_row() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connections WHERE account_id = 'p-2'")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let list = browser.get("/connections").await;
    let link = format!("/connections/demo/disconnect?connection={id}");
    assert!(list.body.contains(&link), "{}", list.body);
    let confirm = browser.get(&link).await;
    assert!(confirm.body.contains("personal"), "{}", confirm.body);
    let done = browser
        .submit(&confirm, "/connections/demo/disconnect", &[])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let left: Vec<String> = sqlx::query_scalar("SELECT account_id FROM connections")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(left, vec!["w-1".to_owned()]);
}

/// A disconnect form removes the account it was shown for or nothing: its
/// token does not carry over to another account, and a form that names
/// none is refused rather than read as "the provider's first".
#[tokio::test]
async fn a_disconnect_form_removes_only_the_account_it_names() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let id_of = |account: &'static str| {
        let db = app.db.clone();
        async move {
            sqlx::query_scalar::<_, uuid::Uuid>("SELECT id FROM connections WHERE account_id = $1")
                .bind(account)
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    let (work, personal) = (id_of("w-1").await, id_of("p-2").await);
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let confirm = browser
        .get(&format!(
            "/connections/demo/disconnect?connection={personal}"
        ))
        .await;
    // The confirm page's own fields, with its account replaced.
    let with_account = |account: String| {
        let mut fields = crate::browser::form_fields(&confirm.body, "/connections/demo/disconnect")
            .unwrap_or_else(|| panic!("no form: {}", confirm.body));
        for (name, value) in &mut fields {
            if name == "connection" {
                *value = account.clone();
            }
        }
        fields
    };
    let swapped = browser
        .post_form(
            "/connections/demo/disconnect",
            &with_account(work.to_string()),
        )
        .await;
    assert_eq!(swapped.status, 403, "{}", swapped.body);
    let garbled = browser
        .post_form(
            "/connections/demo/disconnect",
            &with_account("first".to_owned()),
        )
        .await;
    assert_eq!(garbled.status, 400, "{}", garbled.body);
    assert!(garbled.body.contains("which account"), "{}", garbled.body);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, 2);
}

/// The connections page adds another account at a provider already
/// connected: through the provider's account chooser, beside the first.
#[tokio::test]
async fn the_connections_page_adds_another_account() {
    use crate::{
        browser::Browser,
        full_flow::{approve_at_demo, connect_demo},
    };
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let page = browser.get("/connections").await;
    assert!(
        page.body.contains("Add another Demo account"),
        "{}",
        page.body
    );
    let consent = browser
        .submit(&page, "/connections/demo/reconnect", &[("another", "1")])
        .await;
    let consent = browser.follow(&consent).await;
    assert_eq!(consent.status, 200, "{}", consent.body);
    let to_provider = browser
        .submit(&consent, "/connect", &[("action", "continue")])
        .await;
    let location = to_provider.location.clone().unwrap();
    assert!(location.contains("prompt=select_account"), "{location}");
    let done = approve_at_demo(&browser, &to_provider, "hubot").await;
    assert!(done.body.contains("connected as"), "{}", done.body);
    let accounts: Vec<String> =
        sqlx::query_scalar("SELECT account_label FROM connections ORDER BY created_at")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(accounts.len(), 2, "{accounts:?}");
    let listed = browser.get("/connections").await;
    for label in &accounts {
        assert!(
            listed.body.contains(label.as_str()),
            "{label}: {}",
            listed.body
        );
    }
}

/// A row stored before `tokens_stored_at` existed measures its tokens' age
/// from `updated_at`; a rename or a status change keeps that age rather
/// than make the tokens look just stored (which would shrink the refresh
/// margin to nothing for a token about to expire).
#[tokio::test]
async fn renames_and_status_changes_keep_an_old_rows_token_age() {
    use mcp_connect::db::connections::{self, ConnectionStatus};
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    let (id, issuer, subject): (uuid::Uuid, String, String) =
        sqlx::query_as("SELECT id, issuer, subject FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    sqlx::query(
        "UPDATE connections SET tokens_stored_at = NULL, updated_at = now() - interval '1 hour'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let age_in_minutes = || async {
        sqlx::query_scalar::<_, f64>(
            "SELECT extract(epoch FROM now() - COALESCE(tokens_stored_at, updated_at))::float8 / 60
             FROM connections",
        )
        .fetch_one(&app.db)
        .await
        .unwrap()
    };
    connections::set_label(&app.db, UserRef::new(&issuer, &subject), id, "renamed")
        .await
        .unwrap();
    assert!(
        age_in_minutes().await > 59.0,
        "a rename made the tokens new"
    );
    connections::set_status(&app.db, id, ConnectionStatus::NeedsReauth)
        .await
        .unwrap();
    assert!(
        age_in_minutes().await > 59.0,
        "a status change made the tokens new"
    );
}

/// A 2025-11-25 client cannot be asked which account: with several and
/// none named, the model is told in the tool's result which there are.
#[tokio::test]
async fn a_legacy_client_with_several_accounts_is_told_to_name_one() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let (status, body) = app
        .legacy_call("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("error").is_none(), "{body}");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["error"]["kind"], "refused", "{body}");
    assert_eq!(result["next_step"], "change_request", "{body}");
    let message = result["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("work") && message.contains("personal") && message.contains("`account`"),
        "{message}"
    );
}

/// A name that matches none of the user's accounts, from a client that
/// cannot ask the user which: the model is told the name is wrong and
/// which there are, in the tool's result — not that the user has
/// "several" accounts (there is one here), nor that the client lacks a
/// capability it can do nothing about.
#[tokio::test]
async fn a_name_matching_no_account_is_told_as_such_to_a_client_that_cannot_ask() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    let args = json!({"provider": "demo", "account": "personal"});
    let (_, no_form) = call_declaring(&app, json!({"url": {}}), "whoami", args.clone()).await;
    let (_, legacy) = app.legacy_call("alice", "whoami", args).await;
    for body in [no_form, legacy] {
        assert!(body.get("error").is_none(), "{body}");
        assert_eq!(body["result"]["isError"], true, "{body}");
        let result = &body["result"]["structuredContent"];
        assert_eq!(result["error"]["kind"], "refused", "{body}");
        assert_eq!(result["next_step"], "change_request", "{body}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("\"personal\" is not one of")
                && message.contains("(work)")
                && message.contains("another_account"),
            "{message}"
        );
        assert!(!message.contains("several"), "{message}");
    }
}

/// The profile resource names no account, and `resources/read` has no
/// arguments to name one in: with several accounts, a client that cannot
/// be asked which is told to read it with `whoami` and its `account`
/// argument, not to name one where it cannot.
#[tokio::test]
async fn the_profile_resource_with_several_accounts_points_to_whoami() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
        "params": {"uri": "connection://demo/profile"}});
    let response = app
        .raw_post("alice", "2025-11-25")
        .json(&read)
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("work") && message.contains("`whoami`"),
        "{body}"
    );
    assert!(!message.contains("name the one to use"), "{body}");
}
