//! The values a setting takes when neither the file nor the environment sets
//! it, named in the `#[serde(default = "defaults::…")]` attributes.

use std::net::SocketAddr;

use super::LogFormat;

pub fn bind() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 8080))
}
pub fn yes() -> bool {
    true
}
pub fn db_max_connections() -> u32 {
    20
}
pub fn max_body_bytes() -> usize {
    1024 * 1024
}
pub fn log_format() -> LogFormat {
    LogFormat::Json
}
pub fn subject_claim() -> String {
    "sub".to_owned()
}
pub fn leeway_secs() -> u64 {
    30
}
pub fn ticket_ttl_secs() -> u64 {
    600
}
pub fn request_state_ttl_secs() -> u64 {
    600
}
pub fn links_per_minute() -> u32 {
    60
}
pub fn connect_wait_ms() -> u64 {
    5000
}
pub fn session_ttl_secs() -> u64 {
    8 * 3600
}
