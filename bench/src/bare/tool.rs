//! The bare server's handler: `whoami` and `connect` with mcp-connect's
//! semantics, in memory or with mcp-connect's SQL (`super::store`). First call → `input_required` with a URL
//! elicitation (a fresh random ticket) and a `requestState` that is plain
//! base64url JSON (no sealing); a retry accepting it completes when the user
//! is marked connected. With `--required` the state is sealed and bound to
//! the request by mcp-connect's own `connect::state`, and each call's outcome
//! goes into the request's log line (`super::required`).

use std::sync::Arc;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
        ElicitRequestParams, Implementation, InputRequest, InputRequests, InputRequiredResult,
        JsonObject, ListToolsResult, MetaObject, PaginatedRequestParams, ProtocolVersion,
        ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use mcp_connect::{
    auth::Principal,
    connect::{
        state::{self, Binding, RoundState, RoundTicket},
        tickets::TicketSecret,
    },
    domain::{ProviderName, UserRef},
    mcp::{CallRecord, ToolOutcome},
};

use super::{bridge::Caller, required::Required, store::Store};

/// How long a sealed state lives (mcp-connect's default).
const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// Where `whoami` asks who the account is (the S4 floor), and with what.
pub struct Upstream {
    pub url: String,
    pub http: reqwest::Client,
}

#[derive(Clone)]
pub struct BareServer {
    base: Arc<str>,
    store: Store,
    upstream: Option<Arc<Upstream>>,
    tools: Arc<Vec<Tool>>,
    meta: MetaObject,
    required: Option<Arc<Required>>,
}

#[derive(Serialize, Deserialize)]
struct State {
    sub: String,
    tool: String,
    provider: String,
    ticket: String,
}

fn implementation() -> Implementation {
    Implementation::new("bench-bare", "0.1.0")
}

fn tool(name: &'static str, description: &'static str) -> Tool {
    let schema = json!({
        "type": "object",
        "properties": { "provider": { "type": "string", "description": "The provider, e.g. \"github\"." } },
        "required": ["provider"],
        "additionalProperties": false,
    });
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

impl BareServer {
    pub fn new(
        base: String,
        store: Store,
        upstream: Option<Upstream>,
        required: Option<Arc<Required>>,
    ) -> Self {
        let mut meta = MetaObject::new();
        meta.0.insert(
            "io.modelcontextprotocol/serverInfo".to_owned(),
            serde_json::to_value(implementation()).unwrap_or_default(),
        );
        Self {
            base: base.into(),
            store,
            upstream: upstream.map(Arc::new),
            tools: Arc::new(vec![
                tool("whoami", "The account connected at a provider."),
                tool("connect", "Connect an account at a provider."),
            ]),
            meta,
            required,
        }
    }

    async fn ask(
        &self,
        caller: &str,
        tool: &str,
        provider: &str,
        sealing: Option<(&Required, &Binding<'_>)>,
    ) -> Result<InputRequiredResult, ErrorData> {
        let mut raw = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut raw);
        let ticket = URL_SAFE_NO_PAD.encode(raw);
        self.store
            .issue_ticket(caller, provider, &ticket)
            .await
            .map_err(internal)?;
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!("Connect your {provider} account to continue."),
            url: format!("{}/connect?ticket={ticket}", self.base),
            elicitation_id: String::new(),
        };
        let state = match sealing {
            Some((required, binding)) => {
                let round = RoundState {
                    ticket: Some(RoundTicket {
                        id: uuid::Uuid::new_v4(),
                        secret: TicketSecret::parse(&ticket)
                            .ok_or_else(|| internal(anyhow::anyhow!("ticket")))?,
                    }),
                    provider: ProviderName::parse(provider).map_err(|e| internal(e.into()))?,
                    round: 1,
                    account: None,
                    offered: Vec::new(),
                };
                state::seal(&required.keys, binding, &round, STATE_TTL)
                    .map_err(|e| internal(e.into()))?
            }
            None => {
                let state = State {
                    sub: caller.to_owned(),
                    tool: tool.to_owned(),
                    provider: provider.to_owned(),
                    ticket,
                };
                URL_SAFE_NO_PAD.encode(serde_json::to_vec(&state).unwrap_or_default())
            }
        };
        let mut requests = InputRequests::new();
        requests.insert(
            format!("connect_{provider}"),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        );
        Ok(InputRequiredResult::new(Some(requests), Some(state)))
    }
}

