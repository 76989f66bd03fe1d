//! rmcp's own client driving the rounds of a call to an OAuth provider:
//! its URL elicitation is answered as a person would, by opening the link
//! in a browser, signing in, pressing Continue and approving at the
//! provider (the fake approves at once); rmcp's driver then retries and
//! the call completes.

use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient,
    model::{
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
        ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
        Implementation, ProtocolVersion, UrlElicitationCapability,
    },
    service::RequestContext,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;

use crate::{browser::Browser, full_flow::open_and_continue, helpers::TestApp};

/// The person behind the client, with a browser that reaches the fake.
#[derive(Clone)]
struct Person {
    base: String,
    provider_base: String,
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_url(UrlElicitationCapability::new()));
        ClientConfig::new(capabilities, Implementation::new("oauth-quirks-test", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::UrlElicitationParams { url, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let browser = Browser::at(&self.base);
        let to_provider = open_and_continue(&browser, &url, "alice").await;
        let authorize = to_provider.location.expect("to the provider");
        assert!(authorize.starts_with(&self.provider_base), "{authorize}");
        // The provider approves at once and sends the browser back.
        let approved = provider_fakes::no_redirects()
            .get(&authorize)
            .send()
            .await
            .unwrap();
        assert_eq!(approved.status(), 302, "the provider refused {authorize}");
        let callback = approved.headers()["location"].to_str().unwrap().to_owned();
        let done = browser.get(&callback).await;
        assert_eq!(done.status, 200, "{}", done.body);
        assert!(done.body.contains("connected as"), "{}", done.body);
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }
}

/// Calls `tool` with `arguments` as alice through rmcp, connecting on the
/// way; the completed result.
pub(crate) async fn call(
    app: &TestApp,
    provider_base: &str,
    tool: &str,
    arguments: Value,
) -> CallToolResult {
    let person = Person {
        base: app.base.clone(),
        provider_base: provider_base.to_owned(),
    };
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url())
            .auth_header(app.token("alice")),
    );
    let client = person
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover");
    let result = client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(arguments.as_object().cloned().unwrap()),
        )
        .await
        .expect("rmcp drives the rounds to completion");
    client.cancel().await.expect("close client");
    result
}
