//! How an MCP client is named to its user. An operator's name for a known
//! client id comes first; a client id that is an https URL is an OAuth
//! Client ID Metadata Document, fetched (address-checked, size- and
//! time-limited, cached) for its `client_name`, shown with the host that
//! served it; anything else, or a document that cannot be used, is shown
//! as the bare id. A name from a document is the client's own claim: the
//! pages show the id beside it.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use futures::{
    FutureExt,
    future::{BoxFuture, Shared},
};
use url::{Host, Url};

use crate::{
    config::Settings,
    domain::shown_text::is_shown,
    providers::{guarded, is_public},
};

/// Largest document read (the draft's suggested limit).
const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// The whole fetch, connect to last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);
const CACHE_OK: Duration = Duration::from_secs(3600);
const CACHE_FAILED: Duration = Duration::from_secs(300);
const CACHE_ENTRIES: usize = 1024;
const MAX_NAME_CHARS: usize = 80;
const MAX_CLIENT_ID_LEN: usize = 1024;

/// A client as shown on a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientName {
    /// The client id as the token carries it.
    pub id: String,
    /// A name, when the operator or the client's metadata gives one.
    pub name: Option<String>,
    /// The host its metadata document was fetched from.
    pub host: Option<String>,
}

impl ClientName {
    /// The client shown by its id alone.
    pub fn bare(client_id: &str) -> Self {
        Self {
            id: client_id.to_owned(),
            name: None,
            host: None,
        }
    }

    /// The name, else the id.
    pub fn shown(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

#[derive(Clone)]
struct Metadata {
    name: Option<String>,
    host: Option<String>,
}

/// One document's fetch, awaited by every page that asked for it while it
/// ran.
type Flight = Shared<BoxFuture<'static, Option<Metadata>>>;

pub struct ClientNames {
    names: HashMap<String, String>,
    trusted_hosts: Vec<String>,
    allow_http: bool,
    guarded: reqwest::Client,
    trusted: reqwest::Client,
    documents: Arc<Documents>,
}

/// What is known of the documents, and which are being fetched.
#[derive(Default)]
struct Documents {
    cache: Mutex<HashMap<String, (Instant, Option<Metadata>)>>,
    /// At most one fetch per document at a time, across requests: two
    /// tabs, or a client in both of a page's lists, wait for the same one.
    /// Locked before `cache` wherever both are.
    in_flight: Mutex<HashMap<String, Flight>>,
}

impl ClientNames {
    pub fn new(settings: &Settings) -> Result<Self, reqwest::Error> {
        let builder = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(FETCH_TIMEOUT)
                .user_agent(concat!("mcp-connect/", env!("CARGO_PKG_VERSION")))
        };
        Ok(Self {
            names: settings
                .clients
                .names
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            trusted_hosts: settings.clients.metadata_trusted_hosts.clone(),
            allow_http: settings.insecure_http,
            guarded: guarded(builder()).build()?,
            trusted: builder().build()?,
            documents: Arc::default(),
        })
    }

    /// Several clients, as a page lists them: each id once, their documents
    /// fetched together, so the page waits one fetch's time limit at most
    /// (not one per client, which a few slow documents would stretch past
    /// the page's own limit).
    pub async fn describe_all<'a>(
        &self,
        client_ids: impl IntoIterator<Item = &'a str>,
    ) -> HashMap<String, ClientName> {
        let unique: std::collections::BTreeSet<&str> = client_ids.into_iter().collect();
        futures::future::join_all(unique.into_iter().map(|id| self.describe(id)))
            .await
            .into_iter()
            .map(|client| (client.id.clone(), client))
            .collect()
    }

    /// The client as it should be shown. Never fails: the id is the fallback.
    pub async fn describe(&self, client_id: &str) -> ClientName {
        let bare = ClientName::bare(client_id);
        if let Some(name) = self.names.get(client_id) {
            return ClientName {
                name: Some(name.clone()),
                ..bare
            };
        }
        let Some(url) = self.metadata_url(client_id) else {
            return bare;
        };
        let metadata = match self.documents.cached(client_id) {
            Some(found) => found,
            None => self.fetch_once(client_id, url).await,
        };
        match metadata {
            Some(m) => ClientName {
                name: m.name,
                host: m.host,
                ..bare
            },
            None => bare,
        }
    }

