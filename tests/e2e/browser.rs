//! A person's browser: headless Chromium through chromedriver (fantoccini,
//! plain-HTTP WebDriver connector), one fresh profile per person. Every page
//! it lands on can be saved as a screenshot under
//! `target/e2e/screenshots/<scenario>/`, numbered in the order seen.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, bail};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use crate::world::World;

/// How long any single wait for a page may take.
const PAGE_WAIT: Duration = Duration::from_secs(20);

pub struct Browser {
    pub who: String,
    client: Client,
    shots: PathBuf,
    counter: Arc<AtomicU32>,
    /// Our pages (under this base URL) are checked with axe-core.
    ours: String,
    axe: Arc<String>,
}

impl Browser {
    /// A new browser with an empty profile for `who`, saving screenshots in
    /// `shots` numbered by `counter` (shared by a scenario's browsers).
    pub async fn open(
        world: &World,
        who: &str,
        shots: PathBuf,
        counter: Arc<AtomicU32>,
    ) -> anyhow::Result<Browser> {
        let profile = world
            .out
            .join("profiles")
            .join(format!("{who}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&profile)?;
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic",
            "--window-size=1000,800",
            &format!("--user-data-dir={}", profile.display()),
        ];
        // Nothing but loopback exists here: fail other names at once
        // (oidc-provider's pages import a web font) instead of waiting. In
        // the compose smoke test everything is behind Caddy on loopback at
        // `localhost` names, under a certificate of Caddy's CA of this run,
        // whose keys the file `E2E_TRUSTED_SPKI_FILE` names.
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if world.compose.is_some() {
            args.push("--host-resolver-rules=MAP localhost 127.0.0.1, MAP *.localhost 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1".into());
            let spki = std::env::var_os("E2E_TRUSTED_SPKI_FILE")
                .and_then(|f| std::fs::read_to_string(f).ok());
            if let Some(spki) = spki.map(|s| s.trim().to_owned()) {
                args.push(format!("--ignore-certificate-errors-spki-list={spki}"));
            }
        } else {
            args.push("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1".into());
        }
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": world.chromium, "args": args }),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&world.webdriver)
            .await
            .with_context(|| format!("start a browser for {who}"))?;
        std::fs::create_dir_all(&shots)?;
        let axe_path = world.repo.join("e2e/node_modules/axe-core/axe.min.js");
        let axe = std::fs::read_to_string(&axe_path)
            .with_context(|| format!("read {} (run e2e/setup.sh)", axe_path.display()))?;
        Ok(Browser {
            who: who.to_owned(),
            client,
            shots,
            counter,
            ours: format!("{}/", world.base),
            axe: Arc::new(axe),
        })
    }

    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.client
            .goto(url)
            .await
            .with_context(|| format!("{} opens a page", self.who))
    }

    pub async fn url(&self) -> anyhow::Result<url::Url> {
        Ok(self.client.current_url().await?)
    }

