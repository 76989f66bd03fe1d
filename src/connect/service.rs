//! [`ConnectionService`]: the one value that owns what deciding about a
//! user's account needs — the pools (with the per-thread hot connections),
//! the key ring, the provider catalog, the outbound HTTP client, the
//! connection events, the refresh locks, the link limit and the flow
//! settings. Tools, resources and web pages hold it (or a reference to it)
//! and call its operations; none of them reaches the tables directly.
//!
//! Building it starts nothing: the LISTEN task behind [`ConnectionEvents`]
//! is started by whoever serves (see [`ConnectionService::start_listening`]).

use crate::domain::{ProviderName, UserRef};
use std::sync::Arc;

use rmcp::ErrorData;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{
    Access, Need, UsableToken,
    clients::ClientNames,
    credentials::{self, CredentialOutcome, SubmittedCredential},
    events::ConnectionEvents,
    flows::{self, FinishError, StartedFlow},
    link_limit::LinkLimit,
    locks::KeyedLocks,
    tickets::{self, IssuedTicket},
    vault,
};
use crate::{
    config::Settings,
    crypto::{KeyRing, secret},
    db::{
        self, connections::ConnectionSummary, hot::HotConnections, oauth_flows::OAuthFlow,
        tickets::Ticket,
    },
    metrics::Metrics,
    providers::{Account, Provider, ProviderCatalog},
};

/// The connection service. One per application; shared behind an `Arc`.
pub struct ConnectionService {
    /// Transactions and the rarer statements.
    pub(super) db: PgPool,
    /// For the one-statement reads and writes of every MCP request; see
    /// [`crate::db::hot`].
    pub(super) hot_db: HotConnections,
    pub(super) keys: Arc<KeyRing>,
    /// Outbound HTTP to providers. Never follows redirects.
    pub(super) http: reqwest::Client,
    pub(super) providers: Arc<ProviderCatalog>,
    /// "A connection was stored", from any instance.
    pub(super) events: Arc<ConnectionEvents>,
    /// One caller per connection at a time within this instance waits for
    /// a refresh; the others wait here rather than on the database (the
    /// claim is what keeps refreshes apart, this instance's included: a
    /// refresh whose caller went away runs on without the lock).
    pub(super) refresh_locks: KeyedLocks,
    /// When this instance last refreshed each connection's tokens because
    /// the provider refused them (`vault::refreshed_after_refusal`): at
    /// most once a minute, whatever came of it.
    pub(super) refusal_refreshes:
        std::sync::Mutex<std::collections::HashMap<Uuid, std::time::Instant>>,
    /// Refreshes of an expiring token the provider refused for good, each
    /// standing a minute (`vault::RefusedRefreshes`).
    pub(super) refused_refreshes: super::vault::RefusedRefreshes,
    /// Refreshes under way in this instance, at most half the pool: each
    /// holds a pooled connection (and the row's lock) while the provider
    /// answers, and a slow provider must not take every connection that
    /// pages, flows and other providers' refreshes need.
    pub(super) refreshes: Arc<tokio::sync::Semaphore>,
    /// Work that must end once begun whoever waits for it (a refresh the
    /// provider may have answered with rotated tokens, a connect's code
    /// exchange, a disconnect): spawned here, and waited for when the
    /// server stops.
    pub(super) to_the_end: tokio_util::task::TaskTracker,
    /// The runtime the service was built on, which outlives the server's
    /// workers: each worker runs a runtime of its own, dropped (with every
    /// task spawned on it) when the worker stops, before the server's drain
    /// has ended. Work that must end is spawned here.
    pub(super) runtime: tokio::runtime::Handle,
    /// This service, for the work it spawns (`to_the_end`).
    pub(super) this: std::sync::Weak<ConnectionService>,
    /// New connect links per user and minute.
    pub(super) link_limit: LinkLimit,
    /// Pasted credentials checked at a provider, per user and minute.
    pub(super) credential_checks: LinkLimit,
    /// The operator's settings (flow, database deadlines, grants, clients).
    pub(super) settings: Arc<Settings>,
    /// How MCP clients are named on pages (operator names, Client ID
    /// Metadata Documents).
    pub(super) client_names: Arc<ClientNames>,
    /// Cancelled when the server begins to shut down: requests that wait
    /// (for a user's connection) answer at once instead of being cut off.
    pub(super) shutdown: CancellationToken,
    /// Set with `shutdown`, for the check every request makes: the token's
    /// own check takes a lock that every worker would contend for.
    stopping: std::sync::atomic::AtomicBool,
    /// The public base URL, without a trailing slash (connect links).
    pub(super) base_url: String,
    pub(super) metrics: Arc<Metrics>,
}

