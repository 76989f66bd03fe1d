//! The browser side of mcp-connect over plain HTTP, as a person's browser
//! does it (the steps of `tests/api/full_flow.rs`): sign in at the dev
//! identity provider, then for a connect link: `GET /connect?ticket=…` →
//! consent page → `POST /connect` (Continue) → the demo provider's page →
//! Allow → `GET /oauth/callback/demo` → "connected". Used to connect the
//! benchmark's users for real (setup) and as scenario S5.

use anyhow::bail;

use crate::browser::{Browser, expect};

/// Signs the browser in as `user` through the dev identity provider.
pub async fn sign_in(browser: &mut Browser, user: &str) -> anyhow::Result<()> {
    let start = browser.get("/login?return_to=/connections").await?;
    expect(&start, 303, "GET /login")?;
    let idp_page = browser.follow(&start).await?;
    expect(&idp_page, 200, "dev IdP sign-in page")?;
    let back = browser
        .submit(
            &idp_page,
            "/dev/idp/authorize",
            &[("username", user), ("action", "sign-in")],
        )
        .await?;
    expect(&back, 303, "dev IdP sign-in")?;
    let callback = browser.follow(&back).await?;
    expect(&callback, 303, "sign-in callback")?;
    Ok(())
}

/// Opens a connect link in a signed-in browser and approves at the demo
/// provider as `account`. Ends on the "connected" page.
pub async fn connect_link(browser: &mut Browser, link: &str, account: &str) -> anyhow::Result<()> {
    let opened = browser.get(link).await?;
    expect(&opened, 303, "GET /connect?ticket")?;
    // The consent page's address for this link (its id and a tag).
    if !opened
        .location
        .as_deref()
        .is_some_and(|l| l.starts_with("/connect/consent?"))
    {
        bail!(
            "GET /connect?ticket went to {:?}, not the consent page",
            opened.location
        );
    }
    let consent = browser.follow(&opened).await?;
    expect(&consent, 200, "consent page")?;
    let to_provider = browser
        .submit(&consent, "/connect", &[("action", "continue")])
        .await?;
    expect(&to_provider, 303, "POST /connect")?;
    let provider_page = browser.follow(&to_provider).await?;
    expect(&provider_page, 200, "demo provider page")?;
    let back = browser
        .submit(
            &provider_page,
            "/dev/demo/authorize",
            &[("account", account), ("decision", "allow")],
        )
        .await?;
    expect(&back, 303, "demo provider Allow")?;
    let done = browser.follow(&back).await?;
    expect(&done, 200, "OAuth callback")?;
    if !done.body.contains("connected as") {
        bail!(
            "the callback page does not say connected: {}",
            crate::mcp::clip(&done.body)
        );
    }
    Ok(())
}
