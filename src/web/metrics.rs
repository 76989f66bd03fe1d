//! `GET /metrics`: this instance's metrics (`crate::metrics`) for the
//! operator's Prometheus, not for the public. With `metrics_token` set, a
//! request must bear it (`Authorization: Bearer …`) and gets 401 otherwise;
//! without one the endpoint does not exist (404) — except in dev mode,
//! which serves it without a token on loopback.

use actix_web::{HttpRequest, HttpResponse, get, http::header, web};
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::headers::NO_STORE;
use crate::{
    auth,
    metrics::{CONTENT_TYPE, DbGauges},
    state::AppState,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(scrape);
}

#[get("/metrics")]
async fn scrape(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let settings = &state.settings;
    let presented = req
        .headers()
        .get_all(header::AUTHORIZATION)
        .map(|value| value.as_bytes());
    let expected = settings.metrics_token.as_ref().map(|t| t.expose_secret());
    match access(expected, settings.metrics_open, presented) {
        Access::Hidden => HttpResponse::NotFound().finish(),
        Access::Refused => {
            tracing::info!("metrics: refused a request without the metrics token");
            HttpResponse::Unauthorized()
                .insert_header((header::WWW_AUTHENTICATE, r#"Bearer realm="metrics""#))
                .finish()
        }
        Access::Granted => HttpResponse::Ok()
            .content_type(CONTENT_TYPE)
            .insert_header(NO_STORE)
            .body(
                state
                    .metrics
                    .render(db_gauges(&state), state.connect.providers().call_metrics()),
            ),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Access {
    Granted,
    /// A token is required and was not presented.
    Refused,
    /// No token is configured: as if there were no such endpoint.
    Hidden,
}

/// Who may read the metrics. `authorization`: every `Authorization` value
/// the request carries (more than one is refused, as on `/mcp`).
fn access<'a>(
    expected: Option<&str>,
    open: bool,
    mut authorization: impl Iterator<Item = &'a [u8]>,
) -> Access {
    let Some(expected) = expected else {
        return if open {
            Access::Granted
        } else {
            Access::Hidden
        };
    };
    let (Some(value), None) = (authorization.next(), authorization.next()) else {
        return Access::Refused;
    };
    let Ok(presented) = auth::bearer_from_authorization(value) else {
        return Access::Refused;
    };
    // Digests of equal length: how long the comparison takes tells nothing
    // about the token, not even its length.
    let matches = Sha256::digest(presented.as_bytes()).ct_eq(&Sha256::digest(expected.as_bytes()));
    if bool::from(matches) {
        Access::Granted
    } else {
        Access::Refused
    }
}

fn db_gauges(state: &AppState) -> DbGauges {
    DbGauges {
        pool_open: state.db.size(),
        pool_idle: state.db.num_idle(),
        pool_max: state.db.options().get_max_connections(),
        hot_open: state.connect.hot_connections_open(),
        hot_overflowed: state.connect.hot_connections_overflowed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef-metrics";

    fn with(expected: Option<&str>, open: bool, headers: &[&str]) -> Access {
        access(expected, open, headers.iter().map(|h| h.as_bytes()))
    }

    #[test]
    fn without_a_token_the_endpoint_is_hidden_unless_open() {
        assert_eq!(with(None, false, &[]), Access::Hidden);
        assert_eq!(with(None, false, &["Bearer anything"]), Access::Hidden);
        assert_eq!(with(None, true, &[]), Access::Granted);
    }

    #[test]
    fn with_a_token_only_that_bearer_token_is_let_in() {
        let bearer = format!("Bearer {TOKEN}");
        for open in [false, true] {
            assert_eq!(with(Some(TOKEN), open, &[&bearer]), Access::Granted);
            assert_eq!(
                with(Some(TOKEN), open, &[&format!("bearer  {TOKEN}")]),
                Access::Granted
            );
            assert_eq!(with(Some(TOKEN), open, &[]), Access::Refused, "open={open}");
        }
        for refused in [
            format!("Bearer {TOKEN}x"),
            format!("Bearer {}", &TOKEN[1..]),
            "Bearer ".to_owned(),
            format!("Basic {TOKEN}"),
            TOKEN.to_owned(),
            format!("Bearer {}", TOKEN.to_uppercase()),
        ] {
            assert_eq!(
                with(Some(TOKEN), false, &[&refused]),
                Access::Refused,
                "{refused}"
            );
        }
        assert_eq!(
            with(Some(TOKEN), false, &[&bearer, &bearer]),
            Access::Refused,
            "two Authorization headers"
        );
    }
}
