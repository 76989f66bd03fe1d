//! The MCP tools. Each tool is a thin file: its definition (name,
//! description, typed arguments whose doc comments become the input schema)
//! and a `call` that reads its arguments, asks the connection service, calls
//! the provider, shapes the result. Policy lives in `crate::connect`.

mod api_request;
mod connect;
mod connections_list;
mod disconnect;
mod output_schema;
pub mod resources;
pub mod result;
use crate::connect::errors::RequestError;
use output_schema::output_schema_for;
mod whoami;

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolRequestParams, CallToolResponse, JsonObject, Tool},
    service::RequestContext,
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    auth::Principal,
    connect::state::Binding,
    connect::{Access, ClientKind, ConnectionService, Need, vault::Refusal},
};

/// Everything a tool may use for one call.
pub struct ToolCall<'a> {
    pub service: &'a ConnectionService,
    /// This server's MCP resource identifier (the audience of its tokens).
    pub audience: &'a str,
    pub principal: &'a Principal,
    pub request: &'a CallToolRequestParams,
    pub context: &'a RequestContext<RoleServer>,
}

impl<'a> ToolCall<'a> {
    /// The call's arguments as the tool's typed struct. Arguments that do
    /// not fit are the model's to correct, so they are refused as a result
    /// of the tool's own type (`isError`, `refused`, with the reason), not
    /// as a JSON-RPC error its client may keep from it (tools.mdx: input
    /// validation errors are tool execution errors).
    pub(crate) fn arguments<T: DeserializeOwned, O: ToolOutput>(
        &self,
    ) -> Result<T, Box<CallToolResponse>> {
        self.raw_arguments().map_err(|message| {
            // The provider the model meant, where it named one as a string.
            let provider = self
                .request
                .arguments
                .as_ref()
                .and_then(|a| a.get("provider")?.as_str())
                .map(|p| p.chars().take(64).collect::<String>())
                .unwrap_or_default();
            refused::<O>(&provider, message)
        })
    }

    /// The arguments as `T`, or why not, for a tool whose result has no
    /// place for a failure (`connections_list`, which takes none).
    pub fn raw_arguments<T: DeserializeOwned>(&self) -> Result<T, String> {
        // Read in place: the arguments are borrowed, not copied into a new map.
        let empty = serde_json::Map::new();
        let arguments = self.request.arguments.as_ref().unwrap_or(&empty);
        T::deserialize(arguments).map_err(|e| {
            let why = shortened(&e.to_string());
            format!("Invalid arguments for tool {}: {why}", self.request.name)
        })
    }

    /// What this call is, for binding a `requestState` to it.
    pub fn binding(&self) -> Binding<'a> {
        Binding {
            audience: self.audience,
            user: self.principal.user(),
            client_id: &self.principal.client_id,
            method: "tools/call",
            target: &self.request.name,
            arguments: self.request.arguments.as_ref(),
        }
    }

    /// Asks the connection service for the user's account at `provider`.
    pub async fn require(
        &self,
        provider: &'a str,
        scopes: &'a [String],
    ) -> Result<Access<'a>, ErrorData> {
        self.require_account(provider, scopes, None, false).await
    }

    /// [`Self::require`] for one of several accounts (`account`: its label
    /// or id; `None`: the only one, or the user is asked). `add_account`:
    /// connect another account through the provider's account chooser.
    pub async fn require_account(
        &self,
        provider: &'a str,
        scopes: &'a [String],
        account: Option<&'a str>,
        add_account: bool,
    ) -> Result<Access<'a>, ErrorData> {
        self.service
            .require(self.need(provider, scopes, account, add_account))
            .await
    }

    /// What this call needs of the user's account at `provider`, for the
    /// connection service.
    pub fn need(
        &self,
        provider: &'a str,
        scopes: &'a [String],
        account: Option<&'a str>,
        add_account: bool,
    ) -> Need<'a> {
        Need {
            principal: self.principal,
            provider,
            scopes,
            account,
            add_account,
            binding: self.binding(),
            input_responses: self.request.input_responses.as_ref(),
            request_state: self.request.request_state.as_deref(),
            client: client_kind(self.context),
            cancel: &self.context.ct,
        }
    }
}

