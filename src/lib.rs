//! mcp-connect: an MCP server that lets MCP clients use a person's
//! third-party accounts without the client or the model ever seeing a
//! third-party credential. See README.md for the whole picture.

pub mod auth;
pub mod config;
pub mod connect;
pub mod crypto;
pub mod db;
pub mod dev;
pub mod domain;
pub mod healthcheck;
pub mod mcp;
pub mod metrics;
pub mod providers;
mod shards;
pub mod shutdown;
pub mod startup;
pub mod state;
pub mod sweeper;
pub mod telemetry;
pub mod tools;
pub mod web;
pub mod webhooks;
