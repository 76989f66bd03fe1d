//! Discovery for the dev identity provider: OpenID Connect / RFC 8414
//! metadata and the JWK Set. Both the MCP resource side (`auth`) and the web
//! login find the dev IdP exactly as they would find a production issuer.

use actix_web::{HttpResponse, web};

use super::DevServices;

/// The authorization server metadata document.
pub(crate) fn metadata_document(dev: &DevServices) -> serde_json::Value {
    let issuer = dev.issuer();
    serde_json::json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "id_token_signing_alg_values_supported": ["EdDSA"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "scopes_supported": ["openid", "profile", "offline_access"],
        "subject_types_supported": ["public"],
        "claims_supported": ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "name", "preferred_username"],
        // RFC 9207: every authorization response carries `iss`.
        "authorization_response_iss_parameter_supported": true,
        // Any client id is accepted, so MCP clients that identify themselves
        // by a metadata document URL work; the document is not fetched.
        "client_id_metadata_document_supported": true,
    })
}

pub(crate) async fn metadata(dev: web::Data<DevServices>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header(("Cache-Control", "no-cache"))
        .json(metadata_document(&dev))
}

pub(crate) async fn jwks(dev: web::Data<DevServices>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header(("Cache-Control", "no-cache"))
        .json(dev.jwks())
}
