//! A sign-in's callback replayed: whoever holds a sign-in's cookie and
//! `state` can send its callback again and again with made-up codes. Each
//! must cost the identity provider no more than the token request it makes,
//! and the browser is told to forget the sign-in at the first answer.

use super::*;
use crate::helpers::spawn_app_with;

const METRICS_TOKEN: &str = "metrics-replay-0123456789";

#[tokio::test]
async fn a_replayed_sign_in_callback_fetches_no_metadata_or_keys_again() {
    let app = spawn_app_with(|t| {
        t.insert("metrics_token".into(), METRICS_TOKEN.into());
    })
    .await;
    let start = Browser::new(&app).get("/login").await;
    assert_eq!(start.status, 303, "{}", start.body);
    let [cookie] = start.set_login_cookies()[..] else {
        panic!("one sign-in cookie: {:?}", start.set_cookies)
    };
    // `name=value`, sent as is every time, as a script would.
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let cookie_name = cookie.split('=').next().unwrap().to_owned();
    let authorize = url::Url::parse(start.location.as_deref().unwrap()).unwrap();
    let state = param(&authorize, "state").unwrap();
    // Named by its issuer, as the dev issuer's own answers are (RFC 9207).
    let iss = app.dev.issuer();
    let before = idp_requests(&app).await;

    let mut ended = 0;
    for i in 0..20 {
        let answer = app
            .http
            .get(format!(
                "{}/auth/callback?state={state}&code=made-up-{i}&iss={iss}",
                app.base
            ))
            .header("Cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 502, "the code is refused");
        let removal = answer
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|c| c.starts_with(&format!("{cookie_name}=;")) && c.contains("Max-Age=0"));
        ended += usize::from(removal);
    }

    let after = idp_requests(&app).await;
    assert_eq!(
        after.token - before.token,
        20,
        "each callback asked for a token"
    );
    assert_eq!(
        (after.metadata - before.metadata, after.jwks - before.jwks),
        (0, 0),
        "no discovery for the callbacks: {before:?} → {after:?}"
    );
    assert!(after.metadata <= 1 && after.jwks <= 1, "{after:?}");
    assert_eq!(ended, 20, "every failed exchange ends the sign-in");
}

/// Requests the dev identity provider (served by the app itself) answered.
#[derive(Debug)]
struct IdpRequests {
    metadata: u64,
    jwks: u64,
    token: u64,
}

async fn idp_requests(app: &TestApp) -> IdpRequests {
    let text = app
        .http
        .get(format!("{}/metrics", app.addr))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let route = |route: &str| -> u64 {
        let label = format!("mcp_connect_page_requests_total{{route=\"{route}\",");
        text.lines()
            .filter(|l| l.starts_with(&label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    IdpRequests {
        metadata: route("/dev/idp/.well-known/openid-configuration"),
        jwks: route("/dev/idp/jwks"),
        token: route("/dev/idp/token"),
    }
}
