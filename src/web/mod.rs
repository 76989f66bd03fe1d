//! The browser side and the operational endpoints. Each module registers its
//! own routes.

pub mod health;

use actix_web::web::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    health::configure(cfg);
}
