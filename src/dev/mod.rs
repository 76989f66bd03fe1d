//! `mcp-connect dev`: a loopback-only development mode. (Being built.)

use actix_web::web::ServiceConfig;

#[derive(Clone)]
pub struct DevServices {}

pub fn configure(_cfg: &mut ServiceConfig) {}