    /// The client id as a document URL, if it is one we may fetch.
    fn metadata_url(&self, client_id: &str) -> Option<Url> {
        if client_id.len() > MAX_CLIENT_ID_LEN {
            return None;
        }
        let url = Url::parse(client_id).ok()?;
        // Only an id that is already a URL's one spelling: the parser
        // lowercases hosts, turns international names into punycode,
        // resolves `..` and escapes what it must, and the page shows the id
        // as the client sent it. The document would otherwise name a
        // client whose id reads differently (the draft compares the
        // strings exactly).
        if url.as_str() != client_id {
            return None;
        }
        let scheme_ok = url.scheme() == "https" || (self.allow_http && url.scheme() == "http");
        let shaped = scheme_ok
            && url.username().is_empty()
            && url.password().is_none()
            && url.fragment().is_none()
            && url.path() != "/";
        if !shaped {
            return None;
        }
        if self.is_trusted(&url) {
            return Some(url);
        }
        // reqwest does not resolve an address literal: check it here.
        let public = match url.host()? {
            Host::Domain(_) => true,
            Host::Ipv4(ip) => is_public(IpAddr::V4(ip)),
            Host::Ipv6(ip) => is_public(IpAddr::V6(ip)),
        };
        // A document is served on its scheme's port; any other port of a
        // host that is not trusted is not fetched (the name shown or not
        // would tell whoever chose the id what answers there).
        (public && url.port().is_none()).then_some(url)
    }

    fn is_trusted(&self, url: &Url) -> bool {
        let host = url.host_str().unwrap_or_default();
        let with_port = url
            .port_or_known_default()
            .map(|p| format!("{host}:{p}"))
            .unwrap_or_default();
        self.trusted_hosts
            .iter()
            .any(|t| t.eq_ignore_ascii_case(host) || t.eq_ignore_ascii_case(&with_port))
    }

    /// The document's fetch under way, or a new one. The fetch runs as a
    /// task of its own: a page that stops waiting (its deadline, a closed
    /// tab) leaves it to finish for the others, and its answer is cached
    /// before the flight ends.
    fn fetch_once(&self, client_id: &str, url: Url) -> Flight {
        let mut flights = lock(&self.documents.in_flight);
        if let Some(flight) = flights.get(client_id) {
            return flight.clone();
        }
        // One that ended between the caller's look at the cache and here.
        if let Some(found) = self.documents.cached(client_id) {
            return futures::future::ready(found).boxed().shared();
        }
        let client = if self.is_trusted(&url) {
            self.trusted.clone()
        } else {
            self.guarded.clone()
        };
        let landing = Landing {
            documents: Arc::clone(&self.documents),
            client_id: client_id.to_owned(),
            landed: false,
        };
        let task = tokio::spawn(async move {
            let found = fetch(&client, &url).await;
            landing.land(found.clone());
            found
        });
        // A task that panicked has landed (as a failure) on its way out.
        let flight = task.map(|joined| joined.ok().flatten()).boxed().shared();
        flights.insert(client_id.to_owned(), flight.clone());
        flight
    }
}

impl Documents {
    fn cached(&self, client_id: &str) -> Option<Option<Metadata>> {
        let cache = lock(&self.cache);
        let (at, value) = cache.get(client_id)?;
        (at.elapsed() < ttl_of(value)).then(|| value.clone())
    }

    fn remember(&self, client_id: &str, value: Option<Metadata>) {
        let mut cache = lock(&self.cache);
        // Full: what is stale goes first, then the failures (a flood of
        // made-up ids is all failures), and only then the older half of
        // the documents that named their clients — never the whole cache.
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (at, found)| at.elapsed() < ttl_of(found));
        }
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (_, found)| found.is_some());
        }
        if cache.len() >= CACHE_ENTRIES {
            let mut ages: Vec<Instant> = cache.values().map(|(at, _)| *at).collect();
            ages.sort_unstable();
            if let Some(&cut) = ages.get(ages.len() / 2) {
                cache.retain(|_, (at, _)| *at > cut);
            }
        }
        cache.insert(client_id.to_owned(), (Instant::now(), value));
    }
}

/// Ends a document's flight: its answer cached, then the flight gone, one
/// step for whoever looks (both locks held). Dropped without landing (the
/// fetch panicked, or the runtime is stopping), it ends the flight as a
/// failure, so that the next page fetches again rather than wait on it.
struct Landing {
    documents: Arc<Documents>,
    client_id: String,
    landed: bool,
}

impl Landing {
    fn land(mut self, found: Option<Metadata>) {
        self.end(found);
        self.landed = true;
    }

    fn end(&self, found: Option<Metadata>) {
        let mut flights = lock(&self.documents.in_flight);
        self.documents.remember(&self.client_id, found);
        flights.remove(&self.client_id);
    }
}

impl Drop for Landing {
    fn drop(&mut self) {
        if !self.landed {
            self.end(None);
        }
    }
}

/// A lock whose holder panicked is still good: every write under these
/// leaves the maps whole.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The document at `url`, or `None` (logged) when it cannot be used.
async fn fetch(client: &reqwest::Client, url: &Url) -> Option<Metadata> {
    match fetch_document(client, url).await {
        Ok(m) => Some(m),
        Err(why) => {
            tracing::info!(client_id = %crate::db::audit::client_id(url.as_str()), why, "client metadata not used");
            None
        }
    }
}

/// How long a document's answer is kept: a name for an hour, a failure
/// for five minutes.
fn ttl_of(found: &Option<Metadata>) -> Duration {
    if found.is_some() {
        CACHE_OK
    } else {
        CACHE_FAILED
    }
}

