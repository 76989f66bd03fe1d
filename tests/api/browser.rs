//! A browser for the web tests: its own cookie store, redirects off (each hop
//! is seen and followed by hand), and helpers for the dev identity
//! provider's sign-in page and for submitting a page's forms with their
//! hidden fields (the CSRF token among them).

use std::sync::Arc;

use reqwest::{Url, cookie::Jar, header::HeaderMap};

use crate::helpers::TestApp;

pub struct Browser {
    pub client: reqwest::Client,
    pub jar: Arc<Jar>,
    base: String,
}

/// One response, read whole.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
    /// The `Location` header, if any.
    pub location: Option<String>,
    /// Every `Set-Cookie` header, as sent.
    pub set_cookies: Vec<String>,
}

impl Page {
    /// The `Set-Cookie` header for the cookie named `name`.
    pub fn set_cookie(&self, name: &str) -> Option<&str> {
        self.set_cookies
            .iter()
            .find(|c| c.starts_with(&format!("{name}=")))
            .map(String::as_str)
    }

    /// The `Set-Cookie` headers of sign-ins in progress (each is named
    /// after its own `state`).
    pub fn set_login_cookies(&self) -> Vec<&str> {
        self.set_cookies
            .iter()
            .filter(|c| c.starts_with("mcp_connect_login_"))
            .map(String::as_str)
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Browser {
    pub fn new(app: &TestApp) -> Self {
        Self::at(&app.base)
    }

    /// A browser for a service at `base` that is not a [`TestApp`].
    pub fn at(base: &str) -> Self {
        let jar = Arc::new(Jar::default());
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .cookie_provider(jar.clone())
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("browser client");
        Self {
            client,
            jar,
            base: base.to_owned(),
        }
    }

    /// An absolute URL for a path on the app (absolute URLs pass through).
    pub fn url(&self, path_or_url: &str) -> String {
        if path_or_url.starts_with("http://") || path_or_url.starts_with("https://") {
            path_or_url.to_owned()
        } else {
            format!("{}{path_or_url}", self.base)
        }
    }

    pub async fn get(&self, path_or_url: &str) -> Page {
        read(
            self.client
                .get(self.url(path_or_url))
                .send()
                .await
                .expect("GET"),
        )
        .await
    }

    pub async fn post_form(&self, path_or_url: &str, fields: &[(String, String)]) -> Page {
        let response = self
            .client
            .post(self.url(path_or_url))
            .form(fields)
            .send()
            .await
            .expect("POST");
        read(response).await
    }

    /// Follows a redirect one hop.
    pub async fn follow(&self, page: &Page) -> Page {
        let location = page
            .location
            .as_deref()
            .unwrap_or_else(|| panic!("expected a redirect, got {}: {}", page.status, page.body));
        self.get(location).await
    }

    /// Submits the form whose `action` is `action` on `page`: its hidden
    /// fields (CSRF token included) plus `extra`.
    pub async fn submit(&self, page: &Page, action: &str, extra: &[(&str, &str)]) -> Page {
        let mut fields = form_fields(&page.body, action)
            .unwrap_or_else(|| panic!("no form for {action} on the page: {}", page.body));
        fields.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self.post_form(action, &fields).await
    }

    /// Signs in as `user` from scratch: `/login?return_to=/connections`
    /// through the dev identity provider. Returns the callback's answer (a
    /// 303 to the return path, with the session cookie).
    pub async fn sign_in(&self, user: &str) -> Page {
        let start = self.get("/login?return_to=/connections").await;
        self.sign_in_from(start, user).await
    }

    /// Completes a sign-in from a page that redirects to the identity
    /// provider. Returns the callback's answer.
    pub async fn sign_in_from(&self, start: Page, user: &str) -> Page {
        let back = self.back_from_idp(start, user).await;
        let callback = self.follow(&back).await;
        assert_eq!(callback.status, 303, "sign-in callback: {}", callback.body);
        callback
    }

    /// Signs in as `user` at the identity provider `start` redirects to:
    /// the provider's redirect back to the sign-in callback, not followed.
    pub async fn back_from_idp(&self, start: Page, user: &str) -> Page {
        assert_eq!(
            start.status, 303,
            "not a redirect to sign in: {}",
            start.body
        );
        let idp_page = self.follow(&start).await;
        assert_eq!(idp_page.status, 200, "dev IdP page: {}", idp_page.body);
        let back = self
            .submit(
                &idp_page,
                "/dev/idp/authorize",
                &[("username", user), ("action", "sign-in")],
            )
            .await;
        assert_eq!(back.status, 303, "dev IdP answer: {}", back.body);
        back
    }

    /// The value of the cookie `name` this browser holds for the app.
    pub fn cookie(&self, name: &str) -> Option<String> {
        use reqwest::cookie::CookieStore;
        let url = Url::parse(&self.base).expect("base url");
        let header = self.jar.cookies(&url)?;
        header
            .to_str()
            .ok()?
            .split("; ")
            .find_map(|pair| pair.strip_prefix(&format!("{name}=")).map(str::to_owned))
    }
}

async fn read(response: reqwest::Response) -> Page {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let location = headers
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let set_cookies = headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect();
    let body = response.text().await.expect("body");
    Page {
        status,
        headers,
        body,
        location,
        set_cookies,
    }
}

/// The named inputs of the first `<form>` whose action is `action`.
pub fn form_fields(html: &str, action: &str) -> Option<Vec<(String, String)>> {
    let mut rest = html;
    while let Some(start) = rest.find("<form") {
        let form = &rest[start..];
        let end = form.find("</form>").unwrap_or(form.len());
        let (form, after) = form.split_at(end);
        let tag_end = form.find('>').unwrap_or(form.len());
        if attribute(&form[..tag_end], "action").as_deref() == Some(action) {
            return Some(inputs(form));
        }
        rest = after;
    }
    None
}

/// The hidden and text inputs of a form (buttons are added by the caller).
fn inputs(form: &str) -> Vec<(String, String)> {
    form.match_indices("<input")
        .filter_map(|(i, _)| {
            let tag = &form[i..];
            let tag = &tag[..tag.find('>')?];
            let name = attribute(tag, "name")?;
            let kind = attribute(tag, "type").unwrap_or_default();
            (kind == "hidden").then(|| (name, attribute(tag, "value").unwrap_or_default()))
        })
        .collect()
}

/// An attribute's value in a tag (double-quoted, as askama writes them).
fn attribute(tag: &str, name: &str) -> Option<String> {
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    let end = tag[start..].find('"')? + start;
    Some(unescape(&tag[start..end]))
}

/// Undoes askama's HTML escaping.
pub fn unescape(s: &str) -> String {
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