impl BareServer {
    fn connected(&self, provider: &str, caller: &str) -> CallToolResponse {
        let mut result = CallToolResult::structured(json!({
            "provider": provider, "account": caller, "account_id": caller,
        }));
        result.content = vec![ContentBlock::text(format!(
            "{provider} is connected as {caller}."
        ))];
        result.meta = Some(self.meta.clone());
        CallToolResponse::Complete(result)
    }
}

impl BareServer {
    /// The upstream's account for the stored token: the same GET, with the
    /// same HTTP client, as mcp-connect's `whoami`.
    async fn ask_upstream(
        &self,
        upstream: &Upstream,
        provider: &str,
        token: &[u8],
    ) -> Result<CallToolResponse, ErrorData> {
        let token = std::str::from_utf8(token).map_err(|e| internal(e.into()))?;
        let account: Value = upstream
            .http
            .get(&upstream.url)
            .bearer_auth(token)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| internal(e.into()))?
            .json()
            .await
            .map_err(|e| internal(e.into()))?;
        let (id, login) = (&account["id"], &account["login"]);
        let mut result = CallToolResult::structured(json!({
            "provider": provider, "account_id": id, "account": login,
        }));
        result.content = vec![ContentBlock::text(format!(
            "Connected to {provider} as {} (id {}).",
            login.as_str().unwrap_or_default(),
            id.as_str().unwrap_or_default()
        ))];
        result.meta = Some(self.meta.clone());
        Ok(CallToolResponse::Complete(result))
    }
}

fn internal(e: anyhow::Error) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

fn accepted(request: &CallToolRequestParams, key: &str) -> bool {
    request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(key))
        .and_then(|v| v.get("action"))
        .and_then(Value::as_str)
        == Some("accept")
}

impl ServerHandler for BareServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation())
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(&[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = ListToolsResult::with_all_items(self.tools.as_ref().clone());
        result.meta = Some(self.meta.clone());
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let parts = context.extensions.get::<http::request::Parts>();
        let record = parts.and_then(|p| p.extensions.get::<CallRecord>());
        let principal = parts.and_then(|p| p.extensions.get::<Arc<Principal>>());
        let outcome = self.answer(&request, &context, principal).await;
        // As mcp-connect's handler: how the call ended, for the log line.
        if let Some(record) = record {
            record.set(ToolOutcome::of(&request, &outcome));
        }
        outcome
    }
}

impl BareServer {
    async fn answer(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        principal: Option<&Arc<Principal>>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .map(|c| c.0.clone())
            .ok_or_else(|| ErrorData::invalid_request("no bearer token", None))?;
        let provider = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("provider"))
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params("provider is required", None))?
            .to_owned();
        let sealing = match (&self.required, principal) {
            (Some(required), Some(p)) => Some((
                required.as_ref(),
                Binding {
                    audience: &required.audience,
                    user: UserRef::new(&p.issuer, &p.subject),
                    client_id: &p.client_id,
                    method: "tools/call",
                    target: &request.name,
                    arguments: request.arguments.as_ref(),
                },
            )),
            _ => None,
        };
        let key = format!("connect_{provider}");
        if let Some(sealed) = request.request_state.as_deref() {
            let state_provider = match &sealing {
                Some((required, binding)) => state::open(&required.keys, binding, sealed)
                    .map(|round| round.provider.to_string())
                    .ok(),
                None => URL_SAFE_NO_PAD
                    .decode(sealed)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .filter(|s: &State| {
                        s.sub == caller && s.tool == *request.name && s.provider == provider
                    })
                    .map(|s| s.provider),
            }
            .ok_or_else(|| ErrorData::invalid_params("Invalid or expired requestState", None))?;
            if accepted(request, &key)
                && self
                    .store
                    .is_connected(&caller, &state_provider)
                    .await
                    .map_err(internal)?
            {
                return Ok(self.connected(&provider, &caller));
            }
        }
        // As mcp-connect: a first call looks for a connection before asking.
        if request.request_state.is_none() && matches!(self.store, Store::Postgres { .. }) {
            let token = self
                .store
                .token(&caller, &provider)
                .await
                .map_err(internal)?;
            match (token, &self.upstream) {
                (Some(token), Some(upstream)) if request.name == "whoami" => {
                    return self.ask_upstream(upstream, &provider, &token).await;
                }
                (Some(_), _) => return Ok(self.connected(&provider, &caller)),
                (None, _) => {}
            }
        }
        let sealing = sealing.as_ref().map(|(r, b)| (*r, b));
        let mut result = self.ask(&caller, &request.name, &provider, sealing).await?;
        result.meta = Some(self.meta.clone());
        Ok(CallToolResponse::InputRequired(result))
    }
}
