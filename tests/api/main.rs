//! Integration tests: the real application on a random port, a fresh
//! Postgres database per test, real HTTP.

// In tests a panic is how a check fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;
mod invalid_params;
mod log_forgery;
mod logs;

mod access_lines;
mod accounts;
mod accounts_disconnect;
mod auth;
mod backend_memory;
mod browser;
mod call_accounts;
mod cli;
mod client_names;
mod connect_mrtr;
mod database_clock;
mod database_clock_tokens;
mod fake_providers;
mod faults;
mod full_flow;
mod grants;
mod headers;
mod health;
mod hot_connections;
mod keep_alive;
mod key_connect;
mod mcp_protocol;
mod metrics;
mod oauth_quirks;
mod operator_cli;
mod param_connect;
mod peer_rmcp;
mod provider_flows;
mod provider_params;
mod reconnect;
mod redaction;
mod refresh_claims;
mod refresh_outage;
mod releases;
mod retention;
mod revocations_owed;
mod rmcp_person;
mod rolling_keys;
mod schema;
mod slow_bodies;
mod slow_refresh;
mod stale_keys;
mod startup;
mod state_rejections;
mod stopping;
mod stored_lifetimes;
mod sweeper;
mod tool_results;
mod users;
mod web_flow;
mod webhooks;
