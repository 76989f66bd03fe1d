//! The end-to-end suite: the real `mcp-connect` binary with real peers on
//! loopback — oidc-provider as the authorization server and as the
//! third-party provider (plus an API that introspects its tokens), the MCP
//! Python SDK as the client, headless Chromium as the user's browser.
//! See e2e/README.md.
//!
//! Its own harness (libtest-mimic), so that the peers start once for all
//! scenarios and are stopped, and the database dropped, after the last one.
//! Every scenario is marked ignored: plain `cargo test` lists them and
//! starts nothing; `bash e2e/run.sh` (which installs the peers first) runs
//! them with `--ignored`.

// In tests a panic is how a check fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod axe;
mod browser;
mod client;
mod compose;
mod procs;
mod scenarios;
mod secrets;
mod tokens;
mod world;

use std::{
    future::Future,
    path::{Path, PathBuf},
    pin::Pin,
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use libtest_mimic::{Arguments, Failed, Trial};

use scenarios::Scenario;
use world::World;

type Run =
    for<'a, 'w> fn(&'a mut Scenario<'w>) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'a>>;

/// The scenarios, in the order of priority.
const SCENARIOS: &[(&str, Run)] = &[
    ("alice_connects", |s| {
        Box::pin(scenarios::alice_connects::run(s))
    }),
    ("phishing_link", |s| {
        Box::pin(scenarios::phishing_link::run(s))
    }),
    ("legacy_client", |s| {
        Box::pin(scenarios::legacy_client::run(s))
    }),
    ("decline_and_cancel", |s| {
        Box::pin(scenarios::decline_and_cancel::run(s))
    }),
    ("switch_account", |s| {
        Box::pin(scenarios::switch_account::run(s))
    }),
    ("alice_pastes_a_key", |s| {
        Box::pin(scenarios::alice_pastes_a_key::run(s))
    }),
    ("client_grants", |s| {
        Box::pin(scenarios::client_grants::run(s))
    }),
];

/// The compose smoke test's one scenario, which replaces the others when
/// `E2E_COMPOSE` is set (scripts/compose-smoke.sh).
const COMPOSE_SCENARIOS: &[(&str, Run)] = &[("compose_stack", |s| {
    Box::pin(scenarios::compose_stack::run(s))
})];

/// Longest a scenario may take before it counts as hung.
const SCENARIO_LIMIT: Duration = Duration::from_secs(600);

fn main() {
    let args = Arguments::from_args();
    let world: Arc<OnceLock<World>> = Arc::new(OnceLock::new());
    let scenarios = if std::env::var_os("E2E_COMPOSE").is_some() {
        COMPOSE_SCENARIOS
    } else {
        SCENARIOS
    };
    let trials = scenarios
        .iter()
        .map(|&(name, run)| {
            let world = world.clone();
            Trial::test(name, move || scenario(&world, name, run)).with_ignored_flag(true)
        })
        .collect();

    let will_run = (args.ignored || args.include_ignored)
        && !args.list
        && scenarios.iter().any(|(name, _)| selected(&args, name));
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::var_os("E2E_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("../e2e"));
    // Chromium resolves `..` in its profile path, chromedriver does not.
    let _ = std::fs::create_dir_all(&out);
    let out = std::fs::canonicalize(&out).unwrap_or(out);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if will_run {
        let missing = world::missing_peers(&repo);
        if !missing.is_empty() {
            eprintln!(
                "e2e: peers missing (install them with `bash e2e/setup.sh`):\n  {}",
                missing.join("\n  ")
            );
            std::process::exit(2);
        }
        let started = Instant::now();
        match runtime.block_on(World::start(repo, out)) {
            Ok(w) => {
                eprintln!(
                    "e2e: world up in {:.1}s (mcp-connect at {}, logs in {})",
                    started.elapsed().as_secs_f64(),
                    w.base,
                    w.logs.display()
                );
                let _ = world.set(w);
            }
            Err(e) => {
                eprintln!("e2e: the world did not start: {e:#}");
                std::process::exit(2);
            }
        }
    }

    let conclusion = libtest_mimic::run(&args, trials);

    let mut leaked = false;
    if let Some(w) = world.get() {
        if let Err(e) = runtime.block_on(w.shutdown()) {
            eprintln!("e2e: shutdown: {e:#}");
        }
        // The server is gone: whatever it logged after a scenario's own
        // check is in the files now.
        if let Err(e) = w.seen.lock().expect("seen").check_logs(w) {
            eprintln!("e2e: after the last scenario, {e:#}");
            leaked = true;
        }
        eprintln!("e2e: screenshots in {}", w.shots.display());
    }
    if leaked {
        std::process::exit(101);
    }
    conclusion.exit();
}

/// Whether libtest's filter arguments select scenario `name`.
fn selected(args: &Arguments, name: &str) -> bool {
    let matches = |pattern: &str| {
        if args.exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    };
    args.filter.as_deref().is_none_or(matches) && !args.skip.iter().any(|s| matches(s))
}

/// Runs one scenario on its own runtime; a failure carries the error chain
/// and the end of every log.
fn scenario(world: &OnceLock<World>, name: &'static str, run: Run) -> Result<(), Failed> {
    let world = world.get().ok_or("the world is not running")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let outcome = runtime.block_on(async {
        let mut s = Scenario::new(world, name);
        match tokio::time::timeout(SCENARIO_LIMIT, run(&mut s)).await {
            Ok(result) => result,
            Err(_) => Err(anyhow::anyhow!(
                "hung: still running after {SCENARIO_LIMIT:?}"
            )),
        }
    });
    eprintln!("e2e: {name} took {:.1}s", started.elapsed().as_secs_f64());
    outcome.map_err(|e| {
        Failed::from(format!(
            "{e:#}\n\nscreenshots: {}\n{}",
            world.shots.join(name).display(),
            world.log_tails(25)
        ))
    })
}
