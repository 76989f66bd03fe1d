//! The MCP server handler: what the server declares (versions, capabilities,
//! tools) and the dispatch of each request to the tools. Stateless: one
//! handler value serves every request; the caller comes with each request.

use crate::connect::errors::RequestError;
use std::{borrow::Cow, pin::Pin, sync::Arc};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CacheScope, CallToolRequestParams, CallToolResponse, Implementation,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, MetaObject,
        PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
        ServerCapabilities, ServerConfig, Tool,
    },
    service::{MaybeSendFuture, RequestContext},
};

use super::access_log::{CallRecord, ToolOutcome};
use crate::{
    auth::Principal,
    connect::ConnectionService,
    tools::{self, resources},
};

/// How long clients may cache list results: the tool set only changes with a
/// new release, but a short TTL keeps upgrades visible.
const LIST_TTL_MS: u64 = 5 * 60 * 1000;

/// rmcp clones the handler for every request: one `Arc`, so that is one
/// reference count, not one per part of the application state. Each worker
/// thread clones a copy of its own ([`McpServer::own_copy`]): a count both
/// workers wrote would move between their cores on every request.
#[derive(Clone)]
pub struct McpServer(Arc<Shared>);

#[derive(Clone)]
struct Shared {
    connect: Arc<ConnectionService>,
    /// This server's MCP resource identifier.
    audience: String,
    tools: Vec<Tool>,
    /// What `get_info` answers, built once: rmcp asks for it on every request.
    info: ServerConfig,
    /// `_meta` for every result, built once.
    meta: MetaObject,
}

impl McpServer {
    /// Fails only if the server's own identity does not serialize, which
    /// would be a bug: better a server that does not start than results
    /// that silently lack it.
    pub fn new(
        connect: Arc<ConnectionService>,
        audience: String,
    ) -> Result<Self, serde_json::Error> {
        let tools = tools::definitions(connect.providers());
        Ok(Self(Arc::new(Shared {
            connect,
            audience,
            tools,
            info: server_config(),
            meta: result_meta()?,
        })))
    }
}

impl McpServer {
    /// The same server behind an `Arc` of its own.
    /// Each worker's copy holds its own tool schemas as well: rmcp clones
    /// a tool (its schemas' `Arc`s) for every call, and counts both
    /// workers wrote would be a cache line the two cores pass back and
    /// forth.
    pub fn own_copy(&self) -> Self {
        let mut shared = Shared::clone(&self.0);
        for tool in &mut shared.tools {
            tool.input_schema = Arc::new((*tool.input_schema).clone());
            tool.output_schema = tool
                .output_schema
                .as_ref()
                .map(|schema| Arc::new((**schema).clone()));
        }
        Self(Arc::new(shared))
    }

    /// Adds this server's `_meta` to a result's own.
    fn add_meta(&self, meta: &mut Option<MetaObject>) {
        match meta {
            None => *meta = Some(self.0.meta.clone()),
            Some(own) => own.0.extend(self.0.meta.0.clone()),
        }
    }

    async fn answer_read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let principal = principal(&context)?;
        let read = resources::read(
            &self.0.connect,
            &self.0.audience,
            &principal,
            &request,
            &context,
        )
        .await;
        if let (Err(e), Some(record)) = (&read, CallRecord::of(&context)) {
            record.ended_with(e);
        }
        let mut response = read?;
        match &mut response {
            ReadResourceResponse::Complete(r) => self.add_meta(&mut r.meta),
            ReadResourceResponse::InputRequired(r) => self.add_meta(&mut r.meta),
            _ => {}
        }
        Ok(response)
    }

    async fn answer_tool_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let principal = principal(&context)?;
        let call = tools::ToolCall {
            service: &self.0.connect,
            audience: &self.0.audience,
            principal: &principal,
            request: &request,
            context: &context,
        };
        let outcome = tools::call(call).await;
        // Who called what, and how it ended; never arguments or results.
        let outcome_note = ToolOutcome::of(&request, &outcome);
        match CallRecord::of(&context) {
            // The bridge writes it in the request's one log line.
            Some(record) => {
                if let Err(e) = &outcome {
                    record.ended_with(e);
                }
                record.set(outcome_note);
            }
            None => {
                tracing::info!(subject = %principal.subject_for_log(), outcome = ?outcome_note, "tools/call")
            }
        }
        let mut response = outcome?;
        match &mut response {
            CallToolResponse::Complete(r) => self.add_meta(&mut r.meta),
            CallToolResponse::InputRequired(r) => self.add_meta(&mut r.meta),
            _ => {}
        }
        Ok(response)
    }
}

