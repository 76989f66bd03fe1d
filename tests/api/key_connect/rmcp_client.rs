//! rmcp's own client driving the rounds of an `api_request` to a Twilio-like
//! Basic provider: its URL elicitation is answered the way a person would,
//! by opening the link in a browser, signing in and submitting the form on
//! the connect page (for an OAuth provider, the consent page, then the
//! provider's approval); rmcp's driver then retries and completes.

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
use serde_json::{Value, json};

use super::{app_with, open_form_in, submit, twilio_entry};
use provider_fakes::{key_providers::twilio, no_redirects};

use crate::{browser::Browser, helpers::TestApp};

/// The person behind the client: opens the link, types the credential
/// (or the consent page's parameters).
#[derive(Clone)]
pub(crate) struct Person {
    pub base: String,
    pub fields: Vec<(String, String)>,
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_url(UrlElicitationCapability::new()));
        ClientConfig::new(capabilities, Implementation::new("key-connect-test", "1"))
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
        let form = open_form_in(&browser, &url, "alice").await;
        let inputs: Vec<(&str, &str)> = self
            .fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut done = submit(&browser, &form, &inputs).await;
        // An OAuth consent page sends the browser on to the provider (a
        // fake that approves at once), which sends it back.
        if done.status == 303 {
            let authorize = done.location.clone().unwrap_or_default();
            let at_provider = no_redirects().get(&authorize).send().await.unwrap();
            let back = at_provider.headers()["location"]
                .to_str()
                .unwrap()
                .to_owned();
            done = browser.get(&back).await;
        }
        assert_eq!(done.status, 200, "{}", done.body);
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }
}

#[tokio::test]
async fn rmcp_drives_the_rounds_while_the_person_types_the_credential() {
    let fake = twilio::start().await;
    let app = app_with(&fake, "twilio", twilio_entry(&fake)).await;
    let person = Person {
        base: app.base.clone(),
        fields: vec![
            ("field.account_sid".into(), fake.first.clone()),
            ("field.auth_token".into(), fake.second.clone()),
        ],
    };
    let arguments = json!({"provider": "twilio", "path": "Messages.json"});
    let result = call_as(&app, person, arguments).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let content = result.structured_content.expect("structuredContent");
    assert_eq!(content["http_status"], 200, "{content}");
    assert_eq!(content["body"]["messages"][0]["sid"], "SM1", "{content}");
    assert!(!content.to_string().contains(&fake.second));
    let call = fake.seen().pop().unwrap();
    assert_eq!(
        call.path,
        format!("/2010-04-01/Accounts/{}/Messages.json", fake.first)
    );
}

/// rmcp's client, as `person`, calls `api_request` with `arguments` and
/// drives the rounds to the end.
pub(crate) async fn call_as(app: &TestApp, person: Person, arguments: Value) -> CallToolResult {
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
            CallToolRequestParams::new("api_request")
                .with_arguments(arguments.as_object().cloned().unwrap()),
        )
        .await
        .expect("rmcp drives the rounds to completion");
    client.cancel().await.expect("close client");
    result
}
