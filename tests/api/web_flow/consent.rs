//! Consent: Continue goes to the provider with state and PKCE, one ticket
//! has one winner, Cancel declines, CSRF guards every form.

use base64::Engine;
use futures::future::join_all;

use super::*;

#[tokio::test]
async fn continue_redirects_to_the_provider_with_state_and_pkce_s256() {
    let app = spawn_app().await;
    let (t, id) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let url = start_flow(&app, &alice, &t).await;
    let state = param(&url, "state").expect("state");
    let challenge = param(&url, "code_challenge").expect("challenge");
    assert_eq!(state.len(), 43);
    assert_eq!(challenge.len(), 43);
    assert_eq!(
        param(&url, "code_challenge_method").as_deref(),
        Some("S256")
    );
    let client_id = &app.state.settings.providers["demo"].client_id;
    assert_eq!(param(&url, "client_id").as_ref(), Some(client_id));
    assert_eq!(
        param(&url, "redirect_uri"),
        Some(format!("{}/oauth/callback/demo", app.base))
    );
    let (flow_id, kind, ticket_id, session_id, key_id, sealed): (
        Uuid,
        String,
        Uuid,
        Option<Uuid>,
        String,
        Vec<u8>,
    ) = sqlx::query_as(
        "SELECT id, kind, ticket_id, session_id, key_id, pkce_verifier FROM oauth_flows
         WHERE state_hash = $1",
    )
    .bind(Sha256::digest(state.as_bytes()).to_vec())
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((kind.as_str(), ticket_id), ("connect", id));
    assert!(session_id.is_some());
    // The verifier is stored sealed, and the challenge is its S256.
    let sealed = mcp_connect::crypto::Sealed {
        key_id,
        bytes: sealed,
    };
    let verifier = app
        .state
        .keys
        .open(
            mcp_connect::crypto::Purpose::PkceVerifier,
            flow_id.as_bytes(),
            &sealed,
        )
        .expect("sealed verifier");
    assert!(!sealed.bytes.windows(verifier.len()).any(|w| w == verifier));
    let s256 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(&verifier));
    assert_eq!(s256, challenge);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'consent_given'"
        )
        .await,
        1
    );
    // The ticket is spent: opening the link again says so.
    let again = alice.get(&format!("/connect?ticket={t}")).await;
    assert_eq!(again.status, 410);
}

