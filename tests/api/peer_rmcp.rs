//! rmcp's own client as a real protocol peer: a 2026-07-28 client (discover,
//! per-request `_meta`, MRTR rounds driven by hand and by rmcp's driver) and
//! a legacy 2025-11-25 client (`initialize`, `-32042`) over Streamable HTTP
//! with the bearer token, against the real application.

use std::sync::{Arc, Mutex};

use mcp_connect::state::AppState;
use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
        ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, ErrorCode,
        Implementation, InputRequest, InputRequiredResult, InputResponses, JsonObject,
        ProtocolVersion, ResultType, UrlElicitationCapability,
    },
    service::{RequestContext, RunningService, ServiceError},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};

use crate::helpers::{TestApp, connect_directly, spawn_app, spawn_app_with};

/// The only thing a test client does on its own: answer URL elicitations the
/// way a user would, by "opening the link" (`user`, if any) and accepting.
#[derive(Clone)]
struct TestClient {
    info: ClientConfig,
    user: Option<Arc<User>>,
    seen_urls: Arc<Mutex<Vec<String>>>,
}

/// The user behind the client: opening the link stores their connection, as
/// the OAuth callback would after they finished in the browser.
struct User {
    state: AppState,
    issuer: String,
    subject: String,
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::UrlElicitationParams { url, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        self.seen_urls.lock().unwrap().push(url.clone());
        let Some(user) = &self.user else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        connect_directly(
            &user.state.connect,
            &user.issuer,
            &user.subject,
            "peer-rmcp-access-token",
        )
        .await;
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }
}

pub(crate) fn client_info(version: ProtocolVersion) -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation =
        Some(ElicitationCapability::new().with_url(UrlElicitationCapability::new()));
    ClientConfig::new(capabilities, Implementation::new("peer-rmcp-test", "1"))
        .with_protocol_version(version)
}

fn test_client(version: ProtocolVersion) -> TestClient {
    TestClient {
        info: client_info(version),
        user: None,
        seen_urls: Arc::default(),
    }
}

fn transport(app: &TestApp, subject: &str) -> StreamableHttpClientTransport<reqwest::Client> {
    StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url())
            .auth_header(app.token(subject)),
    )
}

/// A 2026-07-28 rmcp client for `subject`, started with `server/discover`.
async fn modern(
    app: &TestApp,
    subject: &str,
    client: TestClient,
) -> RunningService<RoleClient, TestClient> {
    client
        .serve_with_lifecycle(
            transport(app, subject),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("rmcp client: server/discover")
}

/// A 2025-11-25 rmcp client for `subject`, started with `initialize`.
async fn legacy(app: &TestApp, subject: &str) -> RunningService<RoleClient, TestClient> {
    test_client(ProtocolVersion::V_2025_11_25)
        .serve_with_lifecycle(transport(app, subject), ClientLifecycleMode::Initialize)
        .await
        .expect("rmcp client: initialize")
}

fn args(value: Value) -> JsonObject {
    value.as_object().cloned().expect("object")
}

fn call(tool: &'static str) -> CallToolRequestParams {
    CallToolRequestParams::new(tool).with_arguments(args(json!({"provider": "demo"})))
}

fn expect_complete(response: CallToolResponse) -> CallToolResult {
    match response {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected a complete result, got {other:?}"),
    }
}

fn expect_input_required(response: CallToolResponse) -> InputRequiredResult {
    match response {
        CallToolResponse::InputRequired(result) => result,
        other => panic!("expected input_required, got {other:?}"),
    }
}

/// The one URL elicitation of an `input_required` result: (key, url,
/// elicitation id as rmcp decoded it).
fn url_elicitation(result: &InputRequiredResult) -> (String, String, String) {
    let requests = result.input_requests.as_ref().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, request) = requests.iter().next().unwrap();
    let InputRequest::Elicitation(request) = request else {
        panic!("{key}: not an elicitation: {request:?}");
    };
    let ElicitRequestParams::UrlElicitationParams {
        url,
        elicitation_id,
        message,
        ..
    } = &request.params
    else {
        panic!("{key}: not a URL elicitation: {request:?}");
    };
    assert!(message.contains("Demo"), "{message}");
    (key.clone(), url.clone(), elicitation_id.clone())
}

fn assert_connect_link(app: &TestApp, url: &str) {
    let ticket = url
        .strip_prefix(&format!("{}/connect?ticket=", app.base))
        .unwrap_or_else(|| panic!("not a connect link of this server: {url}"));
    assert_eq!(ticket.len(), 43, "a 256-bit ticket and nothing else: {url}");
}

fn responses(key: &str, action: ElicitationAction) -> InputResponses {
    let answer = serde_json::to_value(ElicitResult::new(action)).unwrap();
    InputResponses::from([(key.to_owned(), answer)])
}

#[tokio::test]
async fn rmcp_client_discovers_lists_tools_and_lists_no_connections() {
    let app = spawn_app().await;
    let client = modern(&app, "alice", test_client(ProtocolVersion::V_2026_07_28)).await;

    let server = client.peer_info().expect("discover result");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2026_07_28);
    assert!(server.capabilities.tools.is_some(), "{server:?}");
    assert_eq!(
        server.server_info.as_ref().map(|i| i.name.as_str()),
        Some("mcp-connect"),
        "serverInfo from the discover result's _meta"
    );

    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "api_request",
            "connect",
            "connections_list",
            "disconnect",
            "whoami"
        ]
    );

    let result = expect_complete(
        client
            .call_tool_once(CallToolRequestParams::new("connections_list"))
            .await
            .expect("tools/call connections_list"),
    );
    assert_eq!(result.result_type, Some(ResultType::COMPLETE));
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        result.structured_content,
        Some(json!({"connections": [], "providers": [{
            "provider": "demo", "display_name": "Demo", "credential": "oauth2", "connected_accounts": 0
        }]})),
        "{result:?}"
    );
    client.cancel().await.expect("close client");
}