/// At most 300 characters of why arguments did not fit:
/// the reader's error quotes the value it refused, which the caller chose
/// and which may be a megabyte long; its beginning and end (what was
/// expected) are kept.
fn shortened(why: &str) -> String {
    const REASON_CHARS: usize = 300;
    let count = why.chars().count();
    if count <= REASON_CHARS {
        return why.to_owned();
    }
    let head: String = why.chars().take(REASON_CHARS * 2 / 3).collect();
    let tail: String = why.chars().skip(count - REASON_CHARS / 3).collect();
    format!("{head}…{tail}")
}

/// Whether the client speaks MRTR, and which elicitation modes it declared:
/// URLs it can open for its user, forms it can show.
pub fn client_kind(context: &RequestContext<RoleServer>) -> ClientKind {
    let modern = context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
    if !modern {
        return ClientKind::Legacy;
    }
    let elicitation = context.client_capabilities().and_then(|c| c.elicitation);
    ClientKind::Modern {
        url_elicitation: elicitation.as_ref().is_some_and(|e| e.url.is_some()),
        // An empty `elicitation` object means form support (the
        // specification's backwards-compatibility rule).
        form_elicitation: elicitation.is_some_and(|e| e.form.is_some() || e.url.is_none()),
    }
}

/// The names of every tool this server offers, in [`definitions`] order.
pub const NAMES: [&str; 5] = [
    connections_list::NAME,
    connect::NAME,
    whoami::NAME,
    api_request::NAME,
    disconnect::NAME,
];

/// Every tool this server offers, described for the providers of
/// `catalog`.
pub fn definitions(catalog: &crate::providers::ProviderCatalog) -> Vec<Tool> {
    vec![
        connections_list::definition(),
        connect::definition(),
        whoami::definition(),
        api_request::definition(catalog.allows_writes()),
        disconnect::definition(),
    ]
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    match call.request.name.as_ref() {
        connections_list::NAME => connections_list::call(call).await,
        connect::NAME => connect::call(call).await,
        whoami::NAME => whoami::call(call).await,
        api_request::NAME => api_request::call(call).await,
        disconnect::NAME => disconnect::call(call).await,
        other => Err(RequestError::UnknownTool(other.to_owned()).into()),
    }
}

/// A tool's result type: it can say, in its own shape, that the call
/// failed for one account.
pub(crate) trait ToolOutput: Serialize {
    fn from_outcome(outcome: result::Outcome) -> Self;
}

/// The answer for an [`Access`] that is not `Ready`: the connect round, or
/// a result of the tool's type saying the user declined or cancelled, the
/// provider refused the authorization or could not renew the token, or
/// the account named is not one account.
/// `provider` is the provider's name as the caller gave it (known to exist).
pub(crate) fn unless_ready<'s, T: ToolOutput>(
    access: Access<'s>,
    provider: &str,
) -> Result<(crate::connect::UsableToken, &'s crate::providers::Provider), Box<CallToolResponse>> {
    use result::{ErrorKind, NextStep, Outcome, answer};
    let failed = |kind, message: String, next| {
        let output = T::from_outcome(Outcome::failed(provider, kind, message.clone(), next));
        Box::new(CallToolResponse::Complete(answer(&output, true, message)))
    };
    match access {
        Access::Ready { token, provider } => Ok((token, provider)),
        Access::InputRequired(result) => Err(Box::new(CallToolResponse::InputRequired(result))),
        Access::Declined { provider_name } => Err(failed(
            ErrorKind::Declined,
            format!("The user declined to connect {provider_name}."),
            NextStep::None,
        )),
        // Calling again would only ask again what the user answered.
        Access::ApprovalDenied { provider_name } => Err(failed(
            ErrorKind::ClientNotApproved,
            format!("The user did not allow this client to use their {provider_name} account."),
            NextStep::None,
        )),
        Access::Cancelled { provider_name } => Err(failed(
            ErrorKind::Cancelled,
            format!("Connecting {provider_name} was cancelled. Call the tool again to retry."),
            NextStep::Connect,
        )),
        Access::AuthorizationRefused {
            provider_name,
            code,
            refusal,
        } => {
            use crate::connect::authorization_refusal::AuthorizationRefusal as Refused;
            let next = match refusal {
                Refused::Scopes => NextStep::ChangeRequest,
                Refused::Setup => NextStep::AskUser,
                Refused::Outage => NextStep::RetryLater,
                Refused::Other => NextStep::Connect,
            };
            Err(failed(
                ErrorKind::AuthorizationRefused,
                refusal.for_model(&provider_name, &code),
                next,
            ))
        }
        Access::ProviderUnavailable { provider_name } => Err(failed(
            ErrorKind::ProviderUnavailable,
            format!(
                "{provider_name} could not renew this account's access just now. Try again in a minute; the account stays connected."
            ),
            NextStep::RetryLater,
        )),
        Access::RefreshRefused {
            provider_name,
            refusal,
        } => Err(failed(
            ErrorKind::ProviderError,
            refresh_refused(&provider_name, &refusal),
            NextStep::AskUser,
        )),
        Access::AccountAmbiguous { message } => {
            Err(failed(ErrorKind::Refused, message, NextStep::ChangeRequest))
        }
        Access::AccountLimitReached { message } => {
            Err(failed(ErrorKind::Refused, message, NextStep::AskUser))
        }
    }
}

