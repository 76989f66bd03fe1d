//! One syntax pass over a `/mcp` body: is it JSON, what is its JSON-RPC
//! method (for the log), and — for `tools/call` — are its parameters of the
//! types the schema gives. rmcp answers a `tools/call` whose parameters do
//! not decode as "method not found" (HTTP 404, -32601); JSON-RPC calls that
//! invalid params (-32602). Only the JSON type of each parameter is kept,
//! never its value, so the pass costs no more than skimming the body. The
//! bridge runs it before rmcp for a request without a routing header, and
//! for a 2026-07-28 request only where rmcp did not answer 200 (see
//! `bridge::serve`).

use std::{borrow::Cow, fmt};

use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, SeqAccess, Visitor},
};

/// What the pass found.
pub(super) enum Envelope<'a> {
    /// Not JSON at all.
    NotJson,
    /// JSON; its method if it has a string one.
    Json(Option<Cow<'a, str>>),
    /// A `tools/call` whose params are of the wrong types: the request id
    /// to answer and what is wrong.
    InvalidParams {
        id: serde_json::Value,
        method: Cow<'a, str>,
        problem: &'static str,
    },
}

pub(super) fn inspect(body: &[u8]) -> Envelope<'_> {
    #[derive(Deserialize)]
    struct Raw<'a> {
        #[serde(borrow)]
        method: Option<Cow<'a, str>>,
        #[serde(default)]
        id: Option<serde_json::Value>,
        #[serde(default)]
        params: Option<Shape>,
    }
    match serde_json::from_slice::<Raw<'_>>(body) {
        Ok(raw) => {
            let problem = match (raw.method.as_deref(), &raw.params) {
                (Some("tools/call"), Some(shape)) => shape.problem(),
                (Some("tools/call"), None) => Some("params must be an object with a name"),
                _ => None,
            };
            match (problem, raw.id, raw.method) {
                // A notification gets no answer: leave it to rmcp.
                (Some(problem), Some(id), Some(method)) => Envelope::InvalidParams {
                    id,
                    method,
                    problem,
                },
                (_, _, method) => Envelope::Json(method),
            }
        }
        // Valid JSON of another shape (an array, a method that is not a
        // string) is rmcp's to refuse.
        Err(_) if serde_json::from_slice::<IgnoredAny>(body).is_ok() => Envelope::Json(None),
        Err(_) => Envelope::NotJson,
    }
}

/// The JSON type of a value, its content skipped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Object,
    /// Taken as absent for an optional parameter, as rmcp (serde) does.
    Null,
    Other,
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KindVisitor;
        impl<'de> Visitor<'de> for KindVisitor {
            type Value = Kind;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, _: &str) -> Result<Kind, E> {
                Ok(Kind::String)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Kind::Object)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Kind::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Kind, E> {
                Ok(Kind::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Kind, E> {
                Ok(Kind::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Kind, E> {
                Ok(Kind::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Kind, E> {
                Ok(Kind::Other)
            }
            fn visit_unit<E>(self) -> Result<Kind, E> {
                Ok(Kind::Null)
            }
        }
        d.deserialize_any(KindVisitor)
    }
}

/// The types of `tools/call`'s parameters (or of whatever `params` is).
struct Shape {
    object: bool,
    name: Option<Kind>,
    arguments: Option<Kind>,
    request_state: Option<Kind>,
    input_responses: Option<Kind>,
}

impl Shape {
    fn problem(&self) -> Option<&'static str> {
        if !self.object {
            return Some("params must be an object");
        }
        if self.name != Some(Kind::String) {
            return Some("params.name must be a string");
        }
        if self
            .arguments
            .is_some_and(|k| !matches!(k, Kind::Object | Kind::Null))
        {
            return Some("params.arguments must be an object");
        }
        if self
            .request_state
            .is_some_and(|k| !matches!(k, Kind::String | Kind::Null))
        {
            return Some("params.requestState must be a string");
        }
        if self
            .input_responses
            .is_some_and(|k| !matches!(k, Kind::Object | Kind::Null))
        {
            return Some("params.inputResponses must be an object");
        }
        None
    }
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ShapeVisitor;
        impl<'de> Visitor<'de> for ShapeVisitor {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
                let mut shape = Shape {
                    object: true,
                    name: None,
                    arguments: None,
                    request_state: None,
                    input_responses: None,
                };
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let slot = match key.as_ref() {
                        "name" => &mut shape.name,
                        "arguments" => &mut shape.arguments,
                        "requestState" => &mut shape.request_state,
                        "inputResponses" => &mut shape.input_responses,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value::<Kind>()?);
                }
                Ok(shape)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Shape::not_object())
            }
            fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
                Ok(Shape::not_object())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
                Ok(Shape::not_object())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
                Ok(Shape::not_object())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape::not_object())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape::not_object())
            }
            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape::not_object())
            }
        }
        d.deserialize_any(ShapeVisitor)
    }
}

impl Shape {
    fn not_object() -> Self {
        Shape {
            object: false,
            name: None,
            arguments: None,
            request_state: None,
            input_responses: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(body: &str) -> Option<&'static str> {
        match inspect(body.as_bytes()) {
            Envelope::InvalidParams { problem, .. } => Some(problem),
            _ => None,
        }
    }

    #[test]
    fn tools_call_params_are_typed() {
        let ok = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"a":[1]},"requestState":"s","inputResponses":{},"_meta":{}}}"#;
        assert!(matches!(inspect(ok.as_bytes()), Envelope::Json(Some(m)) if m == "tools/call"));
        assert_eq!(
            problem(r#"{"params":{"name":"w","requestState":5},"id":1,"method":"tools/call"}"#),
            Some("params.requestState must be a string")
        );
        assert_eq!(
            problem(r#"{"id":"x","method":"tools/call","params":{"name":["w"]}}"#),
            Some("params.name must be a string")
        );
        assert_eq!(
            problem(r#"{"id":1,"method":"tools/call","params":[]}"#),
            Some("params must be an object")
        );
        // null stands for absent in optional parameters.
        let nulls = r#"{"id":1,"method":"tools/call","params":{"name":"w","arguments":null,"requestState":null,"inputResponses":null}}"#;
        assert!(matches!(inspect(nulls.as_bytes()), Envelope::Json(Some(_))));
        assert_eq!(
            problem(r#"{"id":1,"method":"tools/call","params":{"name":null}}"#),
            Some("params.name must be a string")
        );
        // Other methods and notifications are rmcp's.
        assert_eq!(
            problem(r#"{"id":1,"method":"tools/list","params":{"name":5}}"#),
            None
        );
        assert_eq!(
            problem(r#"{"method":"tools/call","params":{"name":5}}"#),
            None
        );
        assert!(matches!(inspect(b"{nope"), Envelope::NotJson));
        assert!(matches!(inspect(b"[1]"), Envelope::Json(None)));
    }
}