/// A connected account as pages and tools name it. Never a token.
pub struct ConnectedAccount {
    pub account_label: String,
    pub account_id: String,
}

/// What the service is built from.
pub struct Parts {
    pub db: PgPool,
    pub hot_db: HotConnections,
    pub keys: Arc<KeyRing>,
    pub http: reqwest::Client,
    pub providers: Arc<ProviderCatalog>,
    pub client_names: Arc<ClientNames>,
    pub settings: Arc<Settings>,
    pub base_url: String,
    pub metrics: Arc<Metrics>,
    /// The runtime that outlives the server's workers (the process's own).
    pub runtime: tokio::runtime::Handle,
}

/// Half the pooled connections (at least one) may be held by refreshes.
fn refreshes_at_once(settings: &Settings) -> usize {
    let (pooled, _) = db::split_connections(settings.database_max_connections);
    (pooled as usize / 2).max(1)
}

/// How a serving instance stops, for its background loops: `begun` is
/// cancelled when it begins to stop, and work tracked by `work` is waited
/// for (within the drain) before it exits.
#[derive(Clone)]
pub struct Drain {
    pub begun: CancellationToken,
    pub work: tokio_util::task::TaskTracker,
}

impl ConnectionService {
    pub fn new(parts: Parts) -> Arc<Self> {
        Arc::new_cyclic(|this| Self {
            link_limit: LinkLimit::new(parts.settings.flow.links_per_minute),
            credential_checks: LinkLimit::new(super::credentials::CHECKS_PER_MINUTE),
            db: parts.db,
            hot_db: parts.hot_db,
            keys: parts.keys,
            http: parts.http,
            providers: parts.providers,
            events: Arc::new(ConnectionEvents::new()),
            refresh_locks: KeyedLocks::default(),
            refusal_refreshes: std::sync::Mutex::default(),
            refused_refreshes: Default::default(),
            refreshes: Arc::new(tokio::sync::Semaphore::new(refreshes_at_once(
                &parts.settings,
            ))),
            to_the_end: tokio_util::task::TaskTracker::new(),
            runtime: parts.runtime,
            this: this.clone(),
            settings: parts.settings,
            client_names: parts.client_names,
            shutdown: CancellationToken::new(),
            stopping: std::sync::atomic::AtomicBool::new(false),
            base_url: parts.base_url,
            metrics: parts.metrics,
        })
    }

    /// Starts the task that turns other instances' "connection stored"
    /// notifications into wake-ups here. It ends when the service is dropped.
    pub fn start_listening(&self) {
        // LISTEN holds its connection for ever: one of its own, outside the
        // pool, so the pool keeps every connection it was given. A pool of
        // one for each time it listens: a connection that died silently is
        // left behind with its pool (sqlx's UNLISTEN on it waits until the
        // kernel gives up), not waited for.
        let options = (*self.db.connect_options()).clone();
        let timeout = self.settings.database.connect_timeout();
        ConnectionEvents::listen(&self.events, move || {
            db::pool_with(options.clone(), 1, timeout)
        });
    }