    /// Waits until the address starts with `prefix`.
    pub async fn wait_for_url(&self, prefix: &str) -> anyhow::Result<url::Url> {
        let deadline = tokio::time::Instant::now() + PAGE_WAIT;
        loop {
            let url = self.url().await?;
            if url.as_str().starts_with(prefix) && self.loaded().await? {
                return Ok(url);
            }
            if tokio::time::Instant::now() > deadline {
                let text = self.text().await.unwrap_or_default();
                bail!(
                    "{}'s browser never reached {prefix}…; it is at {url}, showing:\n{}",
                    self.who,
                    text.chars().take(600).collect::<String>()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the page's visible text passes `check` (a page that
    /// posts back to its own address changes only its text); `what` names
    /// the wait in the error.
    pub async fn wait_for_text(
        &self,
        what: &str,
        check: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        let deadline = tokio::time::Instant::now() + PAGE_WAIT;
        loop {
            let text = self.text().await?;
            if check(&text) && self.loaded().await? {
                return Ok(text);
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "{}'s browser never showed {what} at {}:\n{}",
                    self.who,
                    self.url_string().await,
                    text.chars().take(600).collect::<String>()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn loaded(&self) -> anyhow::Result<bool> {
        let state = self
            .client
            .execute("return document.readyState", vec![])
            .await?;
        Ok(state == json!("complete"))
    }

    /// The HTTP status of the page shown (Navigation Timing).
    pub async fn status(&self) -> anyhow::Result<u16> {
        let v = self
            .client
            .execute(
                "const n = performance.getEntriesByType('navigation')[0]; return n ? n.responseStatus : null;",
                vec![],
            )
            .await?;
        match v {
            Value::Number(n) => Ok(n.as_u64().unwrap_or(0) as u16),
            other => bail!("no navigation status ({other})"),
        }
    }

    /// The visible text of the page.
    pub async fn text(&self) -> anyhow::Result<String> {
        let v = self
            .client
            .execute(
                "return document.body ? document.body.innerText : ''",
                vec![],
            )
            .await?;
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    /// Saves what the person sees now as `NN-<who>-<label>.png`; a page
    /// of ours is first checked with axe-core (see `axe`).
    pub async fn shot(&self, label: &str) -> anyhow::Result<PathBuf> {
        let n = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
        let path = self.shots.join(format!("{n:02}-{}-{label}.png", self.who));
        let url = self.url().await?;
        if url.as_str().starts_with(&self.ours) {
            crate::axe::audit(
                &self.client,
                &self.axe,
                &format!("{label} ({})", url.path()),
            )
            .await?;
        }
        let png = self.client.screenshot().await?;
        std::fs::write(&path, png)?;
        Ok(path)
    }

    /// Loads the page shown again, as the reload button does.
    pub async fn reload(&self) -> anyhow::Result<()> {
        self.client
            .refresh()
            .await
            .with_context(|| format!("{} reloads the page", self.who))
    }

    pub async fn fill(&self, css: &str, value: &str) -> anyhow::Result<()> {
        let field = self
            .client
            .wait()
            .at_most(PAGE_WAIT)
            .for_element(Locator::Css(css))
            .await
            .with_context(|| format!("find {css}"))?;
        field.clear().await?;
        field.send_keys(value).await?;
        Ok(())
    }

    pub async fn click(&self, css: &str) -> anyhow::Result<()> {
        let element = self
            .client
            .wait()
            .at_most(PAGE_WAIT)
            .for_element(Locator::Css(css))
            .await;
        let element = match element {
            Ok(e) => e,
            Err(e) => bail!(
                "{} looks for {css} on {}: {e}",
                self.who,
                self.url_string().await
            ),
        };
        element.click().await?;
        Ok(())
    }

    /// Clicks the button or link whose text contains `text`.
    pub async fn click_text(&self, text: &str) -> anyhow::Result<()> {
        let xpath = format!(
            "//button[contains(normalize-space(.), '{text}')] | //a[contains(normalize-space(.), '{text}')]"
        );
        let element = self
            .client
            .wait()
            .at_most(PAGE_WAIT)
            .for_element(Locator::XPath(&xpath))
            .await;
        let element = match element {
            Ok(e) => e,
            Err(e) => bail!(
                "{} looks for “{text}” on {}: {e}",
                self.who,
                self.url_string().await
            ),
        };
        element.click().await?;
        Ok(())
    }

    async fn url_string(&self) -> String {
        self.url().await.map(|u| u.to_string()).unwrap_or_default()
    }

    /// Every cookie value the browser holds for the current site.
    pub async fn cookie_values(&self) -> anyhow::Result<Vec<String>> {
        Ok(self
            .client
            .get_all_cookies()
            .await?
            .into_iter()
            .map(|c| c.value().to_owned())
            .collect())
    }

    /// Signs in on an oidc-provider login page (devInteractions: any login,
    /// any password), then agrees on its consent page if one follows.
    /// `site` names the screenshots (`idp`, `provider`).
    pub async fn sign_in_at(&self, issuer: &str, login: &str, site: &str) -> anyhow::Result<()> {
        self.wait_for_url(&format!("{issuer}/interaction/")).await?;
        self.shot(&format!("{site}-login")).await?;
        self.fill("input[name=login]", login).await?;
        self.fill("input[name=password]", "any password").await?;
        self.click("button[type=submit]").await?;
        self.agree_at(issuer, site).await
    }

    /// On an oidc-provider consent page, if one comes (it does not when the
    /// grant exists already): Continue.
    pub async fn agree_at(&self, issuer: &str, site: &str) -> anyhow::Result<()> {
        if self.wait_for_consent(issuer).await? {
            self.shot(&format!("{site}-consent")).await?;
            self.click("button[type=submit]").await?;
        }
        Ok(())
    }

    /// On an oidc-provider consent page: its “[ Cancel ]” link, which answers
    /// the client with `error=access_denied`.
    pub async fn refuse_at(&self, issuer: &str, site: &str) -> anyhow::Result<()> {
        if !self.wait_for_consent(issuer).await? {
            bail!("{} was not asked for consent at {issuer}", self.who);
        }
        self.shot(&format!("{site}-consent")).await?;
        self.click_text("[ Cancel ]").await
    }

    /// Waits for the consent page (`true`) or for the browser to leave the
    /// issuer (`false`).
    async fn wait_for_consent(&self, issuer: &str) -> anyhow::Result<bool> {
        let deadline = tokio::time::Instant::now() + PAGE_WAIT;
        loop {
            let url = self.url().await?;
            if !url.as_str().starts_with(issuer) {
                return Ok(false);
            }
            if url.as_str().starts_with(&format!("{issuer}/interaction/"))
                && self.loaded().await?
                && self
                    .client
                    .find(Locator::Css("input[name=prompt][value=consent]"))
                    .await
                    .is_ok()
            {
                return Ok(true);
            }
            if tokio::time::Instant::now() > deadline {
                bail!("{} saw no consent page at {issuer} (at {url})", self.who);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn close(self) -> anyhow::Result<()> {
        Ok(self.client.close().await?)
    }
}
