//! Test-only: the dev routes over real HTTP on a free port, without a
//! database, and what the dev identity provider's and the demo provider's
//! flow tests both build on.

use std::collections::HashMap;

use actix_web::web;
use provider_fakes::server::{self, Server};

use super::DevServices;

// RFC 7636 Appendix B.
pub(super) const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
pub(super) const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

pub(super) struct DevServer {
    pub(super) base: String,
    pub(super) dev: DevServices,
    /// Follows no redirect: the tests look at each one.
    pub(super) http: reqwest::Client,
    /// Serving until dropped.
    _server: Server,
}

/// Serves the routes `configure` mounts on a free loopback port.
pub(super) async fn start(configure: fn(&mut web::ServiceConfig)) -> DevServer {
    let bound = server::bind();
    let base = bound.base.clone();
    let dev = DevServices::ephemeral(&base);
    let data = web::Data::new(dev.clone());
    let server = bound.serve(move |cfg| {
        cfg.app_data(data.clone());
        configure(cfg);
    });
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap();
    DevServer {
        base,
        dev,
        http,
        _server: server,
    }
}

/// `defaults` with `changes` applied (`None` removes).
pub(super) fn with_changes(
    defaults: &[(&str, &str)],
    changes: &[(&str, Option<&str>)],
) -> Vec<(String, String)> {
    let mut params: Vec<(String, String)> = defaults
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    for (name, value) in changes {
        params.retain(|(k, _)| k != name);
        if let Some(value) = value {
            params.push(((*name).to_owned(), (*value).to_owned()));
        }
    }
    params
}

/// The query of a 303 back to `redirect_uri`.
pub(super) fn redirected_query(
    response: &reqwest::Response,
    redirect_uri: &str,
) -> HashMap<String, String> {
    assert_eq!(
        response.status(),
        303,
        "expected a redirect back to the client"
    );
    let location = response.headers()["location"].to_str().unwrap();
    assert!(location.starts_with(redirect_uri), "{location}");
    url::Url::parse(location)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}
