//! Builds the application from settings: the pool, the key ring, the token
//! verifier, the routes. `Application::build` binds (port 0 works) and
//! `run_until_stopped` serves, so tests boot the real thing in-process.

use std::{net::TcpListener, sync::Arc};

use actix_web::{App, HttpServer, dev::Server, web};
use secrecy::ExposeSecret;
use sqlx::PgPool;

pub use crate::state::AppState;
use crate::{
    auth::TokenVerifier,
    config::Settings,
    connect::{self, ConnectionService},
    crypto::KeyRing,
    db,
    mcp::McpEndpoint,
    metrics::Metrics,
    providers::{ProviderCatalog, ProviderConfigError, outbound_http_client},
    web as pages,
};

/// Why the application cannot start. A cause is part of the message and
/// never also a `source`: `main` prints the whole chain, which would say
/// it twice.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Db(#[from] db::DbSetupError),
    #[error("invalid keys: {0}")]
    Keys(crate::crypto::CryptoError),
    #[error("cannot listen: {0}")]
    Io(std::io::Error),
    #[error("cannot listen on {address} (the `bind` setting, MCP_CONNECT_BIND): {error}")]
    Bind {
        address: std::net::SocketAddr,
        error: std::io::Error,
    },
    #[error("cannot build the HTTP client: {0}")]
    Http(reqwest::Error),
    #[error(transparent)]
    Providers(#[from] ProviderConfigError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Webhooks(#[from] crate::webhooks::SetupError),
    #[error("the service is built on a Tokio runtime, and none is running here")]
    NoRuntime,
}

impl From<crate::crypto::CryptoError> for StartupError {
    fn from(e: crate::crypto::CryptoError) -> Self {
        Self::Keys(e)
    }
}

impl From<std::io::Error> for StartupError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<reqwest::Error> for StartupError {
    fn from(e: reqwest::Error) -> Self {
        Self::Http(e)
    }
}

/// Routes mounted beside the service's own, with their app data.
pub type ExtraRoutes = Arc<dyn Fn(&mut web::ServiceConfig) + Send + Sync>;

pub struct Application {
    port: u16,
    server: Server,
    state: AppState,
    /// The sweeper, the revocation retrier, the webhook deliverer and the
    /// LISTEN task, for as long as the server runs.
    _background: Background,
}

/// The background tasks of a serving instance: the sweeper, the retrier
/// of revocations owed and the webhook deliverer (stopped when this is
/// dropped) and the
/// connection events' LISTEN task (which ends with the connection
/// service). Only `serve` and `dev` start them, through [`Application`];
/// maintenance commands build the state without them.
struct Background {
    _stop: tokio_util::sync::DropGuard,
}

impl Background {
    fn start(state: &AppState, webhooks: crate::webhooks::Endpoints) -> Self {
        state.connect.start_listening();
        let stop = tokio_util::sync::CancellationToken::new();
        crate::sweeper::start(
            state.db.clone(),
            state.settings.clone(),
            SWEEP_EVERY,
            stop.clone(),
        );
        crate::connect::vault::start_retrying(state.connect.clone(), stop.clone());
        // Read page by page over every connection: the instance serves
        // meanwhile (the warning is for the operator, not a condition of
        // serving), and stops reading when it stops.
        tokio::spawn({
            let (connect, stop) = (state.connect.clone(), stop.clone());
            async move {
                tokio::select! {
                    () = crate::connect::stale_keys::warn_about_missing_keys(&connect) => {}
                    () = stop.cancelled() => {}
                    () = connect.until_stopping() => {}
                }
            }
        });
        crate::webhooks::start(
            state.db.clone(),
            webhooks,
            &state.settings.webhooks,
            state.settings.database.deadline(),
            state.metrics.clone(),
            stop.clone(),
            state.connect.drain(),
        );
        Self {
            _stop: stop.drop_guard(),
        }
    }
}

/// Where the app listens.
enum Bind {
    /// On this listener, bound by the caller.
    Bound(TcpListener),
    /// On `settings.bind`, once the database is ready.
    WhenReady,
}