#[tokio::test]
async fn rmcp_client_drives_the_connect_round_trip_by_hand() {
    let app = spawn_app_with(|t| {
        t.insert(
            "flow".into(),
            toml::Value::Table(toml::from_str("connect_wait_ms = 200").unwrap()),
        );
    })
    .await;
    let client = modern(&app, "alice", test_client(ProtocolVersion::V_2026_07_28)).await;

    // whoami without a connection: a URL elicitation to this server's /connect.
    let first = expect_input_required(client.call_tool_once(call("whoami")).await.unwrap());
    let (key, url, elicitation_id) = url_elicitation(&first);
    assert_connect_link(&app, &url);
    assert_eq!(elicitation_id, "", "2026-07-28 has no elicitationId");
    let state = first.request_state.clone().expect("requestState");
    assert!(!state.is_empty());

    // Accepted, but the user has not finished: asked again, same link.
    let again = expect_input_required(
        client
            .call_tool_once(
                call("whoami")
                    .with_input_responses(responses(&key, ElicitationAction::Accept))
                    .with_request_state(state),
            )
            .await
            .unwrap(),
    );
    assert_eq!(url_elicitation(&again).1, url);

    // Declined: complete, isError, says so.
    let declined = expect_complete(
        client
            .call_tool_once(
                call("whoami")
                    .with_input_responses(responses(&key, ElicitationAction::Decline))
                    .with_request_state(again.request_state.clone().expect("requestState")),
            )
            .await
            .unwrap(),
    );
    assert_eq!(declined.is_error, Some(true), "{declined:?}");
    assert!(
        format!("{:?}", declined.content).contains("declined"),
        "{declined:?}"
    );

    // connect: asked, the user finishes in the browser, the retry completes.
    let asked = expect_input_required(client.call_tool_once(call("connect")).await.unwrap());
    let (key, url, _) = url_elicitation(&asked);
    assert_connect_link(&app, &url);
    app.connect_directly("alice", "peer-rmcp-access-token")
        .await;
    let done = expect_complete(
        client
            .call_tool_once(
                call("connect")
                    .with_input_responses(responses(&key, ElicitationAction::Accept))
                    .with_request_state(asked.request_state.clone().expect("requestState")),
            )
            .await
            .unwrap(),
    );
    assert_eq!(done.result_type, Some(ResultType::COMPLETE));
    assert_ne!(done.is_error, Some(true), "{done:?}");
    let content = done.structured_content.expect("structuredContent");
    assert_eq!(content["account"], "alice-at-demo", "{content}");
    assert!(!content.to_string().contains("peer-rmcp-access-token"));

    client.cancel().await.expect("close client");
}

#[tokio::test]
async fn rmcp_client_mrtr_driver_completes_once_the_user_connected() {
    let app = spawn_app().await;
    let mut peer = test_client(ProtocolVersion::V_2026_07_28);
    peer.user = Some(Arc::new(User {
        state: app.state.clone(),
        issuer: app.dev.issuer(),
        subject: "alice".to_owned(),
    }));
    let seen = peer.seen_urls.clone();
    let client = modern(&app, "alice", peer).await;

    let result = client
        .call_tool(call("connect"))
        .await
        .expect("rmcp drives the rounds to completion");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        result.structured_content.as_ref().map(|c| &c["account"]),
        Some(&json!("alice-at-demo")),
        "{result:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one URL elicitation, one retry: {seen:?}");
    assert_connect_link(&app, &seen[0]);
    client.cancel().await.expect("close client");
}

#[tokio::test]
async fn legacy_rmcp_client_gets_32042_with_an_elicitation_id_then_its_plain_retry_completes() {
    let app = spawn_app().await;
    let client = legacy(&app, "alice").await;
    assert_eq!(
        client
            .peer_info()
            .expect("initialize result")
            .protocol_version,
        ProtocolVersion::V_2025_11_25
    );

    let error = match client.call_tool(call("connect")).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected the -32042 error, got {other:?}"),
    };
    assert_eq!(error.code, ErrorCode(-32042), "{error:?}");
    let data = error.data.expect("error data");
    let elicitations = data["elicitations"].as_array().expect("elicitations");
    assert_eq!(elicitations.len(), 1, "{data}");
    let e = &elicitations[0];
    assert_eq!(e["mode"], "url", "{e}");
    assert!(
        e["elicitationId"].as_str().is_some_and(|id| !id.is_empty()),
        "{e}"
    );
    assert_connect_link(&app, e["url"].as_str().expect("url"));

    app.connect_directly("alice", "peer-rmcp-access-token")
        .await;
    let result = client
        .call_tool(call("connect"))
        .await
        .expect("the plain retry completes once connected");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        result.structured_content.as_ref().map(|c| &c["account"]),
        Some(&json!("alice-at-demo"))
    );
    client.cancel().await.expect("close client");
}
