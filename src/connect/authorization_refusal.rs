//! A provider's refusal of the authorization a connect sent the person to
//! give: its `error` code (RFC 6749 §4.1.2.1), other than the person's own
//! decline. What it means, said to the person on the callback's page and
//! to the model in the MCP client's retry, which then gets this answer
//! once instead of another link that would fail the same way.

/// What a provider's `error` code says went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationRefusal {
    /// `invalid_scope`: the permissions asked for.
    Scopes,
    /// The service's registration at the provider, or its configuration:
    /// the same request fails the same way until an operator acts.
    Setup,
    /// The provider's own outage: trying again later may work.
    Outage,
    /// A code this server does not know.
    Other,
}

impl AuthorizationRefusal {
    pub fn of(code: &str) -> Self {
        match code {
            "invalid_scope" => AuthorizationRefusal::Scopes,
            "unauthorized_client"
            | "unsupported_response_type"
            | "invalid_request"
            | "invalid_client" => AuthorizationRefusal::Setup,
            "server_error" | "temporarily_unavailable" => AuthorizationRefusal::Outage,
            _ => AuthorizationRefusal::Other,
        }
    }

    /// For the person, on the page the provider sent them back to.
    /// `from_connections_page`: they started on their connections page,
    /// not from an MCP client's link.
    pub fn for_person(self, provider: &str, code: &str, from_connections_page: bool) -> String {
        let again = if from_connections_page {
            "start again from your connections page"
        } else {
            "go back to your MCP client and try again"
        };
        match self {
            AuthorizationRefusal::Scopes => format!(
                "{provider} refused the permissions this connection asked for ({code}). Asking \
                 again for the same ones would fail the same way: {}.",
                if from_connections_page {
                    "tell whoever runs this service"
                } else {
                    "your MCP client can ask for other permissions, or tell whoever runs this service"
                }
            ),
            AuthorizationRefusal::Setup => format!(
                "{provider} refused this service's request ({code}): this service's registration at \
                 {provider}, or its configuration, needs fixing. Trying again will not help; tell \
                 whoever runs this service."
            ),
            AuthorizationRefusal::Outage => format!(
                "{provider} could not complete the authorization just now ({code}). Wait a few \
                 minutes, then {again}."
            ),
            AuthorizationRefusal::Other => format!(
                "{provider} refused the authorization ({code}). Please {again}; if it fails the \
                 same way, tell whoever runs this service."
            ),
        }
    }

    /// For the model, in the result of the call that sent the person.
    pub fn for_model(self, provider: &str, code: &str) -> String {
        match self {
            AuthorizationRefusal::Scopes => format!(
                "{provider} refused the permissions the connection asked for ({code}). Call again \
                 with other scopes, or none for the provider's defaults."
            ),
            AuthorizationRefusal::Setup => format!(
                "{provider} refused this server's authorization request ({code}): its registration \
                 at {provider} or its configuration needs fixing, so calling again will not help. \
                 Tell the user to ask the server's operator."
            ),
            AuthorizationRefusal::Outage => format!(
                "{provider} could not complete the authorization just now ({code}). Call again in \
                 a few minutes for a new link."
            ),
            AuthorizationRefusal::Other => format!(
                "{provider} refused the authorization ({code}). Call again for a new link; if it \
                 fails the same way, tell the user to ask the server's operator."
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_code_says_what_would_help() {
        assert_eq!(
            AuthorizationRefusal::of("invalid_scope"),
            AuthorizationRefusal::Scopes
        );
        assert_eq!(
            AuthorizationRefusal::of("unauthorized_client"),
            AuthorizationRefusal::Setup
        );
        assert_eq!(
            AuthorizationRefusal::of("temporarily_unavailable"),
            AuthorizationRefusal::Outage
        );
        assert_eq!(
            AuthorizationRefusal::of("made_up"),
            AuthorizationRefusal::Other
        );
        let page = AuthorizationRefusal::Scopes.for_person("GitHub", "invalid_scope", false);
        assert!(page.contains("GitHub refused the permissions"), "{page}");
        assert!(page.contains("(invalid_scope)"), "{page}");
        assert!(page.contains("MCP client"), "{page}");
        let page = AuthorizationRefusal::Outage.for_person("GitHub", "server_error", true);
        assert!(
            page.contains("connections page") && !page.contains("MCP client"),
            "{page}"
        );
        let model = AuthorizationRefusal::Setup.for_model("GitHub", "unauthorized_client");
        assert!(model.contains("will not help"), "{model}");
    }
}