impl Application {
    /// Builds the app and binds `settings.bind` once the database is
    /// ready: a connection made to the port before (a load balancer's, or
    /// a client's sent to a new instance) would wait on an instance that
    /// cannot answer yet.
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        Self::build_on(settings, Bind::WhenReady, None).await
    }

    /// Builds the app on an already bound listener (tests and dev mode bind
    /// first, because the public URL must name the real port). `extra`
    /// mounts more routes (dev mode: the dev identity provider and demo
    /// provider, see `dev::DevServices::routes`).
    pub async fn build_with_listener(
        settings: Settings,
        listener: TcpListener,
        extra: Option<ExtraRoutes>,
    ) -> Result<Self, StartupError> {
        Self::build_on(settings, Bind::Bound(listener), extra).await
    }

    async fn build_on(
        settings: Settings,
        bind: Bind,
        extra: Option<ExtraRoutes>,
    ) -> Result<Self, StartupError> {
        settings.validate_for_serving()?;
        // Refused, like the settings, before anything is touched.
        let webhooks = crate::webhooks::Endpoints::from_settings(&settings.webhooks)?;
        refuse_unusable(&settings)?;
        let options = db::connect_options(&settings.database_url)?;
        db::wait::prepare_database(
            &options,
            settings.database.startup_timeout(),
            settings.database.connect_timeout(),
            settings.database_create_if_missing,
        )
        .await?;
        let listener = match bind {
            Bind::Bound(listener) => listener,
            Bind::WhenReady => {
                TcpListener::bind(settings.bind).map_err(|error| StartupError::Bind {
                    address: settings.bind,
                    error,
                })?
            }
        };
        let options = db::faults::with_timeouts(options, &settings.database);
        let (pooled, _) = db::split_connections(settings.database_max_connections);
        let stops = db::worker_stops::WorkerStops::default();
        let timeout = settings.database.connect_timeout();
        let pool = db::serving_pool(options, pooled, timeout, &stops);
        let state = build_state(settings, pool)?;
        let background = Background::start(&state, webhooks);
        let port = listener.local_addr()?.port();
        let server = serve(state.clone(), listener, extra, stops)?;
        Ok(Self {
            port,
            server,
            state,
            _background: background,
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
    /// user's connection answer at once, then in-flight requests drain, and
    /// the work that runs to its end whatever became of its request (a
    /// refresh, a connect's code exchange, a disconnect) finishes: both
    /// within [`crate::config::SHUTDOWN_DRAIN`] of the signal.
    pub async fn run_until_signalled(self) -> Result<(), std::io::Error> {
        let handle = self.server.handle();
        let state = self.state.clone();
        let drain_ends = Arc::new(std::sync::OnceLock::new());
        let signalled = drain_ends.clone();
        let signals = crate::shutdown::drain_until_second_signal(handle, move || {
            let _ = signalled.set(tokio::time::Instant::now() + crate::config::SHUTDOWN_DRAIN);
            state.begin_shutdown();
        });
        let mut signals = std::pin::pin!(signals);
        let served = tokio::select! {
            served = self.server => served,
            () = &mut signals => return Ok(()),
        };
        let deadline = drain_ends
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now);
        tokio::select! {
            _ = self.state.connect.finish_work_under_way(deadline) => {}
            () = &mut signals => {}
        }
        served
    }

    /// The server handle, to stop it gracefully.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }
}

/// How often each instance offers to sweep expired rows.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(300);

/// What [`build_state`] would refuse — the keys, the provider entries, the
/// client names — found before the database is created, waited for or
/// migrated: a provider's missing secret is the message, not a database
/// that happened to be down as well.
pub fn refuse_unusable(settings: &Settings) -> Result<(), StartupError> {
    KeyRing::from_entries(settings.keys.iter().map(|k| k.expose_secret()))?;
    ProviderCatalog::from_settings(settings)?;
    crate::connect::clients::ClientNames::new(settings)?;
    Ok(())
}

/// The application's state for a maintenance command (`purge`, `tokens`):
/// the database migrated first, as `serve` does, then a pool of two with
/// the service's statement and lock timeouts — a command waiting on a row
/// a request holds gives up as the service would, not never. Starts
/// nothing in the background.
pub async fn for_maintenance(settings: Settings) -> Result<AppState, StartupError> {
    refuse_unusable(&settings)?;
    let options = db::connect_options(&settings.database_url)?;
    // Migrations may run longer than a statement may.
    let migrating = db::pool(options.clone(), 1);
    db::migrate(&migrating, settings.database.connect_timeout()).await?;
    migrating.close().await;
    let options = db::faults::with_timeouts(options, &settings.database);
    let pool = db::pool_with(options, 2, settings.database.connect_timeout());
    build_state(settings, pool)
}

/// The application's state from settings and a migrated pool. Starts
/// nothing in the background.
pub fn build_state(settings: Settings, pool: PgPool) -> Result<AppState, StartupError> {
    let keys = Arc::new(KeyRing::from_entries(
        settings.keys.iter().map(|k| k.expose_secret()),
    )?);
    let http = outbound_http_client()?;
    let verifier = TokenVerifier::new(&settings.auth, settings.mcp_resource(), http.clone());
    let providers = ProviderCatalog::from_settings(&settings)?;
    let (_, hot) = db::split_connections(settings.database_max_connections);
    let hot_db = db::hot::HotConnections::new((*pool.connect_options()).clone(), hot, pool.clone())
        .with_connect_timeout(settings.database.connect_timeout());
    let client_names = Arc::new(crate::connect::clients::ClientNames::new(&settings)?);
    let settings = Arc::new(settings);
    let metrics = Arc::new(Metrics::default());
    let connect = ConnectionService::new(connect::Parts {
        db: pool.clone(),
        hot_db,
        keys: keys.clone(),
        http: http.clone(),
        providers: Arc::new(providers),
        client_names,
        base_url: settings.base_url(),
        settings: settings.clone(),
        metrics: metrics.clone(),
        // Built on the process's runtime (`serve`, `dev`, the commands),
        // whose handle is the one the workers' runtimes do not have.
        runtime: tokio::runtime::Handle::try_current().map_err(|_| StartupError::NoRuntime)?,
    });
    Ok(AppState {
        settings,
        db: pool,
        keys,
        verifier: Arc::new(verifier),
        http,
        connect,
        sign_in_metadata: Arc::default(),
        metrics,
    })
}

fn serve(
    state: AppState,
    listener: TcpListener,
    extra: Option<ExtraRoutes>,
    stops: db::worker_stops::WorkerStops,
) -> Result<Server, std::io::Error> {
    let mcp = web::Data::new(McpEndpoint::new(&state).map_err(std::io::Error::other)?);
    // The settings alone, for handlers that need nothing else.
    let settings = web::Data::from(state.settings.clone());
    let keep_alive = state.settings.keep_alive();
    let data = web::Data::new(state);
    let server = HttpServer::new(move || {
        // Everything but `/mcp` gets the pages' access line, error pages
        // and time limit; `/mcp` writes its own line, answers in JSON-RPC
        // with a deadline on each statement, and is spared these layers on
        // the path every MCP request takes.
        let site = web::scope("")
            .wrap(actix_web::middleware::from_fn(
                crate::web::deadline::page_deadline,
            ))
            .wrap(actix_web::middleware::from_fn(
                pages::error_pages::with_user,
            ))
            .wrap(actix_web::middleware::from_fn(
                crate::web::access_log::access_log,
            ))
            .configure(crate::auth::configure)
            .configure(pages::configure);
        let site = match &extra {
            Some(extra) => site.configure(|cfg| extra(cfg)),
            None => site,
        };
        App::new()
            // Dropped when this worker stops: the pool then refuses the
            // connections it opened, which die with its runtime.
            .app_data(stops.worker_life())
            .wrap(pages::headers::security_headers(&data.settings))
            .app_data(data.clone())
            .app_data(settings.clone())
            .app_data(mcp.clone())
            .configure(crate::mcp::configure)
            .service(site)
    })
    .keep_alive(keep_alive)
    .listen(listener)?
    .shutdown_timeout(crate::config::SHUTDOWN_DRAIN.as_secs())
    // SIGTERM and Ctrl-C are handled in `run_until_stopped`: waiting
    // requests are told first, then the server drains.
    .disable_signals()
    .run();
    Ok(server)
}