fn server_config() -> ServerConfig {
    let capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_resources()
        .build();
    ServerConfig::new(capabilities)
        .with_server_info(implementation())
        .with_instructions(
            "Tools that act on a third-party account (GitHub, Google, Slack, …) ask the user \
             to connect it first through a URL: open it for the user and retry the call.",
        )
}

/// The server's identity.
fn implementation() -> Implementation {
    Implementation::new("mcp-connect", env!("CARGO_PKG_VERSION"))
        .with_title("mcp-connect")
        .with_description("Use your third-party accounts from any MCP client, without handing it your credentials.")
}

/// `_meta` for every result: 2026-07-28 results name the server ("name and
/// version", the spec's words for this field). The title and description
/// are said once, in `server/discover`; repeated in every result they
/// would be a fifth of a connected call's answer, written and parsed for
/// nothing.
fn result_meta() -> Result<MetaObject, serde_json::Error> {
    let mut meta = MetaObject::new();
    meta.0.insert(
        "io.modelcontextprotocol/serverInfo".to_owned(),
        serde_json::to_value(Implementation::new(
            "mcp-connect",
            env!("CARGO_PKG_VERSION"),
        ))?,
    );
    Ok(meta)
}

/// The protocol revisions served: 2026-07-28 (stateless) and the legacy
/// 2025-11-25. Clients of earlier revisions are refused, also by the
/// bridge's check of `MCP-Protocol-Version` (`super::protocol_version`).
pub(super) const SUPPORTED_VERSIONS: &[ProtocolVersion] =
    &[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25];

/// The caller, as authenticated by the bridge before rmcp saw the request.
pub fn principal(context: &RequestContext<RoleServer>) -> Result<Arc<Principal>, ErrorData> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Arc<Principal>>())
        .cloned()
        .ok_or_else(|| {
            tracing::error!("mcp: request reached a handler without an authenticated principal");
            ErrorData::from(RequestError::Internal)
        })
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        self.0.info.clone()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = ListToolsResult::with_all_items(self.0.tools.clone())
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Public);
        result.meta = Some(self.0.meta.clone());
        Ok(result)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut result = ListResourcesResult::with_all_items(resources::resources())
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Public);
        result.meta = Some(self.0.meta.clone());
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut result = ListResourceTemplatesResult::with_all_items(resources::templates())
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Public);
        result.meta = Some(self.0.meta.clone());
        Ok(result)
    }

    // Boxed whole, as `call_tool`.
    fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ReadResourceResponse, ErrorData>> + MaybeSendFuture + '_ {
        built_in_a_box(|| self.answer_read_resource(request, context))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.0.tools.iter().find(|t| t.name == name).cloned()
    }

    // Boxed whole: rmcp's `handle_request` holds the handler's future
    // inline and moves it, with the request and its context, between its
    // own states (a dozen `memcpy`s of kilobytes per tool call, ≈20,000
    // instructions); a box moves as a pointer.
    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        built_in_a_box(|| self.answer_tool_call(request, context))
    }
}

/// The future `make` returns, in a box it is built in. `Box::pin(f())`
/// builds the future on the stack and then copies all of it into the box:
/// the tool call's is ≈6.5 KB (its largest state, however rarely reached),
/// so that was three `memcpy`s and ≈8,000 instructions per call, into
/// memory that with many requests in flight is no longer in the cache.
/// With the box allocated first, the compiler writes the new future (its
/// arguments and a state tag) straight into it.
#[inline(always)]
fn built_in_a_box<F: Future>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    Box::into_pin(Box::write(Box::new_uninit(), make()))
}