/// What the user is told when `provider_name` refuses to renew an expired
/// token: a refusal of this server's client is not mended by connecting
/// again, its operator can mend it; otherwise connecting again may.
pub(crate) fn refresh_refused(provider_name: &str, refusal: &Refusal) -> String {
    let reason = &refusal.reason;
    if refusal.client_refused {
        format!(
            "{provider_name} refuses to renew this account's access ({reason}). \
             This is a problem with this server's setup at {provider_name}: tell the server's operator. \
             The account stays connected."
        )
    } else {
        format!(
            "{provider_name} refused to renew this account's access ({reason}). \
             Connecting the account again (Reconnect, on the user's connections page at this server) \
             may mend it; if it does not, tell the server's operator."
        )
    }
}

/// The provider `name`, or, for one this server does not have, a result
/// of the tool's own type saying so, with the names there are. The model
/// chose the name, so it is the model that must read the refusal: a tool
/// error, not a JSON-RPC error its client would keep from it.
pub(crate) fn known_provider<'s, T: ToolOutput>(
    service: &'s ConnectionService,
    name: &str,
) -> Result<&'s crate::providers::Provider, Box<CallToolResponse>> {
    if let Some(provider) = service.provider(name) {
        return Ok(provider);
    }
    // A provider name is a short token; anything longer is not repeated
    // whole.
    let shown: String = name.chars().take(64).collect();
    let message = format!(
        "Unknown provider `{shown}`. Available providers: {}.",
        service.providers().names().join(", ")
    );
    Err(refused::<T>(&shown, message))
}

/// Scopes from a model: short, plain tokens, one scope each; otherwise a
/// refusal of the tool's own type for `provider`. A comma is refused: the
/// scopes a provider grants are read split at commas as at spaces (Slack,
/// Strava and others list them so), so "a,b" asked as one scope would
/// never be found granted, and the user would be asked again and again.
pub(crate) fn check_scopes<T: ToolOutput>(
    provider: &str,
    scopes: &[String],
) -> Result<(), Box<CallToolResponse>> {
    let one_scope = |s: &String| s.chars().all(|c| c.is_ascii_graphic() && c != ',');
    let ok = scopes.len() <= 32
        && scopes
            .iter()
            .all(|s| !s.is_empty() && s.len() <= 200 && one_scope(s));
    if ok {
        Ok(())
    } else {
        Err(refused::<T>(
            provider,
            "scopes must be at most 32 non-empty scope names, one in each string, without spaces, \
             commas or control characters (e.g. [\"channels:read\", \"chat:write\"])"
                .to_owned(),
        ))
    }
}

/// A request refused before anything was done, as a result of the tool's
/// type: what was wrong, and that the model should change its request.
pub(crate) fn refused<T: ToolOutput>(provider: &str, message: String) -> Box<CallToolResponse> {
    use result::{ErrorKind, NextStep, Outcome, answer};
    let output = T::from_outcome(Outcome::failed(
        provider,
        ErrorKind::Refused,
        message.clone(),
        NextStep::ChangeRequest,
    ));
    Box::new(CallToolResponse::Complete(answer(&output, true, message)))
}

/// The JSON Schema of `T` as a tool's input schema.
pub(crate) fn schema_for<T: schemars::JsonSchema + 'static>() -> std::sync::Arc<JsonObject> {
    rmcp::handler::server::tool::schema_for_type::<T>()
}

