//! rmcp's own client driving the rounds of a tool call that needs a
//! connection: its URL elicitation is answered as a person would, by
//! opening the link in a browser and signing in, then either approving at
//! an OAuth provider (the fakes approve at once) or typing a credential
//! into the connect page's form; rmcp's driver then retries and the call
//! completes.

use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient,
    model::{
        CallToolRequestParams, CallToolResult, ClientConfig, ElicitRequestParams, ElicitResult,
        ElicitationAction, ProtocolVersion,
    },
    service::RequestContext,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;

use crate::{
    browser::Browser,
    full_flow::open_and_continue,
    helpers::TestApp,
    key_connect::{open_form_in, submit},
};

/// What the person does on the connect page.
#[derive(Clone)]
pub(crate) enum Connects {
    /// Presses Continue and approves at the provider on `provider_base`.
    OAuth { provider_base: String },
    /// Fills in the form with these inputs (`field.<name>`, `param.<name>`):
    /// a credential, or an OAuth consent page's parameters, after which
    /// the provider (a fake) approves at once.
    Form { inputs: Vec<(String, String)> },
}

/// The person behind the client, signed in as alice.
#[derive(Clone)]
struct Person {
    base: String,
    connects: Connects,
}

impl Person {
    async fn connect(&self, url: &str) {
        let browser = Browser::at(&self.base);
        let done = match &self.connects {
            Connects::OAuth { provider_base } => {
                let to_provider = open_and_continue(&browser, url, "alice").await;
                let authorize = to_provider.location.expect("to the provider");
                assert!(authorize.starts_with(provider_base), "{authorize}");
                browser.get(&approve(&authorize).await).await
            }
            Connects::Form { inputs } => {
                let form = open_form_in(&browser, url, "alice").await;
                let inputs: Vec<(&str, &str)> = inputs
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let done = submit(&browser, &form, &inputs).await;
                // An OAuth consent page sends the browser on to the provider.
                match done.location.as_deref() {
                    Some(authorize) if done.status == 303 => {
                        browser.get(&approve(authorize).await).await
                    }
                    _ => done,
                }
            }
        };
        assert_eq!(done.status, 200, "{}", done.body);
        assert!(done.body.contains("connected as"), "{}", done.body);
    }
}

/// The provider (a fake) approves at once: where it sends the browser back.
async fn approve(authorize: &str) -> String {
    let approved = provider_fakes::no_redirects()
        .get(authorize)
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 302, "the provider refused {authorize}");
    approved.headers()["location"].to_str().unwrap().to_owned()
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        crate::peer_rmcp::client_info(ProtocolVersion::V_2026_07_28)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::UrlElicitationParams { url, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        self.connect(&url).await;
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }
}

/// Calls `tool` with `arguments` as alice through rmcp, connecting on the
/// way as `connects` says; the completed result.
pub(crate) async fn call(
    app: &TestApp,
    connects: Connects,
    tool: &str,
    arguments: Value,
) -> CallToolResult {
    let person = Person {
        base: app.base.clone(),
        connects,
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
