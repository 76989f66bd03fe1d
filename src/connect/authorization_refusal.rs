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
    /// What `code` means for a call that asked for scopes beyond the
    /// provider's defaults (`asked_for_more`: the call's own, which it may
    /// change) or not (then an `invalid_scope` is about the scopes the
    /// operator configured). A page that cannot tell passes `true`: its
    /// sentence names both.
    pub fn of(code: &str, asked_for_more: bool) -> Self {
        match code {
            "invalid_scope" if asked_for_more => AuthorizationRefusal::Scopes,
            "invalid_scope" => AuthorizationRefusal::Setup,
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
                "{provider} refused the permissions this connection asked for (error code \
                 {code}). Asking again for the same ones would fail the same way: {}.",
                if from_connections_page {
                    "tell whoever runs this service"
                } else {
                    "if your MCP client asked for particular permissions, it can ask for others; \
                     otherwise tell whoever runs this service"
                }
            ),
            AuthorizationRefusal::Setup => format!(
                "{provider} refused this service's request (error code {code}): this service's \
                 registration at {provider}, or its configuration, needs fixing. Trying again \
                 will not help; tell whoever runs this service."
            ),
            AuthorizationRefusal::Outage => format!(
                "{provider} could not complete the authorization just now (error code {code}). \
                 Wait a few minutes, then {again}."
            ),
            AuthorizationRefusal::Other => format!(
                "{provider} refused the authorization (error code {code}). Please {again}; if it \
                 fails the same way, tell whoever runs this service."
            ),
        }
    }

    /// For the model, in the result of the call that sent the person.
    pub fn for_model(self, provider: &str, code: &str) -> String {
        match self {
            AuthorizationRefusal::Scopes => format!(
                "{provider} refused the permissions the connection asked for (error code \
                 {code}). Call `connect` again with other scopes, or without scopes for the \
                 provider's defaults."
            ),
            AuthorizationRefusal::Setup => format!(
                "{provider} refused this server's authorization request (error code {code}): its \
                 registration at {provider} or its configuration needs fixing, so calling again \
                 will not help. Tell the user to ask the server's operator."
            ),
            AuthorizationRefusal::Outage => format!(
                "{provider} could not complete the authorization just now (error code {code}). \
                 Call again in a few minutes for a new link."
            ),
            AuthorizationRefusal::Other => format!(
                "{provider} refused the authorization (error code {code}). Call again for a new \
                 link; if it fails the same way, tell the user to ask the server's operator."
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_code_says_what_would_help() {
        use AuthorizationRefusal as R;
        assert_eq!(R::of("invalid_scope", true), R::Scopes);
        // Only the operator's scopes were asked for: theirs to mend.
        assert_eq!(R::of("invalid_scope", false), R::Setup);
        assert_eq!(R::of("unauthorized_client", true), R::Setup);
        assert_eq!(R::of("temporarily_unavailable", false), R::Outage);
        assert_eq!(R::of("made_up", false), R::Other);
        let page = R::Scopes.for_person("GitHub", "invalid_scope", false);
        assert!(page.contains("GitHub refused the permissions"), "{page}");
        assert!(page.contains("(error code invalid_scope)"), "{page}");
        assert!(page.contains("MCP client"), "{page}");
        let page = R::Outage.for_person("GitHub", "server_error", true);
        assert!(
            page.contains("connections page") && !page.contains("MCP client"),
            "{page}"
        );
        let model = R::Setup.for_model("GitHub", "unauthorized_client");
        assert!(model.contains("will not help"), "{model}");
        let model = R::Scopes.for_model("GitHub", "invalid_scope");
        assert!(model.contains("`connect`"), "{model}");
    }
}
