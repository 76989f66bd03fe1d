//! Bearer tokens for the MCP client, from the real authorization server: an
//! authorization code grant with PKCE and `resource=<public_url>/mcp`, as an
//! MCP client performs it, with the user's sign-in and consent on
//! oidc-provider's own forms submitted over HTTP. Also: what the peers say
//! they issued, for the log scan.

use anyhow::{Context, bail};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use reqwest::{StatusCode, Url, redirect::Policy};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::world::World;

const REDIRECT_URI: &str = "http://127.0.0.1/callback";

/// An access token for the MCP server, for `user` of the MCP client
/// `client_id` (registered at the authorization server).
pub async fn mcp_token_for(world: &World, user: &str, client_id: &str) -> anyhow::Result<String> {
    let http = crate::compose::http()
        .redirect(Policy::none())
        .cookie_store(true)
        .build()?;
    let verifier = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let state = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    let resource = world.mcp_url();
    let mut url = Url::parse(&format!("{}/auth", world.as_issuer))?;
    url.query_pairs_mut()
        .append_pair("client_id", client_id)
        .append_pair("response_type", "code")
        .append_pair("redirect_uri", REDIRECT_URI)
        .append_pair("scope", "mcp:tools")
        .append_pair("resource", &resource)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", &state);

    let mut response = http.get(url.clone()).send().await?;
    let code = loop {
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .context("redirect without Location")?;
            let next = url.join(location)?;
            if next.as_str().starts_with(REDIRECT_URI) {
                let params: Vec<(String, String)> = next.query_pairs().into_owned().collect();
                let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                if let Some(error) = get("error") {
                    bail!(
                        "the authorization server refused: {error} {:?}",
                        get("error_description")
                    );
                }
                if get("state").as_deref() != Some(state.as_str()) {
                    bail!("state mismatch in the authorization response");
                }
                break get("code").context("no code in the authorization response")?;
            }
            url = next;
            response = http.get(url.clone()).send().await?;
            continue;
        }
        if status != StatusCode::OK {
            bail!("authorization server answered {status} at {url}");
        }
        // An oidc-provider interaction page: sign in, or consent.
        let page = response.text().await?;
        let action = form_action(&page).context("no form on the interaction page")?;
        let target = url.join(&action)?;
        let form: Vec<(&str, &str)> = if page.contains(r#"name="prompt" value="login""#) {
            vec![
                ("prompt", "login"),
                ("login", user),
                ("password", "any password"),
            ]
        } else if page.contains(r#"name="prompt" value="consent""#) {
            vec![("prompt", "consent")]
        } else {
            bail!("unexpected interaction page at {url}");
        };
        url = target.clone();
        response = http.post(target).form(&form).send().await?;
    };

    let answer: Value = http
        .post(format!("{}/token", world.as_issuer))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT_URI),
            ("code_verifier", verifier.as_str()),
            ("client_id", client_id),
            ("resource", resource.as_str()),
        ])
        .send()
        .await?
        .json()
        .await?;
    let token = answer["access_token"]
        .as_str()
        .with_context(|| format!("no access_token in the token answer: {}", answer["error"]))?;
    if token.split('.').count() != 3 {
        bail!("expected a JWT access token for the MCP resource");
    }
    Ok(token.to_owned())
}

fn form_action(page: &str) -> Option<String> {
    let start = page.find("<form")?;
    let rest = &page[start..];
    let at = rest.find("action=\"")? + "action=\"".len();
    let end = rest[at..].find('"')?;
    Some(rest[at..at + end].replace("&amp;", "&"))
}

/// The codes and opaque tokens `issuer` (one of the Node peers) handed out
/// for `account`.
pub async fn issued(issuer: &str, account: &str) -> anyhow::Result<Vec<(String, String)>> {
    let list: Vec<Value> = crate::compose::http()
        .build()?
        .get(format!("{issuer}/__e2e/issued"))
        .query(&[("account", account)])
        .send()
        .await?
        .json()
        .await?;
    Ok(list
        .iter()
        .filter_map(|v| {
            Some((
                v["kind"].as_str()?.to_owned(),
                v["value"].as_str()?.to_owned(),
            ))
        })
        .collect())
}

/// The HTTP status the provider's API answers for `access_token`.
pub async fn api_status(world: &World, access_token: &str) -> anyhow::Result<u16> {
    Ok(crate::compose::http()
        .build()?
        .get(format!("{}me", world.api_base))
        .bearer_auth(access_token)
        .send()
        .await?
        .status()
        .as_u16())
}

/// What the provider's token endpoint says to a refresh grant with
/// `refresh_token`, made as mcp-connect makes it (its client id and secret
/// in the body): `None` when it issues tokens, else its `error` code.
pub async fn refresh_grant_error(
    world: &World,
    refresh_token: &str,
) -> anyhow::Result<Option<String>> {
    let response = crate::compose::http()
        .build()?
        .post(format!("{}/token", world.tp_issuer))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", crate::world::TP_CLIENT_ID),
            ("client_secret", world.tp_client_secret.as_str()),
        ])
        .send()
        .await?;
    let status = response.status();
    let answer: Value = response.json().await?;
    if status.is_success() {
        return Ok(None);
    }
    Ok(Some(
        answer["error"]
            .as_str()
            .with_context(|| format!("{status} without an error code: {answer}"))?
            .to_owned(),
    ))
}
