//! The stylesheet and the icon, compiled into the binary so a deployment is
//! one file.

use actix_web::{HttpResponse, get, web};

const STYLE_CSS: &str = include_str!("../../static/style.css");
const FAVICON_SVG: &str = include_str!("../../static/favicon.svg");

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(style).service(favicon).service(favicon_ico);
}

#[get("/static/style.css")]
async fn style() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header(("Cache-Control", "public, max-age=3600"))
        .body(STYLE_CSS)
}

#[get("/favicon.svg")]
async fn favicon() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("image/svg+xml")
        .insert_header(("Cache-Control", "public, max-age=86400"))
        .body(FAVICON_SVG)
}

/// Browsers and tools that ask for the classic name get the SVG.
#[get("/favicon.ico")]
async fn favicon_ico() -> HttpResponse {
    HttpResponse::PermanentRedirect()
        .insert_header(("Location", "/favicon.svg"))
        .finish()
}
