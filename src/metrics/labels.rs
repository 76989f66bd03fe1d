//! The label values `/metrics` may carry, each a fixed list: a value from a
//! request (a JSON-RPC method, a tool name) is kept only when it is on the
//! list, and is `other` otherwise. A client choosing a new method name per
//! request must not create a new series per request, nor write its text
//! into the operator's monitoring.
//!
//! Each label maps to an index into the counters' arrays, so counting is a
//! lookup and an atomic add.

/// How a `tools/call` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// A result.
    Complete,
    /// A result with `isError`: the tool ran and failed.
    ToolError,
    /// An `input_required` result (the user must act first).
    InputRequired,
    /// A JSON-RPC error.
    ProtocolError,
    /// A result of another kind.
    Other,
}

impl Ended {
    /// As the log line says it — the same word as `/metrics`' `ended`
    /// label, so one query works on both.
    pub fn as_str(self) -> &'static str {
        ENDED_LABELS[ended(self)]
    }
}

/// The tools this server offers, as the `tool` label names them (the tools
/// module checks that it offers exactly these).
pub const TOOLS: [&str; 5] = [
    "connections_list",
    "connect",
    "whoami",
    "api_request",
    "disconnect",
];

/// The JSON-RPC methods a client may send to an MCP server (2025-11-25 and
/// 2026-07-28), whether or not this server implements them.
pub const METHODS: [&str; 19] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
];

/// Every value of the `method` label: [`METHODS`], then `other` (a method
/// not on the list), then `none` (no method was read: the request was
/// refused before its body was read, or the body was a JSON-RPC response).
pub const METHOD_LABELS: [&str; METHODS.len() + 2] = {
    let mut labels = [""; METHODS.len() + 2];
    let mut i = 0;
    while i < METHODS.len() {
        labels[i] = METHODS[i];
        i += 1;
    }
    labels[METHODS.len()] = "other";
    labels[METHODS.len() + 1] = "none";
    labels
};

/// The `method` label of a request's JSON-RPC method.
pub fn method(method: Option<&str>) -> usize {
    match method {
        Some(m) => METHODS
            .iter()
            .position(|known| *known == m)
            .unwrap_or(METHODS.len()),
        None => METHODS.len() + 1,
    }
}

/// Every value of the `status` label: the HTTP status class.
pub const STATUS_LABELS: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];

/// The `status` label of an HTTP status code.
pub fn status(code: u16) -> usize {
    match code / 100 {
        class @ 1..=5 => usize::from(class - 1),
        _ => STATUS_LABELS.len() - 1,
    }
}

/// Every value of the `tool` label: this server's tools, then `other` (a
/// name the client made up).
pub const TOOL_LABELS: [&str; TOOLS.len() + 1] = {
    let mut labels = [""; TOOLS.len() + 1];
    let mut i = 0;
    while i < TOOLS.len() {
        labels[i] = TOOLS[i];
        i += 1;
    }
    labels[TOOLS.len()] = "other";
    labels
};

/// The `tool` label of a `tools/call`'s tool name.
pub fn tool(name: &str) -> usize {
    TOOLS
        .iter()
        .position(|known| *known == name)
        .unwrap_or(TOOLS.len())
}

/// Every value of the `ended` label, in the order of [`ended`].
pub const ENDED_LABELS: [&str; 5] = [
    "complete",
    "tool_error",
    "input_required",
    "protocol_error",
    "other",
];

/// The `ended` label of a `tools/call` outcome.
pub fn ended(ended: Ended) -> usize {
    match ended {
        Ended::Complete => 0,
        Ended::ToolError => 1,
        Ended::InputRequired => 2,
        Ended::ProtocolError => 3,
        Ended::Other => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_methods_are_their_own_label() {
        for name in METHODS {
            assert_eq!(METHOD_LABELS[method(Some(name))], name);
        }
        assert_eq!(METHOD_LABELS[method(Some("tools/call"))], "tools/call");
    }

    #[test]
    fn any_other_method_is_other_and_no_method_is_none() {
        for chosen in [
            "tools/cal",
            "TOOLS/CALL",
            "tools/call ",
            "x-attacker/0123456789",
            "(unprintable)",
            "",
        ] {
            assert_eq!(METHOD_LABELS[method(Some(chosen))], "other", "{chosen:?}");
        }
        assert_eq!(METHOD_LABELS[method(None)], "none");
    }

    #[test]
    fn status_codes_fall_into_their_class() {
        let class = |code| STATUS_LABELS[status(code)];
        assert_eq!(class(100), "1xx");
        assert_eq!(class(200), "2xx");
        assert_eq!(class(202), "2xx");
        assert_eq!(class(308), "3xx");
        assert_eq!(class(401), "4xx");
        assert_eq!(class(499), "4xx");
        assert_eq!(class(503), "5xx");
        for odd in [0, 99, 600, 999, u16::MAX] {
            assert_eq!(class(odd), "other", "{odd}");
        }
    }

    #[test]
    fn only_this_servers_tools_are_named() {
        for name in TOOLS {
            assert_eq!(TOOL_LABELS[tool(name)], name);
        }
        for chosen in ["", "Whoami", "whoami2", "../etc/passwd", "other"] {
            assert_eq!(TOOL_LABELS[tool(chosen)], "other", "{chosen:?}");
        }
    }

    #[test]
    fn every_ending_has_its_own_label() {
        let all = [
            Ended::Complete,
            Ended::ToolError,
            Ended::InputRequired,
            Ended::ProtocolError,
            Ended::Other,
        ];
        let mut seen: Vec<&str> = all.iter().map(|e| ENDED_LABELS[ended(*e)]).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), ENDED_LABELS.len());
        assert_eq!(ENDED_LABELS[ended(Ended::ToolError)], "tool_error");
    }

    #[test]
    fn label_values_need_no_escaping() {
        let all = METHOD_LABELS
            .iter()
            .chain(&STATUS_LABELS)
            .chain(&TOOL_LABELS)
            .chain(&ENDED_LABELS);
        for value in all {
            assert!(!value.is_empty());
            assert!(
                value
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\'),
                "{value:?}"
            );
        }
    }
}