    /// Tells every request waiting for a user's connection that the server
    /// is stopping: they answer at once instead of being cut off.
    pub fn begin_shutdown(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::Release);
        self.shutdown.cancel();
    }

    /// Waits until `begin_shutdown` is called.
    pub async fn until_stopping(&self) {
        self.shutdown.cancelled().await;
    }

    /// What a background loop needs to stop with the server: the signal
    /// that it is stopping (take no new work), and the tracker of the work
    /// it waits for ([`Self::finish_work_under_way`]) while the loop
    /// finishes what it took.
    pub fn drain(&self) -> Drain {
        Drain {
            begun: self.shutdown.clone(),
            work: self.to_the_end.clone(),
        }
    }

    /// Whether `begin_shutdown` has been called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Runs `work` in a task of its own that ends whoever waits for it:
    /// its caller may go away (a cancelled request, a page past its time
    /// limit) and the work still runs to its end. Each such work bounds
    /// its own time; the server waits for them when it stops
    /// ([`Self::finish_work_under_way`]).
    pub fn run_to_the_end<F>(&self, work: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.to_the_end.spawn_on(work, &self.runtime)
    }

    /// Runs `work` on this service (owned) to its end, as
    /// [`Self::run_to_the_end`] does, and waits for what it returns.
    /// `what` names the work in the error of one that panicked.
    pub(super) async fn to_the_end_of<T, F, Fut>(&self, what: &str, work: F) -> anyhow::Result<T>
    where
        F: FnOnce(Arc<Self>) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        // Cannot fail: `self` is borrowed from the `Arc` that `new` made.
        let this = self
            .this
            .upgrade()
            .ok_or_else(|| anyhow::anyhow!("the connection service is gone"))?;
        self.run_to_the_end(work(this))
            .await
            .map_err(|e| anyhow::anyhow!("{what} stopped before it ended: {e}"))?
    }

    /// When the server has stopped: waits until `deadline` for the work
    /// begun with [`Self::run_to_the_end`]; `false` when some was still
    /// running then (and is dropped with the process).
    pub async fn finish_work_under_way(&self, deadline: tokio::time::Instant) -> bool {
        self.to_the_end.close();
        let finished = tokio::time::timeout_at(deadline, self.to_the_end.wait())
            .await
            .is_ok();
        if !finished {
            tracing::warn!(
                under_way = self.to_the_end.len(),
                "stopping with work under way: a refresh or a connect may not have stored what the provider answered, a disconnect not revoked, or a webhook delivery not been recorded (it is sent again)"
            );
        }
        finished
    }

    /// The operator's settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// How MCP clients are named on pages.
    pub fn client_names(&self) -> &ClientNames {
        &self.client_names
    }

    /// A configured provider by name.
    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.get(name)
    }

    /// "A connection was stored" wake-ups, from any instance.
    pub fn events(&self) -> &ConnectionEvents {
        &self.events
    }

    /// The provider catalog.
    pub fn providers(&self) -> &ProviderCatalog {
        &self.providers
    }

    /// The outbound HTTP client, for calling a provider's API as the user.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The public base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The key ring (the maintenance commands name its current key).
    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// How many per-thread connections are open (for `/metrics`).
    pub fn hot_connections_open(&self) -> usize {
        self.hot_db.open()
    }

    pub fn hot_connections_overflowed(&self) -> u64 {
        self.hot_db.overflowed()
    }
}

/// The operations tools, resources and web pages use.
impl ConnectionService {
    /// A usable token for the request's need, or what the user must do first.
    pub async fn require<'s>(&'s self, need: Need<'_>) -> Result<Access<'s>, ErrorData> {
        super::require(self, need).await
    }

    /// The user's connections, by provider, then oldest first. Never a
    /// token.
    pub async fn list(&self, user: UserRef<'_>) -> Result<Vec<ConnectionSummary>, sqlx::Error> {
        let limit = self.settings.database.deadline();
        db::faults::deadline(limit, db::connections::list_for_user(&self.db, user)).await
    }

