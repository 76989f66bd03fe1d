//! Real access tokens of mcp-connect dev's demo provider for the S4 floor:
//! bare rmcp + SQL stores one per user and sends it upstream on `whoami`,
//! so that its call is the one mcp-connect makes. The code flow as a
//! client does it (PKCE S256, client_secret_basic), minus the browser:
//! Allow is posted straight to the provider's authorize form.

use anyhow::{Context, anyhow, bail};
use base64::{
    Engine,
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
};
use bytes::Bytes;
use http_body_util::Full;
use serde_json::Value;

use crate::client::Conn;

const CLIENT_ID: &str = "mcp-connect-demo";

fn form(pairs: &[(&str, &str)]) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        out.append_pair(k, v);
    }
    out.finish()
}

fn post(
    path: &str,
    body: String,
    basic: Option<&str>,
) -> anyhow::Result<http::Request<Full<Bytes>>> {
    let mut request = http::Request::post(path).header(
        http::header::CONTENT_TYPE,
        "application/x-www-form-urlencoded",
    );
    if let Some(credentials) = basic {
        request = request.header(http::header::AUTHORIZATION, format!("Basic {credentials}"));
    }
    Ok(request.body(Full::new(Bytes::from(body)))?)
}

/// An access token for `account` from the demo provider at `base`, whose
/// client secret is `secret` (mcp-connect dev keeps it in `dev_secrets`).
pub async fn access_token(base: &str, secret: &str, account: &str) -> anyhow::Result<String> {
    let mut conn = Conn::new(base)?;
    let verifier = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let challenge = mcp_connect::providers::PkcePair::challenge_of(&verifier);
    let redirect_uri = format!("{}/oauth/callback/demo", base.trim_end_matches('/'));
    let allow = form(&[
        ("response_type", "code"),
        ("client_id", CLIENT_ID),
        ("redirect_uri", &redirect_uri),
        ("state", "bench"),
        ("code_challenge", &challenge),
        ("code_challenge_method", "S256"),
        ("scope", "profile"),
        ("account", account),
        ("decision", "allow"),
    ]);
    let back = conn.send(post("/dev/demo/authorize", allow, None)?).await?;
    let location = back
        .header("location")
        .ok_or_else(|| anyhow!("demo authorize: HTTP {} without a redirect", back.status))?;
    let code = url::Url::parse(location)
        .context("demo authorize redirect")?
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| anyhow!("demo authorize: no code in the redirect"))?;
    let basic = STANDARD.encode(format!(
        "{}:{}",
        form(&[("", CLIENT_ID)]).trim_start_matches('='),
        form(&[("", secret)]).trim_start_matches('=')
    ));
    let exchange = form(&[
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", &redirect_uri),
        ("code_verifier", &verifier),
    ]);
    let tokens = conn
        .send(post("/dev/demo/token", exchange, Some(&basic))?)
        .await?;
    if tokens.status != 200 {
        bail!("demo token: HTTP {}: {}", tokens.status, tokens.text());
    }
    let tokens: Value = serde_json::from_slice(&tokens.body)?;
    tokens["access_token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("demo token: no access_token"))
}
