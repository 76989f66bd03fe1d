//! Builds the application from settings: the pool, the key ring, the token
//! verifier, the routes. `Application::build` binds (port 0 works) and
//! `run_until_stopped` serves, so tests boot the real thing in-process.

use std::{net::TcpListener, sync::Arc};

use actix_web::{App, HttpServer, dev::Server, web};
use secrecy::ExposeSecret;
use sqlx::PgPool;

use crate::{
    auth::TokenVerifier,
    config::Settings,
    connect::events::ConnectionEvents,
    crypto::KeyRing,
    db,
    dev::DevServices,
    mcp::McpEndpoint,
    providers::{ProviderCatalog, ProviderConfigError},
    web as pages,
};

/// What every request handler may use. Cheap to clone (all `Arc`s).
#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub db: PgPool,
    /// For the one-statement reads and writes of every MCP request; see
    /// [`db::hot`]. Transactions use `db`.
    pub hot_db: db::hot::HotConnections,
    pub keys: Arc<KeyRing>,
    pub verifier: Arc<TokenVerifier>,
    /// Outbound HTTP (issuer metadata, JWKS, providers). Never follows redirects.
    pub http: reqwest::Client,
    /// The third-party providers users can connect.
    pub providers: Arc<ProviderCatalog>,
    /// "A connection was stored", from any instance.
    pub events: Arc<ConnectionEvents>,
    /// One refresh per connection at a time within this instance.
    pub refresh_locks: Arc<crate::connect::locks::KeyedLocks>,
    /// New connect links per user and minute.
    pub link_limit: Arc<crate::connect::link_limit::LinkLimit>,
    /// How MCP clients are named on pages (operator names, Client ID
    /// Metadata Documents).
    pub client_names: Arc<crate::connect::clients::ClientNames>,
    /// The identity provider's metadata for starting web sign-ins.
    pub sign_in_metadata: Arc<crate::web::oidc::StartMetadata>,
    /// This instance's counters, read by `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Cancelled when the server begins to shut down: requests that wait
    /// (for a user's connection) answer at once instead of being cut off.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Stops the background sweeper when the last clone of the state goes.
    _sweeper: Arc<tokio_util::sync::DropGuard>,
}

