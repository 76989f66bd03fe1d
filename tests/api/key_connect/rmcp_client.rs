//! rmcp's own client driving the rounds of an `api_request` to a Twilio-like
//! Basic provider: its URL elicitation is answered the way a person would,
//! by opening the link in a browser, signing in and submitting the form on
//! the connect page; rmcp's driver then retries and completes. (The person
//! is `rmcp_person`'s, which also gives an OAuth consent page its
//! parameters and approves at the provider.)

use serde_json::json;

use super::{app_with, twilio_entry};
use provider_fakes::key_providers::twilio;

use crate::rmcp_person::{self, Connects};

#[tokio::test]
async fn rmcp_drives_the_rounds_while_the_person_types_the_credential() {
    let fake = twilio::start().await;
    let app = app_with(&fake, "twilio", twilio_entry(&fake)).await;
    let person = Connects::Form {
        inputs: vec![
            ("field.account_sid".into(), fake.first.clone()),
            ("field.auth_token".into(), fake.second.clone()),
        ],
    };
    let arguments = json!({"provider": "twilio", "path": "Messages.json"});
    let result = rmcp_person::call(&app, person, "api_request", arguments).await;
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