    /// The provider refused `token` on an API call: unless a newer token was
    /// stored meanwhile, the connection needs the user again.
    pub async fn token_rejected(&self, token: &UsableToken) -> anyhow::Result<bool> {
        vault::token_rejected(self, token).await
    }

    /// The provider refused `token` before its time: a refreshed token to
    /// try again with, if a refresh can get one (see
    /// [`vault::refreshed_after_refusal`]).
    pub async fn refreshed_after_refusal(
        &self,
        token: &UsableToken,
        provider: &Provider,
    ) -> Option<UsableToken> {
        vault::refreshed_after_refusal(self, token, provider).await
    }

    /// Deletes, revokes upstream where possible, audits; `true` when a
    /// connection was deleted.
    pub async fn disconnect(
        &self,
        user: UserRef<'_>,
        provider: &ProviderName,
    ) -> anyhow::Result<bool> {
        vault::disconnect(self, user, provider).await
    }

    /// Re-seals every stored token with the current key.
    pub async fn rekey(&self) -> anyhow::Result<vault::Rekeyed> {
        vault::rekey_all(self).await
    }

    /// Mints a connect ticket (the web page's Reconnect; the MCP side mints
    /// its own inside [`Self::require`]).
    pub async fn issue_ticket(
        &self,
        user: UserRef<'_>,
        client_id: &str,
        provider: &ProviderName,
        scopes: &[String],
    ) -> anyhow::Result<IssuedTicket> {
        tickets::issue(self, user, client_id, provider, scopes).await
    }

    /// Whether `user` has as many accounts at `provider` as the settings
    /// allow (`Some` then, with the counts): another is refused before it
    /// is asked of the provider.
    pub async fn account_limit_reached(
        &self,
        user: UserRef<'_>,
        provider: &ProviderName,
    ) -> Result<Option<super::accounts::AtLimit>, sqlx::Error> {
        super::accounts::limit_reached(self, user, provider).await
    }

    /// The most accounts one person may have at one provider.
    pub fn accounts_per_provider(&self) -> u32 {
        self.settings.flow.accounts_per_provider
    }

    /// A connect ticket for another account at `provider`.
    pub async fn issue_another_account_ticket(
        &self,
        user: UserRef<'_>,
        client_id: &str,
        provider: &ProviderName,
    ) -> anyhow::Result<IssuedTicket> {
        // The consent sends the browser to the provider's account chooser.
        let purpose = tickets::TicketFor::AnotherAccount;
        tickets::insert(self, user, client_id, provider, &[], purpose).await
    }

    /// The usable ticket behind a presented secret.
    pub async fn find_usable_ticket(&self, presented: &str) -> Result<Option<Ticket>, sqlx::Error> {
        tickets::find_usable(self, presented).await
    }

    /// A ticket by id, whatever its state.
    pub async fn ticket(&self, id: Uuid) -> Result<Option<Ticket>, sqlx::Error> {
        db::tickets::find_by_id(&self.db, id).await
    }

    /// The person said Cancel: a usable ticket of theirs is declined.
    pub async fn decline_ticket(&self, id: Uuid, user: UserRef<'_>) -> Result<bool, sqlx::Error> {
        db::tickets::decline(&self.db, id, user).await
    }

    /// The provider a ticket names, and the scopes the ticket asks of it.
    pub fn ticket_provider(&self, ticket: &Ticket) -> anyhow::Result<(&Provider, Vec<String>)> {
        let provider = flows::provider_of(self, ticket)?;
        Ok((provider, tickets::requested_scopes(provider, ticket)))
    }