impl AppState {
    /// Tells every waiting request that the server is stopping.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Db(#[from] db::DbSetupError),
    #[error("invalid keys: {0}")]
    Keys(#[from] crate::crypto::CryptoError),
    #[error("cannot listen: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    #[error(transparent)]
    Providers(#[from] ProviderConfigError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
}

pub struct Application {
    port: u16,
    server: Server,
    state: AppState,
}

impl Application {
    /// Binds `settings.bind` and builds the app.
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        let listener = TcpListener::bind(settings.bind)?;
        Self::build_with_listener(settings, listener, None).await
    }

    /// Builds the app on an already bound listener (tests and dev mode bind
    /// first, because the public URL must name the real port). `dev` mounts
    /// the dev identity provider and demo provider.
    pub async fn build_with_listener(
        settings: Settings,
        listener: TcpListener,
        dev: Option<DevServices>,
    ) -> Result<Self, StartupError> {
        settings.validate_for_serving()?;
        let options = db::connect_options(&settings.database_url)?;
        db::wait::prepare_database(
            &options,
            settings.database.startup_timeout(),
            settings.database_create_if_missing,
        )
        .await?;
        let options = db::faults::with_timeouts(options, &settings.database);
        let (pooled, _) = db::split_connections(settings.database_max_connections);
        let pool = db::pool_with(options, pooled, settings.database.connect_timeout());
        let state = build_state(settings, pool)?;
        crate::connect::stale_keys::warn_about_missing_keys(&state).await;
        let port = listener.local_addr()?.port();
        let server = serve(state.clone(), listener, dev)?;
        Ok(Self {
            port,
            server,
            state,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub async fn run_until_stopped(self) -> Result<(), std::io::Error> {
        self.server.await
    }

    /// Serves until SIGTERM or Ctrl-C. On a signal, requests waiting for a
    /// user's connection answer at once, then in-flight requests drain for
    /// at most [`crate::config::SHUTDOWN_DRAIN`].
    pub async fn run_until_signalled(self) -> Result<(), std::io::Error> {
        let handle = self.server.handle();
        let state = self.state.clone();
        let signals = tokio::spawn(async move {
            crate::shutdown::signalled().await;
            tracing::info!("shutting down: answering waiting requests, then draining");
            state.begin_shutdown();
            handle.stop(true).await;
        });
        let served = self.server.await;
        signals.abort();
        served
    }

    /// The server handle, to stop it gracefully.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }
}

/// How often each instance offers to sweep expired rows.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(300);

pub fn outbound_http_client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(15))
        .user_agent(concat!("mcp-connect/", env!("CARGO_PKG_VERSION")))
        .build()
}

pub fn build_state(settings: Settings, pool: PgPool) -> Result<AppState, StartupError> {
    let keys = KeyRing::from_entries(settings.keys.iter().map(|k| k.expose_secret()))?;
    let http = outbound_http_client()?;
    let verifier = TokenVerifier::new(&settings.auth, settings.mcp_resource(), http.clone());
    let providers = ProviderCatalog::from_settings(&settings)?;
    let link_limit = Arc::new(crate::connect::link_limit::LinkLimit::new(
        settings.flow.links_per_minute,
    ));
    let (_, hot) = db::split_connections(settings.database_max_connections);
    let hot_db = db::hot::HotConnections::new((*pool.connect_options()).clone(), hot, pool.clone())
        .with_connect_timeout(settings.database.connect_timeout());
    // LISTEN holds its connection for ever: one of its own, outside the
    // pool, so the pool keeps every connection it was given.
    let listen = db::pool_with(
        (*pool.connect_options()).clone(),
        1,
        settings.database.connect_timeout(),
    );
    let events = ConnectionEvents::start(listen);
    let client_names = Arc::new(crate::connect::clients::ClientNames::new(&settings)?);
    let stop_sweeper = tokio_util::sync::CancellationToken::new();
    let settings = Arc::new(settings);
    crate::sweeper::start(
        pool.clone(),
        settings.clone(),
        SWEEP_EVERY,
        stop_sweeper.clone(),
    );
    Ok(AppState {
        settings,
        db: pool,
        hot_db,
        keys: Arc::new(keys),
        verifier: Arc::new(verifier),
        http,
        providers: Arc::new(providers),
        events,
        refresh_locks: Arc::default(),
        link_limit,
        client_names,
        sign_in_metadata: Arc::default(),
        metrics: Arc::default(),
        shutdown: tokio_util::sync::CancellationToken::new(),
        _sweeper: Arc::new(stop_sweeper.drop_guard()),
    })
}

fn serve(
    state: AppState,
    listener: TcpListener,
    dev: Option<DevServices>,
) -> Result<Server, std::io::Error> {
    let mcp = web::Data::new(McpEndpoint::new(&state));
    let data = web::Data::new(state);
    let dev = dev.map(web::Data::new);
    let server = HttpServer::new(move || {
        let app = App::new()
            .wrap(actix_web::middleware::from_fn(
                pages::error_pages::with_user,
            ))
            .wrap(pages::headers::security_headers(&data.settings))
            .wrap(actix_web::middleware::from_fn(
                crate::web::access_log::access_log,
            ))
            .app_data(data.clone())
            .app_data(mcp.clone())
            .configure(crate::mcp::configure)
            .configure(crate::auth::configure)
            .configure(pages::configure);
        match &dev {
            Some(dev) => app.app_data(dev.clone()).configure(crate::dev::configure),
            None => app,
        }
    })
    .listen(listener)?
    .shutdown_timeout(crate::config::SHUTDOWN_DRAIN.as_secs())
    // SIGTERM and Ctrl-C are handled in `run_until_stopped`: waiting
    // requests are told first, then the server drains.
    .disable_signals()
    .run();
    Ok(server)
}
