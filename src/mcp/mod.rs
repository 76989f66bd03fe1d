//! The MCP endpoint. (Being built.)

use actix_web::web::ServiceConfig;

use crate::startup::AppState;

pub struct McpEndpoint {}

impl McpEndpoint {
    pub fn new(_state: &AppState) -> Self {
        Self {}
    }
}

pub fn configure(_cfg: &mut ServiceConfig) {}
