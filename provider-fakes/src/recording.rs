//! Every request a fake receives, as it arrived, for tests that check
//! exactly what the service sent (headers, form, body).

use std::collections::HashMap;

use actix_web::{
    HttpRequest,
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
    web,
};

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    /// Lowercase names.
    pub headers: HashMap<String, String>,
    pub form: HashMap<String, String>,
    pub body: String,
}

impl Seen {
    pub(crate) fn of(req: &HttpRequest, body: &[u8]) -> Seen {
        Seen {
            method: req.method().to_string(),
            path: req.path().to_owned(),
            query: req.query_string().to_owned(),
            headers: req
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
            form: url::form_urlencoded::parse(body).into_owned().collect(),
            body: String::from_utf8_lossy(body).into_owned(),
        }
    }
}

/// Records the request in the fake's state, then serves it with its body
/// put back.
pub(crate) async fn record(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    // Only a provider fake's state keeps what it saw; other servers get
    // their requests untouched.
    if let Some(shared) = req.app_data::<web::Data<crate::state::Shared>>().cloned() {
        let body = req.extract::<web::Bytes>().await?;
        let seen = Seen::of(req.request(), &body);
        shared.seen.lock().unwrap().push(seen);
        req.set_payload(body.into());
    }
    next.call(req).await
}
