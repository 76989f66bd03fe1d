//! The shapes the connect flow puts on the wire: the URL elicitation of a
//! 2026-07-28 `input_required` result, the legacy `-32042` error, and the
//! `-32021` answer to a client that cannot open URLs for its user.

use rmcp::{
    ErrorData,
    model::{ElicitRequest, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult},
};
use uuid::Uuid;

use super::{
    errors::{ElicitationMode, RequestError},
    input_key,
};
use crate::{connect::ConnectionService, providers::Provider};

/// What a connect link asks of the user.
pub fn connect_message(provider: &Provider) -> String {
    // Keys are typed on this server's page, never into the client.
    let step = if provider.is_oauth() {
        "approve access"
    } else {
        "enter the key on that page"
    };
    format!(
        "Connect your {name} account to continue. Open this link in your browser, sign in, and {step}; \
         then come back here. The link is for you only and works once.",
        name = provider.display_name()
    )
}

/// What an approval link asks of the user: let this client use this account.
/// The question of an approval link. It names no account: the client
/// reading it is not approved for it (the page, shown to the person
/// signed in, says which account it is).
pub fn approval_message(provider: &Provider, client: &str) -> String {
    format!(
        "{client} is not yet allowed to use your {name} account. Open this link in your browser \
         to see which account and allow it; then come back here. The link is for you only and \
         works once.",
        name = provider.display_name()
    )
}

pub fn input_required(
    provider: &Provider,
    message: String,
    url: &str,
    request_state: String,
) -> InputRequiredResult {
    let params = ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url: url.to_owned(),
        // 2026-07-28 has no elicitationId; the bridge drops the empty field.
        elicitation_id: String::new(),
    };
    let mut requests = InputRequests::new();
    requests.insert(
        input_key(provider.name()),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    InputRequiredResult::new(Some(requests), Some(request_state))
}

/// 2025-11-25: the request cannot proceed until the user opens the URL.
/// The `elicitationId` is the ticket's id, never the ticket itself. A
/// legacy client's declared capabilities are not known here (they came
/// with its `initialize`), so the message also says where to connect by
/// hand, for one that cannot open the link.
pub fn url_elicitation_required(
    state: &ConnectionService,
    provider: &Provider,
    message: String,
    ticket_id: Uuid,
    url: &str,
) -> ErrorData {
    RequestError::UrlElicitationRequired {
        provider: provider.display_name().to_owned(),
        message,
        ticket_id,
        url: url.to_owned(),
        connections_page: format!("{}/connections", state.base_url),
    }
    .into()
}

/// A client that cannot open links asks to use an account: the user
/// allows it on the connections page, where the request waits. The
/// account is not named: the client is not allowed to learn which.
pub fn approval_on_the_connections_page(
    state: &ConnectionService,
    provider: &Provider,
    client: &str,
) -> ErrorData {
    RequestError::MissingCapability {
        mode: ElicitationMode::Url,
        how: format!(
            "{client} is not yet allowed to use your {name} account, and it cannot open links for you \
             (it did not declare elicitation.url). Allow it at {base}/connections, then call again.",
            name = provider.display_name(),
            base = state.base_url
        ),
    }
    .into()
}

/// The client did not declare `elicitation.url`: it cannot send its user to
/// our page, so say which capability is missing and where to connect by hand.
pub fn missing_url_capability(state: &ConnectionService, provider: &Provider) -> ErrorData {
    RequestError::MissingCapability {
        mode: ElicitationMode::Url,
        how: format!(
            "This needs your {name} account, and this client cannot open links for you (it did not declare \
             elicitation.url). Connect {name} at {base}/connections, then call again.",
            name = provider.display_name(),
            base = state.base_url
        ),
    }
    .into()
}
