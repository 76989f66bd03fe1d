//! The stylesheet, compiled into the binary so a deployment is one file.

use actix_web::{HttpResponse, get, web};

const STYLE_CSS: &str = include_str!("../../static/style.css");

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(style);
}

#[get("/static/style.css")]
async fn style() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header(("Cache-Control", "public, max-age=3600"))
        .body(STYLE_CSS)
}
