//! A browser as far as the connect flow needs one: a cookie jar, redirects
//! followed by hand (one hop at a time, each checked), and forms submitted
//! with their hidden fields (CSRF tokens among them). HTML is read the way
//! the integration tests read it (`tests/api/browser.rs`).

use std::collections::BTreeMap;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use http_body_util::Full;

use crate::client::{Conn, Reply};

pub struct Browser {
    /// One connection per origin visited, the server's first.
    conns: BTreeMap<String, Conn>,
    /// The server's origin: where bare paths go.
    base: String,
    /// One jar, as a browser keeps for a host whatever its port.
    cookies: BTreeMap<String, String>,
}

/// One answer, as the flow code looks at it.
pub struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
    /// Where it came from: a form's relative action goes back there.
    origin: String,
}

impl Browser {
    pub fn new(base: &str) -> anyhow::Result<Self> {
        let base = base.trim_end_matches('/').to_owned();
        Ok(Self {
            conns: BTreeMap::from([(base.clone(), Conn::new(&base)?)]),
            base,
            cookies: BTreeMap::new(),
        })
    }

    /// The origin and path of a path on the server or an absolute URL
    /// (another loopback server's: S4's upstream's consent page).
    fn target(&self, path_or_url: &str) -> anyhow::Result<(String, String)> {
        if path_or_url.starts_with('/') {
            return Ok((self.base.clone(), path_or_url.to_owned()));
        }
        let url = url::Url::parse(path_or_url)
            .with_context(|| format!("neither a path nor a URL: {path_or_url}"))?;
        let origin = url.origin().ascii_serialization();
        let path = &url[url::Position::BeforePath..];
        Ok((origin, path.to_owned()))
    }

    fn with_cookies(&self, mut request: http::Request<Full<Bytes>>) -> http::Request<Full<Bytes>> {
        if !self.cookies.is_empty() {
            let header: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if let Ok(value) = http::HeaderValue::from_str(&header.join("; ")) {
                request.headers_mut().insert(http::header::COOKIE, value);
            }
        }
        request
    }

    fn keep_cookies(&mut self, reply: &Reply) {
        for header in reply.headers.get_all(http::header::SET_COOKIE) {
            let Ok(header) = header.to_str() else {
                continue;
            };
            let mut attributes = header.split(';');
            let Some((name, value)) = attributes.next().and_then(|p| p.split_once('=')) else {
                continue;
            };
            let expired = attributes.any(|a| {
                let a = a.trim().to_ascii_lowercase();
                a == "max-age=0" || a.starts_with("expires=thu, 01 jan 1970")
            });
            if expired || value.is_empty() {
                self.cookies.remove(name.trim());
            } else {
                self.cookies
                    .insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
    }

    async fn send(
        &mut self,
        origin: String,
        request: http::Request<Full<Bytes>>,
    ) -> anyhow::Result<Page> {
        let request = self.with_cookies(request);
        let conn = match self.conns.entry(origin.clone()) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(Conn::new(&origin)?),
        };
        let reply = conn.send(request).await?;
        self.keep_cookies(&reply);
        Ok(Page {
            status: reply.status,
            location: reply.header("location").map(str::to_owned),
            body: reply.text(),
            origin,
        })
    }

    pub async fn get(&mut self, path_or_url: &str) -> anyhow::Result<Page> {
        let (origin, path) = self.target(path_or_url)?;
        let request = http::Request::get(path).body(Full::new(Bytes::new()))?;
        self.send(origin, request).await
    }

    pub async fn post_form(
        &mut self,
        path_or_url: &str,
        fields: &[(String, String)],
    ) -> anyhow::Result<Page> {
        let (origin, path) = self.target(path_or_url)?;
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let request = http::Request::post(path)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(Full::new(Bytes::from(body)))?;
        self.send(origin, request).await
    }

    /// Follows a redirect one hop.
    pub async fn follow(&mut self, page: &Page) -> anyhow::Result<Page> {
        let location = page.location.clone().ok_or_else(|| {
            anyhow!(
                "expected a redirect, got {}: {}",
                page.status,
                clip(&page.body)
            )
        })?;
        if location.starts_with('/') {
            let url = format!("{}{location}", page.origin);
            return self.get(&url).await;
        }
        self.get(&location).await
    }

    /// Submits the form whose action is `action`: its hidden fields plus `extra`.
    pub async fn submit(
        &mut self,
        page: &Page,
        action: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Page> {
        let mut fields = form_fields(&page.body, action)
            .with_context(|| format!("no form for {action} on the page: {}", clip(&page.body)))?;
        fields.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let action_url = if action.starts_with('/') {
            format!("{}{action}", page.origin)
        } else {
            action.to_owned()
        };
        self.post_form(&action_url, &fields).await
    }
}

/// Fails unless `page` has `status`.
pub fn expect(page: &Page, status: u16, step: &str) -> anyhow::Result<()> {
    if page.status != status {
        bail!(
            "{step}: HTTP {} (wanted {status}): {}",
            page.status,
            clip(&page.body)
        );
    }
    Ok(())
}

fn clip(s: &str) -> String {
    crate::mcp::clip(s)
}

/// The hidden inputs of the first `<form>` whose action is `action`.
pub fn form_fields(html: &str, action: &str) -> Option<Vec<(String, String)>> {
    let mut rest = html;
    while let Some(start) = rest.find("<form") {
        let form = &rest[start..];
        let end = form.find("</form>").unwrap_or(form.len());
        let (form, after) = form.split_at(end);
        let tag_end = form.find('>').unwrap_or(form.len());
        if attribute(&form[..tag_end], "action").as_deref() == Some(action) {
            return Some(hidden_inputs(form));
        }
        rest = after;
    }
    None
}

fn hidden_inputs(form: &str) -> Vec<(String, String)> {
    form.match_indices("<input")
        .filter_map(|(i, _)| {
            let tag = &form[i..];
            let tag = &tag[..tag.find('>')?];
            let name = attribute(tag, "name")?;
            (attribute(tag, "type").as_deref() == Some("hidden"))
                .then(|| (name, attribute(tag, "value").unwrap_or_default()))
        })
        .collect()
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    let end = tag[start..].find('"')? + start;
    Some(unescape(&tag[start..end]))
}

/// Undoes askama's HTML escaping.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let tail = &rest[amp..];
        let Some(semi) = tail.find(';') else {
            out.push_str(tail);
            return out;
        };
        let entity = &tail[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &tail[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_fields_of_the_named_form() {
        let html = r#"<form action="/x"><input type="hidden" name="a" value="1"></form>
            <form method="post" action="/connect"><input type="hidden" name="csrf" value="t&amp;k">
            <input type="text" name="visible" value="no"></form>"#;
        assert_eq!(
            form_fields(html, "/connect"),
            Some(vec![("csrf".to_owned(), "t&k".to_owned())])
        );
        assert_eq!(form_fields(html, "/nope"), None);
    }
}