async fn fetch_document(client: &reqwest::Client, url: &Url) -> Result<Metadata, &'static str> {
    let mut response = client
        .get(url.clone())
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|_| "fetch failed")?;
    if !response.status().is_success() {
        return Err("not 2xx");
    }
    let mut body = Vec::new();
    loop {
        match tokio::time::timeout(FETCH_TIMEOUT, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                    return Err("too large");
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Ok(None)) => break,
            Ok(Err(_)) | Err(_) => return Err("read failed"),
        }
    }
    let doc: serde_json::Value = serde_json::from_slice(&body).map_err(|_| "not JSON")?;
    // The document must name itself: anything else is not this client's.
    if doc.get("client_id").and_then(|v| v.as_str()) != Some(url.as_str()) {
        return Err("client_id does not match the URL");
    }
    let name = doc
        .get("client_name")
        .and_then(|v| v.as_str())
        .map(clean)
        .filter(|n| !n.is_empty());
    let claimed = doc
        .get("client_uri")
        .and_then(|v| v.as_str())
        .and_then(|u| Url::parse(u).ok())
        .filter(|u| u.scheme() == "https" || u.scheme() == "http");
    let host = url
        .host_str()
        .map(|served_from| shown_host(served_from, claimed.as_ref().and_then(Url::host_str)));
    Ok(Metadata { name, host })
}

/// The host a page names the client by: the one that served the
/// document. Its `client_uri` is the client's own claim — anyone's
/// document can say `https://claude.ai` — and not even a host under the
/// serving one is its owner's where that host serves many (a bucket at
/// `storage.example.com/bucket/…` could claim `victim.storage.example.com`).
/// So the claim counts only for the serving host itself.
fn shown_host(served_from: &str, claimed: Option<&str>) -> String {
    match claimed {
        Some(claimed) if claimed.eq_ignore_ascii_case(served_from) => claimed.to_ascii_lowercase(),
        _ => served_from.to_owned(),
    }
}

/// A display name: nothing a reader cannot see (`domain::shown_text`),
/// bounded length.
fn clean(raw: &str) -> String {
    raw.chars()
        .filter(|&c| is_shown(c))
        .take(MAX_NAME_CHARS)
        .collect::<String>()
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_and_bounded() {
        assert_eq!(clean(" Bad\u{7}\nName "), "BadName");
        assert_eq!(clean(&"x".repeat(500)).len(), MAX_NAME_CHARS);
        assert_eq!(
            clean("Assistant\u{202E}gpj.exe\u{200B}"),
            "Assistantgpj.exe"
        );
    }

    fn names() -> ClientNames {
        let settings =
            crate::providers::test_catalog::settings_with("https://connect.example.com", "");
        ClientNames::new(&settings).unwrap()
    }

    #[test]
    fn a_flood_of_failures_leaves_the_named_clients_cached() {
        let documents = names().documents;
        let named = Metadata {
            name: Some("Assistant".into()),
            host: None,
        };
        documents.remember("https://named.example/client", Some(named));
        // Named a while ago: past a failure's five minutes, within the hour.
        let ten_minutes_ago = Instant::now()
            .checked_sub(Duration::from_secs(600))
            .unwrap();
        documents
            .cache
            .lock()
            .unwrap()
            .get_mut("https://named.example/client")
            .unwrap()
            .0 = ten_minutes_ago;
        for n in 0..3 * CACHE_ENTRIES {
            documents.remember(&format!("https://made-up.example/{n}"), None);
        }
        let cache = documents.cache.lock().unwrap();
        assert!(cache.len() <= CACHE_ENTRIES);
        assert!(cache.contains_key("https://named.example/client"));
    }

    #[test]
    fn only_a_documents_own_spelling_on_its_default_port_is_fetched() {
        let names = names();
        assert!(
            names
                .metadata_url("https://client.example/meta.json")
                .is_some()
        );
        for id in [
            "https://client.example:8443/meta.json",
            "https://CLIENT.example/meta.json",
            "https://client.example/a/../meta.json",
            "https://client.example:443/meta.json",
            "https://client.example/",
            "https://user@client.example/meta.json",
            "https://127.0.0.1/meta.json",
            "https://[::1]/meta.json",
        ] {
            assert!(names.metadata_url(id).is_none(), "{id}");
        }
    }

    #[test]
    fn the_host_shown_is_the_one_that_served_the_document() {
        assert_eq!(
            shown_host("docs.example", Some("claude.ai")),
            "docs.example"
        );
        assert_eq!(shown_host("docs.example", None), "docs.example");
        assert_eq!(
            shown_host("example.com", Some("EXAMPLE.com")),
            "example.com"
        );
        // Neither a host beneath it (a shared host's), nor above it, nor a
        // look-alike.
        assert_eq!(
            shown_host("storage.example.com", Some("victim.storage.example.com")),
            "storage.example.com"
        );
        assert_eq!(
            shown_host("evil.github.io", Some("github.io")),
            "evil.github.io"
        );
        assert_eq!(shown_host("x.co", Some("evilx.co")), "x.co");
    }
}