/// A failure inside a tool: logged with its cause, generic to the client.
pub(crate) use crate::connect::errors::internal;

/// The account `token` stands for, as the provider answers (`whoami`, the
/// profile resource). A refusal before the token's time is asked again
/// once with refreshed tokens, and the token that answered comes back with
/// the answer.
async fn ask_account(
    service: &ConnectionService,
    provider: &crate::providers::Provider,
    token: crate::connect::vault::UsableToken,
) -> (
    crate::connect::vault::UsableToken,
    Result<crate::providers::Account, crate::providers::ProviderError>,
) {
    let asked = provider
        .account_as(service.http(), &token.credential())
        .await;
    if matches!(asked, Err(crate::providers::ProviderError::Denied(_)))
        && let Some(fresh) = service.refreshed_after_refusal(&token, provider).await
    {
        let again = provider
            .account_as(service.http(), &fresh.credential())
            .await;
        return (fresh, again);
    }
    (token, asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_list_every_definition() {
        let catalog = crate::providers::ProviderCatalog::default();
        let defined: Vec<String> = definitions(&catalog)
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(defined, NAMES);
    }

    /// `api_request` is read-only where every provider allows only reads,
    /// and may destroy where one allows a method that writes; `connect`
    /// adds an account on every call with `another_account`.
    #[test]
    fn annotations_follow_the_allowed_methods() {
        use crate::providers::test_catalog::catalog_of_tables;
        let hints = |catalog: &crate::providers::ProviderCatalog, name: &str| {
            let tool = definitions(catalog)
                .into_iter()
                .find(|t| t.name == name)
                .unwrap();
            let a = tool.annotations.unwrap();
            (a.read_only_hint, a.destructive_hint, a.idempotent_hint)
        };
        let reads =
            catalog_of_tables("[providers.github]\nclient_id = \"c\"\nclient_secret = \"s\"\n");
        assert!(!reads.allows_writes());
        assert_eq!(
            hints(&reads, api_request::NAME),
            (Some(true), Some(false), Some(true))
        );
        let writes = catalog_of_tables(
            "[providers.github]\nclient_id = \"c\"\nclient_secret = \"s\"\nallowed_methods = [\"GET\", \"DELETE\"]\n",
        );
        assert!(writes.allows_writes());
        assert_eq!(
            hints(&writes, api_request::NAME),
            (Some(false), Some(true), Some(false))
        );
        assert_eq!(hints(&reads, connect::NAME).2, Some(false));
        // The description says the same to the model: Dropbox's entry
        // allows POST, the only method its API takes, reads included.
        let said = |catalog: &crate::providers::ProviderCatalog| {
            let tool = definitions(catalog)
                .into_iter()
                .find(|t| t.name == api_request::NAME)
                .unwrap();
            tool.description.unwrap_or_default().to_string()
        };
        assert!(said(&reads).contains("only to read"), "{}", said(&reads));
        assert!(!said(&reads).contains("ask the user"), "{}", said(&reads));
        let dropbox =
            catalog_of_tables("[providers.dropbox]\nclient_id = \"c\"\nclient_secret = \"s\"\n");
        assert!(dropbox.allows_writes());
        for catalog in [&writes, &dropbox] {
            let text = said(catalog);
            assert!(
                text.contains("ask the user before a call that writes"),
                "{text}"
            );
            assert!(!text.contains("only to read"), "{text}");
        }
    }

    #[test]
    fn metrics_label_every_tool() {
        assert_eq!(NAMES, crate::metrics::labels::TOOLS);
    }

    #[test]
    fn a_refused_value_is_quoted_in_part_and_what_was_expected_kept() {
        use serde::Deserialize as _;
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Args {
            provider: u32,
        }
        let long = "x".repeat(100_000);
        let arguments = serde_json::json!({ "provider": long });
        let why = Args::deserialize(&arguments).unwrap_err().to_string();
        let said = shortened(&why);
        assert!(said.chars().count() <= 301, "{said}");
        assert!(said.starts_with("invalid type: string \"xxx"), "{said}");
        assert!(said.ends_with("expected u32"), "{said}");
        assert_eq!(
            shortened("missing field `provider`"),
            "missing field `provider`"
        );
    }
}
