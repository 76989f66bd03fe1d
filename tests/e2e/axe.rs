//! Accessibility and layout: axe-core (from e2e/node_modules) run in the
//! person's own browser on every page of ours they see, in light and dark
//! colour schemes and at a phone's and a desktop's width; any serious or
//! critical violation fails the scenario. At those widths and two between
//! (a small laptop's, a tablet's), the page must not scroll sideways and
//! no word of a button's label may break over two lines (both passed axe on the
//! connections page and looked broken). The colour scheme and the width
//! are emulated through Chromium's DevTools protocol (chromedriver's
//! `goog/cdp/execute`), so the page, its session and its state stay as
//! they are.

use anyhow::{Context, bail};
use fantoccini::{Client, wd::WebDriverCompatibleCommand};
use serde_json::{Value, json};

const WIDTHS: [u32; 4] = [400, 800, 1000, 1280];
/// The widths axe runs at (it takes a while; the layout check is quick).
const AXE_WIDTHS: [u32; 2] = [400, 1280];
const SCHEMES: [&str; 2] = ["light", "dark"];

/// One DevTools protocol command.
#[derive(Debug)]
struct Cdp {
    cmd: &'static str,
    params: Value,
}

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        let body = json!({ "cmd": self.cmd, "params": self.params });
        (http::Method::POST, Some(body.to_string()))
    }
}

async fn cdp(client: &Client, cmd: &'static str, params: Value) -> anyhow::Result<()> {
    client
        .issue_cmd(Cdp { cmd, params })
        .await
        .with_context(|| format!("DevTools {cmd}"))?;
    Ok(())
}

/// Runs axe and the layout check on the page shown, in every scheme and
/// width; `Err` lists the serious and critical violations and the layout
/// faults.
pub async fn audit(client: &Client, axe_source: &str, page: &str) -> anyhow::Result<()> {
    let mut found = Vec::new();
    for scheme in SCHEMES {
        for width in WIDTHS {
            cdp(
                client,
                "Emulation.setEmulatedMedia",
                json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
            )
            .await?;
            cdp(
                client,
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600 }),
            )
            .await?;
            for v in layout_faults(client).await? {
                found.push(format!("{scheme}, {width}px: {v}"));
            }
            if AXE_WIDTHS.contains(&width) {
                for v in run_axe(client, axe_source).await? {
                    found.push(format!("{scheme}, {width}px: {v}"));
                }
            }
        }
    }
    cdp(client, "Emulation.clearDeviceMetricsOverride", json!({})).await?;
    cdp(
        client,
        "Emulation.setEmulatedMedia",
        json!({ "features": [] }),
    )
    .await?;
    if !found.is_empty() {
        bail!(
            "axe-core or the layout check found faults on {page}:\n{}",
            found.join("\n")
        );
    }
    Ok(())
}

/// What is broken in the layout now, one line each: content wider than
/// the window, a word of a button's label broken over two lines (a long
/// label may wrap between words on a phone; "Rena-me" may not).
async fn layout_faults(client: &Client) -> anyhow::Result<Vec<String>> {
    let result = client
        .execute(
            "const faults = [];
             const wide = document.documentElement.scrollWidth;
             if (wide > window.innerWidth + 1)
               faults.push('the page scrolls sideways: ' + wide + ' px of content in a ' +
                           window.innerWidth + ' px window');
             const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
             for (let node = walker.nextNode(); node; node = walker.nextNode()) {
               if (!node.parentElement.closest('button, a.button')) continue;
               for (const word of node.data.matchAll(/\\S+/g)) {
                 const range = document.createRange();
                 range.setStart(node, word.index);
                 range.setEnd(node, word.index + word[0].length);
                 const parts = [...range.getClientRects()].filter(r => r.width > 0);
                 if (parts.some(r => r.top >= parts[0].bottom - 1))
                   faults.push('a word of a button label breaks over lines: ' + word[0]);
               }
             }
             return faults;",
            vec![],
        )
        .await
        .context("check the layout")?;
    Ok(lines(&result))
}

/// The serious and critical violations axe finds now, one line each.
async fn run_axe(client: &Client, axe_source: &str) -> anyhow::Result<Vec<String>> {
    let loaded = client
        .execute("return typeof window.axe !== 'undefined'", vec![])
        .await?;
    if loaded != json!(true) {
        client
            .execute(&format!("{axe_source}\n;return true;"), vec![])
            .await
            .context("inject axe-core")?;
    }
    let result = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { resultTypes: ['violations'] })
               .then(r => done(r.violations
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')
                 .map(v => v.impact + ' ' + v.id + ': ' + v.help + ' at ' +
                      v.nodes.map(n => n.target.join(' ') + ' (' + (n.failureSummary || '') + ')').join('; '))))
               .catch(e => done(['axe failed: ' + e]));",
            vec![],
        )
        .await
        .context("run axe-core")?;
    Ok(lines(&result))
}

/// A script's answer, a JSON array of strings, as lines.
fn lines(answer: &Value) -> Vec<String> {
    answer
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
