//! The browser side and the operational endpoints. Each module registers its
//! own routes.

pub mod assets;
pub mod health;

use actix_web::web::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    assets::configure(cfg);
    health::configure(cfg);
}
