//! Integration tests: the real application on a random port, a fresh
//! Postgres database per test, real HTTP.

// In tests a panic is how a check fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;
mod logs;

mod auth;
mod browser;
mod cli;
mod connect_mrtr;
mod fakes;
mod full_flow;
mod health;
mod hot_connections;
mod mcp_protocol;
mod metrics;
mod operator_cli;
mod peer_rmcp;
mod provider_flows;
mod schema;
mod web_flow;