    /// The person said Continue: the ticket is redeemed for them and the
    /// flow recorded with the connection's parameters (checked by
    /// `Provider::check_connect_params`), in one transaction; `None` when
    /// the ticket was no longer usable (a concurrent Continue won).
    pub async fn start_flow(
        &self,
        ticket: &Ticket,
        user: UserRef<'_>,
        session_id: Uuid,
        params: &db::params::Params,
    ) -> anyhow::Result<Option<StartedFlow>> {
        flows::start(self, ticket, user, session_id, params).await
    }

    /// A second Continue from the session that started the ticket's flow
    /// (a double click), with the same parameters: that flow again under a
    /// new `state` and verifier, the first redirect's void; `None` when
    /// this session has no unfinished flow for the ticket with these
    /// parameters.
    pub async fn resume_flow(
        &self,
        ticket: &Ticket,
        session_id: Uuid,
        params: &db::params::Params,
    ) -> anyhow::Result<Option<StartedFlow>> {
        flows::resume(self, ticket, session_id, params).await
    }

    /// The person submitted an API key or Basic credential for this
    /// ticket: checked against the entry, then at the provider, and only
    /// then stored (redeeming the ticket in the same transaction).
    pub async fn connect_with_credential(
        &self,
        ticket: &Ticket,
        user: UserRef<'_>,
        session_id: Uuid,
        submitted: SubmittedCredential<'_>,
    ) -> anyhow::Result<CredentialOutcome> {
        credentials::connect(self, ticket, user, session_id, submitted).await
    }

    /// The flow a provider's `state` parameter names.
    pub async fn find_flow(&self, flow_state: &str) -> Result<Option<OAuthFlow>, sqlx::Error> {
        db::oauth_flows::find_by_state_hash(&self.db, &secret::sha256(flow_state)).await
    }

    /// Marks the flow completed; `None` if it already was (single use).
    pub async fn complete_flow(
        &self,
        id: Uuid,
        flow_state: &str,
    ) -> Result<Option<OAuthFlow>, sqlx::Error> {
        db::oauth_flows::complete(&self.db, id, &crate::crypto::secret::sha256(flow_state)).await
    }

    /// Deletes a flow that must not be retried.
    pub async fn discard_flow(&self, id: Uuid) -> Result<bool, sqlx::Error> {
        db::oauth_flows::delete(&self.db, id).await
    }

    /// A flow whose exchange failed or was cut short (a panic, or past its
    /// window) is deleted unless its connection was stored (a commit whose
    /// answer was lost may have stored it), within the database's
    /// deadline; `true` when it was deleted.
    pub async fn discard_unfinished_flow(&self, id: Uuid) -> Result<bool, sqlx::Error> {
        let deleted = db::oauth_flows::delete_unfinished(&self.db, id);
        db::faults::deadline(self.settings.database.deadline(), deleted).await
    }

    /// A callback for flow `id` came from another browser session: `true`
    /// the first time (to audit once per flow).
    pub async fn note_foreign_callback(&self, id: Uuid) -> Result<bool, sqlx::Error> {
        db::oauth_flows::note_foreign_callback(&self.db, id).await
    }

    /// The provider refused the flow's authorization with `code`: its
    /// ticket says so to the MCP client's retry.
    pub async fn refuse_flow(&self, id: Uuid, code: &str) -> Result<bool, sqlx::Error> {
        db::oauth_flows::refuse_ticket(&self.db, id, code).await
    }

    /// The person declined at the provider: the flow's ticket is declined.
    pub async fn decline_flow(&self, id: Uuid) -> Result<bool, sqlx::Error> {
        db::oauth_flows::decline_ticket(&self.db, id).await
    }

    /// Finishes a completed flow: the code exchanged (with the flow's PKCE
    /// verifier, which the caller opened), the account read, the
    /// connection stored.
    pub async fn finish_flow(
        &self,
        flow: &OAuthFlow,
        provider: &Provider,
        callback: flows::Callback<'_>,
        user: UserRef<'_>,
    ) -> Result<(Uuid, Account), FinishError> {
        flows::finish(self, flow, provider, callback, user).await
    }
}
