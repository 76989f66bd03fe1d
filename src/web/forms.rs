//! Reading what browsers send: query strings and urlencoded form bodies,
//! bounded in size, a parameter given twice refused, bad UTF-8 replaced
//! rather than panicking. A bad request is a page, never a crash.

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use actix_web::{HttpRequest, web};
use futures::StreamExt;

use super::pages::WebError;

/// Longest query string or form body read. Every legitimate value here is
/// short; providers' callbacks add a few parameters at most.
pub const MAX_LEN: usize = 8 * 1024;
const MAX_FIELDS: usize = 32;

#[derive(Debug, Default)]
pub struct Params(HashMap<String, String>);

impl Params {
    /// The value of `name`, if present and not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Every parameter named `<prefix><name>`, by `<name>` (empty values
    /// included: a form's blank input is an answer too).
    pub fn with_prefix(&self, prefix: &str) -> BTreeMap<String, String> {
        self.0
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_owned(), v.clone())))
            .collect()
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, WebError> {
        if bytes.len() > MAX_LEN {
            return Err(WebError::BadRequest("The request is too large."));
        }
        let mut out = HashMap::new();
        for (k, v) in url::form_urlencoded::parse(bytes) {
            if out.len() >= MAX_FIELDS {
                return Err(WebError::BadRequest("The request has too many parameters."));
            }
            if out.insert(k.into_owned(), v.into_owned()).is_some() {
                return Err(WebError::BadRequest(
                    "The request names a parameter more than once.",
                ));
            }
        }
        Ok(Self(out))
    }
}

pub fn query(req: &HttpRequest) -> Result<Params, WebError> {
    Params::parse(req.query_string().as_bytes())
}

/// Reads an urlencoded body of at most [`MAX_LEN`] bytes, arriving within
/// `deadline` (a client dripping it must not hold the socket).
pub async fn form(payload: web::Payload, deadline: Duration) -> Result<Params, WebError> {
    tokio::time::timeout(deadline, read_form(payload))
        .await
        .map_err(|_| WebError::Timeout)?
}

async fn read_form(mut payload: web::Payload) -> Result<Params, WebError> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| WebError::BadRequest("The form could not be read."))?;
        if body.len() + chunk.len() > MAX_LEN {
            return Err(WebError::BadRequest("The request is too large."));
        }
        body.extend_from_slice(&chunk);
    }
    Params::parse(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decodes_and_refuses_duplicates_and_size() {
        let p = Params::parse(b"a=1&b=x%20y&empty=").unwrap();
        assert_eq!(p.get("a"), Some("1"));
        assert_eq!(p.get("b"), Some("x y"));
        assert_eq!(p.get("empty"), None);
        assert!(Params::parse(b"a=1&a=2").is_err());
        assert!(Params::parse(&vec![b'a'; MAX_LEN + 1]).is_err());
        let many: Vec<String> = (0..40).map(|i| format!("k{i}=v")).collect();
        assert!(Params::parse(many.join("&").as_bytes()).is_err());
    }

    #[test]
    fn bad_utf8_does_not_panic() {
        let p = Params::parse(b"ticket=%FF%FE%00&x=%").unwrap();
        assert!(p.get("ticket").is_some());
    }
}