#[tokio::test]
async fn of_100_concurrent_continues_exactly_one_flow_goes_to_the_provider() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let page = consent(&alice, &t).await;
    let mut fields = crate::browser::form_fields(&page.body, "/connect").unwrap();
    fields.push(("action".into(), "continue".into()));
    let answers = join_all((0..100).map(|_| alice.post_form("/connect", &fields))).await;
    // One wins the ticket; those that come after its flow is stored go on
    // with that flow (the same browser session), each under a new `state`;
    // any before it find the ticket used. However many go to the provider,
    // one flow exists, and one `state` finds it: the last given.
    let to_provider: Vec<url::Url> = answers
        .iter()
        .filter(|a| a.status == 303)
        .filter_map(|a| a.location.as_deref())
        .filter(|l| l.starts_with(&format!("{}/dev/demo/authorize?", app.base)))
        .map(|l| url::Url::parse(l).unwrap())
        .collect();
    assert!(!to_provider.is_empty());
    assert_eq!(
        to_provider.len() + answers.iter().filter(|a| a.status == 410).count(),
        100
    );
    let mut finding = 0;
    for url in &to_provider {
        if flow_exists(&app, &param(url, "state").unwrap()).await {
            finding += 1;
        }
    }
    assert_eq!(finding, 1, "one state finds the flow");
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM oauth_flows WHERE kind = 'connect'"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn cancel_declines_the_ticket() {
    let app = spawn_app().await;
    let (t, id) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let page = consent(&alice, &t).await;
    let answer = alice
        .submit(&page, "/connect", &[("action", "cancel")])
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("Cancelled"));
    assert!(
        answer
            .body
            .contains("your MCP client will be told that you declined")
    );
    let (declined, redeemed): (
        Option<chrono::DateTime<chrono::Utc>>,
        Option<chrono::DateTime<chrono::Utc>>,
    ) = sqlx::query_as("SELECT declined_at, redeemed_at FROM connect_tickets WHERE id = $1")
        .bind(id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(declined.is_some() && redeemed.is_none());
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM oauth_flows WHERE kind = 'connect'"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'consent_cancelled'"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn forms_without_the_right_csrf_token_are_refused() {
    let app = spawn_app().await;
    let (t, id) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let page = consent(&alice, &t).await;
    let ticket_id = id.to_string();
    let connections = alice.get("/connections").await;
    let logout_token = crate::browser::form_fields(&connections.body, "/logout").unwrap();
    let wrong = [
        vec![],
        vec![("csrf".to_owned(), "AAAA".to_owned())],
        vec![("csrf".to_owned(), "not base64 at all!".to_owned())],
        logout_token.clone(), // a real token, for another form
    ];
    for csrf in wrong {
        let mut fields = csrf.clone();
        fields.push(("ticket".into(), ticket_id.clone()));
        fields.push(("action".into(), "continue".into()));
        let answer = alice.post_form("/connect", &fields).await;
        assert_eq!(answer.status, 403, "{csrf:?}: {}", answer.body);
        assert!(answer.location.is_none());
    }
    // Another session's token for the same form does not work either.
    let other = signed_in(&app, "alice").await;
    let other_page = consent(&other, &t).await;
    let mut fields = crate::browser::form_fields(&other_page.body, "/connect").unwrap();
    fields.push(("action".into(), "continue".into()));
    assert_eq!(alice.post_form("/connect", &fields).await.status, 403);
    let logout = alice.post_form("/logout", &[]).await;
    assert_eq!(logout.status, 403);
    assert_eq!(
        alice.get("/connections").await.status,
        200,
        "still signed in"
    );
    // Nothing was spent; the real form still works.
    let answer = alice
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
}

/// Continue clicked twice (the browser drops the first redirect and
/// follows the second): the second goes on with the same flow under a new
/// `state` and finishes, where it used to say the link was used. The
/// first redirect's `state` no longer finds the flow; another browser's
/// Continue on the same link still finds it used.
#[tokio::test]
async fn a_second_continue_from_the_same_browser_goes_on_with_the_flow() {
    let app = spawn_app().await;
    let (t, id) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let page = consent(&alice, &t).await;
    let first = alice
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    let second = alice
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(second.status, 303, "{}", second.body);
    let first = url::Url::parse(first.location.as_deref().unwrap()).unwrap();
    let second = url::Url::parse(second.location.as_deref().unwrap()).unwrap();
    let (old_state, new_state) = (
        param(&first, "state").unwrap(),
        param(&second, "state").unwrap(),
    );
    assert_ne!(old_state, new_state);
    assert!(!flow_exists(&app, &old_state).await);
    assert!(flow_exists(&app, &new_state).await);
    assert_ne!(
        param(&first, "code_challenge"),
        param(&second, "code_challenge"),
        "a new verifier: no authorization request is sent twice with one"
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM oauth_flows WHERE kind = 'connect'"
        )
        .await,
        1
    );
    // Another browser session of the same person does not go on with it.
    let ticket = app.state.connect.ticket(id).await.unwrap().unwrap();
    let alices_session = sqlx::query_scalar::<_, Uuid>("SELECT id FROM web_sessions")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let mut params = mcp_connect::db::params::Params::new();
    let resumed = app
        .state
        .connect
        .resume_flow(&ticket, Uuid::new_v4(), &params)
        .await;
    assert!(resumed.unwrap().is_none(), "not another session's");
    // Nor with other parameters than its own (the person changed them).
    params.insert("tenant".into(), "other".into());
    let resumed = app
        .state
        .connect
        .resume_flow(&ticket, alices_session, &params)
        .await;
    assert!(resumed.unwrap().is_none(), "not with other parameters");
    // The second redirect finishes the connect.
    let provider_page = alice.get(second.as_str()).await;
    let back = alice
        .submit(
            &provider_page,
            "/dev/demo/authorize",
            &[("account", "octo"), ("decision", "allow")],
        )
        .await;
    let done = alice.follow(&back).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
}

/// Two links opened in two tabs of one browser: each tab's consent page
/// stays its own link's (the session's pending ticket is only the last
/// one opened), and a tab's address is of no use to another session.
#[tokio::test]
async fn each_tab_keeps_the_link_it_opened() {
    let app = spawn_app().await;
    let (first, first_id) = ticket(&app, "alice", 600).await;
    let (second, second_id) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let opened = |t: String| {
        let alice = &alice;
        async move {
            let page = alice.get(&format!("/connect?ticket={t}")).await;
            page.location.clone().unwrap()
        }
    };
    let first_tab = opened(first).await;
    let second_tab = opened(second).await;
    let ticket_on = |page: &Page| {
        crate::browser::form_fields(&page.body, "/connect")
            .unwrap_or_default()
            .into_iter()
            .find(|(name, _)| name == "ticket")
            .map(|(_, value)| value)
    };
    let page = alice.get(&first_tab).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(ticket_on(&page), Some(first_id.to_string()));
    let page = alice.get(&second_tab).await;
    assert_eq!(ticket_on(&page), Some(second_id.to_string()));
    // Continue in the first tab connects the first link's.
    let page = alice.get(&first_tab).await;
    let answer = alice
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    let redeemed: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM connect_tickets WHERE redeemed_at IS NOT NULL")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(redeemed, [first_id]);
    // Alice signed in in another browser gets nothing from this one's tab
    // address: its tag is this session's.
    let elsewhere = signed_in(&app, "alice").await;
    let page = elsewhere.get(&second_tab).await;
    assert_eq!(page.status, 410, "{}", page.body);
    assert!(ticket_on(&page).is_none());
}
