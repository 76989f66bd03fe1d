//! OAuth 2.0 Protected Resource Metadata (RFC 9728): how an MCP client that
//! got a 401 learns which authorization server to ask for a token for
//! `/mcp`. Served at the path-inserted well-known URL for `/mcp` and at the
//! bare one, which clients try when the first is missing.

use actix_web::{
    HttpResponse,
    http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL},
    web,
};
use serde_json::{Value, json};

use super::configured_issuer;
use crate::config::Settings;

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(WELL_KNOWN, web::get().to(protected_resource_metadata))
        .route(
            &format!("{WELL_KNOWN}/mcp"),
            web::get().to(protected_resource_metadata),
        );
}

/// The metadata URL for `resource_metadata` in `WWW-Authenticate`: RFC 9728
/// §3.1 inserts the well-known segment between the host and the resource's
/// path (`public_url` is a site's root: see `config::validate`).
pub fn resource_metadata_url(settings: &Settings) -> String {
    let mut url = settings.public_url.clone();
    url.set_path(&format!("{WELL_KNOWN}/mcp"));
    url.to_string()
}

/// The metadata document. `scopes_supported` is always present (possibly
/// empty) so clients need not tell "none" from "unknown".
pub fn metadata_document(settings: &Settings) -> Value {
    json!({
        "resource": settings.mcp_resource(),
        "authorization_servers": [advertised_issuer(settings)],
        "scopes_supported": settings.auth.scopes_supported,
        "bearer_methods_supported": ["header"],
        "resource_name": "mcp-connect",
    })
}

/// The issuer as its own metadata spells it, which clients compare
/// exactly (RFC 8414 §3.3): a root issuer keeps the `/` the operator wrote.
fn advertised_issuer(settings: &Settings) -> String {
    let issuer = &settings.auth.issuer;
    let bare = configured_issuer(issuer);
    if settings.auth.issuer_written_with_slash && issuer.path() == "/" && issuer.query().is_none() {
        format!("{bare}/")
    } else {
        bare
    }
}

async fn protected_resource_metadata(settings: web::Data<Settings>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CACHE_CONTROL, "max-age=300"))
        // Public, credential-free metadata; browser-based MCP clients read it
        // cross-origin.
        .insert_header((ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
        .json(metadata_document(&settings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::{App, test as actix_test};

    fn settings(extra: &[(&str, &str)]) -> Settings {
        let base = [
            ("MCP_CONNECT_PUBLIC_URL", "https://connect.example.com"),
            ("MCP_CONNECT_DATABASE_URL", "postgres://localhost/unused"),
            (
                "MCP_CONNECT_KEYS",
                "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
            ),
            ("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com"),
        ];
        let env = base
            .iter()
            .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()));
        Settings::from_sources(None, env, toml::Table::new()).unwrap()
    }

    #[test]
    fn metadata_url_inserts_the_well_known_segment() {
        assert_eq!(
            resource_metadata_url(&settings(&[])),
            "https://connect.example.com/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[actix_web::test]
    async fn both_well_known_paths_serve_the_document() {
        let settings = settings(&[(
            "MCP_CONNECT_AUTH__SCOPES_SUPPORTED",
            "mcp:tools, mcp:resources",
        )]);
        let app = actix_test::init_service(
            App::new()
                .app_data(web::Data::new(settings))
                .configure(configure),
        )
        .await;
        for path in [WELL_KNOWN, "/.well-known/oauth-protected-resource/mcp"] {
            let response = actix_test::call_service(
                &app,
                actix_test::TestRequest::get().uri(path).to_request(),
            )
            .await;
            assert_eq!(response.status(), 200, "{path}");
            assert_eq!(
                response.headers().get(CACHE_CONTROL).unwrap(),
                "max-age=300"
            );
            let body: Value = actix_test::read_body_json(response).await;
            assert_eq!(
                body,
                json!({
                    "resource": "https://connect.example.com/mcp",
                    "authorization_servers": ["https://idp.example.com"],
                    "scopes_supported": ["mcp:tools", "mcp:resources"],
                    "bearer_methods_supported": ["header"],
                    "resource_name": "mcp-connect",
                })
            );
        }
        for missing in ["other", "connect/mcp"] {
            let missing = actix_test::TestRequest::get()
                .uri(&format!("{WELL_KNOWN}/{missing}"))
                .to_request();
            assert_eq!(actix_test::call_service(&app, missing).await.status(), 404);
        }
    }

    #[test]
    fn issuer_is_advertised_as_configured() {
        let doc = metadata_document(&settings(&[]));
        assert_eq!(doc["scopes_supported"], json!([]));
        assert_eq!(
            doc["authorization_servers"],
            json!(["https://idp.example.com"])
        );
        // A root issuer written with its slash (Auth0) is advertised so.
        let root_slash = settings(&[("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com/")]);
        assert_eq!(
            metadata_document(&root_slash)["authorization_servers"],
            json!(["https://idp.example.com/"])
        );
        let tenant = settings(&[("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com/t/")]);
        let doc = metadata_document(&tenant);
        assert_eq!(
            doc["authorization_servers"],
            json!(["https://idp.example.com/t/"])
        );
    }
}
