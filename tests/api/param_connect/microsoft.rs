//! A Microsoft-like provider: the tenant is asked on the consent page and
//! goes into the path of the authorize and token URLs (refresh included);
//! Entra refuses a tenant it does not know, and never lists
//! `offline_access` in the granted scopes.

use provider_fakes::{microsoft, no_redirects};

use super::{api_args, call, expire, retry, stored_params};
use crate::{
    helpers::count,
    key_connect::{disconnect, first_round, open_form, submit},
    provider_flows::app_with,
    rmcp_person::{self, Connects},
};

#[tokio::test]
async fn the_tenant_given_on_the_consent_page_is_in_every_entra_url() {
    let fake = microsoft::start().await;
    let app = app_with(&fake, "microsoft").await;
    let args = api_args("microsoft", "me/messages");
    let (url, state) = first_round(&app, &args, "microsoft").await;
    let (browser, consent) = open_form(&app, &url, "alice").await;
    assert!(
        consent.body.contains("Directory (tenant)"),
        "{}",
        consent.body
    );
    assert!(
        consent.body.contains("name=\"param.tenant\"") && consent.body.contains("value=\"common\""),
        "the default is offered: {}",
        consent.body
    );
    let to_provider = submit(
        &browser,
        &consent,
        &[("param.tenant", microsoft::TENANT_DOMAIN)],
    )
    .await;
    assert_eq!(to_provider.status, 303, "{}", to_provider.body);
    let authorize = to_provider.location.clone().unwrap();
    let expected = format!(
        "{}/{}/oauth2/v2.0/authorize?",
        fake.base,
        microsoft::TENANT_DOMAIN
    );
    assert!(authorize.starts_with(&expected), "{authorize}");
    let callback = fake.visit(&authorize).await;
    let done = browser.get(callback.as_str()).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(
        done.body
            .contains("connected as alice@contoso.onmicrosoft.com"),
        "{}",
        done.body
    );
    let token_path = format!("/{}/oauth2/v2.0/token", microsoft::TENANT_DOMAIN);
    assert_eq!(fake.token_paths(), std::slice::from_ref(&token_path));
    assert_eq!(
        stored_params(&app).await,
        serde_json::json!({"tenant": microsoft::TENANT_DOMAIN})
    );
    let audited: serde_json::Value = sqlx::query_scalar(
        "SELECT detail->'params' FROM audit_events WHERE kind = 'consent_given'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(audited["tenant"], microsoft::TENANT_DOMAIN);
    // Entra's grant omits offline_access, which the entry asks for by
    // default: the retry must complete, not ask to connect again.
    let scopes: Vec<String> = sqlx::query_scalar("SELECT scopes FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(!scopes.contains(&"offline_access".to_owned()), "{scopes:?}");
    let body = retry(&app, &args, &state).await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["http_status"], 200, "{body}");
    assert_eq!(result["body"]["path"], "/graph/v1.0/me/messages", "{body}");
    let again = call(&app, &args).await;
    assert_eq!(again["http_status"], 200, "asked again: {again}");

    // Refresh goes to the tenant's token endpoint, and Entra's new refresh
    // token replaces the old one.
    expire(&app).await;
    let refreshed = call(&app, &args).await;
    assert_eq!(refreshed["http_status"], 200, "{refreshed}");
    assert_eq!(fake.calls().refresh, 1);
    assert_eq!(fake.token_paths(), [token_path.clone(), token_path.clone()]);
    expire(&app).await;
    assert_eq!(call(&app, &args).await["http_status"], 200);
    let tokens = fake.refresh_tokens();
    assert_eq!(tokens.len(), 3, "a new refresh token each time");

    // No revocation endpoint: disconnect forgets the connection only.
    let before = fake.calls();
    disconnect(&app, "microsoft").await;
    assert_eq!(fake.calls(), before);
    crate::logs::assert_absent(&fake.secrets());
}

#[tokio::test]
async fn a_tenant_entra_does_not_know_is_refused_there_and_nothing_is_stored() {
    let fake = microsoft::start().await;
    let app = app_with(&fake, "microsoft").await;
    let args = api_args("microsoft", "me");
    let (url, _) = first_round(&app, &args, "microsoft").await;
    let (browser, consent) = open_form(&app, &url, "alice").await;
    let to_provider = submit(&browser, &consent, &[("param.tenant", "fabrikam.example")]).await;
    assert_eq!(to_provider.status, 303, "{}", to_provider.body);
    let authorize = to_provider.location.clone().unwrap();
    assert!(
        authorize.contains("/fabrikam.example/oauth2/v2.0/authorize?"),
        "{authorize}"
    );
    let at_entra = no_redirects().get(&authorize).send().await.unwrap();
    assert_eq!(at_entra.status(), 400);
    let page = at_entra.text().await.unwrap();
    assert!(page.contains("AADSTS90002"), "{page}");
    assert_eq!(fake.calls().token, 0);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

#[tokio::test]
async fn rmcp_drives_the_rounds_while_the_person_gives_the_tenant() {
    let fake = microsoft::start().await;
    let app = app_with(&fake, "microsoft").await;
    let person = Connects::Form {
        inputs: vec![("param.tenant".into(), microsoft::TENANT_ID.into())],
    };
    let args = api_args("microsoft", "me/drive");
    let result = rmcp_person::call(&app, person, "api_request", args).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let content = result.structured_content.expect("structuredContent");
    assert_eq!(content["http_status"], 200, "{content}");
    assert_eq!(content["body"]["path"], "/graph/v1.0/me/drive", "{content}");
    let token_path = format!("/{}/oauth2/v2.0/token", microsoft::TENANT_ID);
    assert_eq!(fake.token_paths(), [token_path]);
}

#[tokio::test]
async fn connecting_again_offers_the_tenant_the_connection_has() {
    let fake = microsoft::start().await;
    let app = app_with(&fake, "microsoft").await;
    let args = api_args("microsoft", "me");
    let tenant = [("param.tenant", microsoft::TENANT_DOMAIN)];
    let (_, done, _) = super::connect_with(&app, &fake, &args, &tenant).await;
    assert_eq!(done.status, 200, "{}", done.body);
    sqlx::query("UPDATE connections SET status = 'needs_reauth'")
        .execute(&app.db)
        .await
        .unwrap();
    let (url, _) = first_round(&app, &args, "microsoft").await;
    let (_, consent) = open_form(&app, &url, "alice").await;
    let offered = format!("value=\"{}\"", microsoft::TENANT_DOMAIN);
    assert!(consent.body.contains(&offered), "{}", consent.body);
    assert!(
        !consent.body.contains("value=\"common\""),
        "{}",
        consent.body
    );
}

/// A connection whose stored tenant its entry no longer accepts (the entry
/// was changed since): nothing is sent, and the model is told that the
/// user must act (connect again, or have the operator change the entry),
/// not that its request should change — no request can mend it.
#[tokio::test]
async fn a_stored_tenant_the_entry_no_longer_accepts_is_the_users_to_mend() {
    let fake = microsoft::start().await;
    let app = app_with(&fake, "microsoft").await;
    let args = api_args("microsoft", "me/messages");
    let tenant = [("param.tenant", microsoft::TENANT_DOMAIN)];
    let (_, done, state) = super::connect_with(&app, &fake, &args, &tenant).await;
    assert_eq!(done.status, 200, "{}", done.body);
    retry(&app, &args, &state).await;
    sqlx::query(r#"UPDATE connections SET params = '{"tenant": "no such/tenant"}'"#)
        .execute(&app.db)
        .await
        .unwrap();
    let before = fake.calls().api;

    let result = call(&app, &args).await;
    assert_eq!(result["error"]["kind"], "refused", "{result}");
    assert_eq!(result["next_step"], "ask_user", "{result}");
    assert_eq!(fake.calls().api, before, "nothing was sent");
}
