//! Google's granular consent: beyond the sign-in scopes, the person may
//! untick any scope asked for, and the token answer's `scope` names only
//! those granted. The connection records those, so a tool asking for one
//! left unticked is sent to connect again instead of being told it has it.

use serde_json::json;

use provider_fakes::google;

use super::app_with_edit;
use crate::provider_flows::connect;

const CALENDAR: &str = "https://www.googleapis.com/auth/calendar.readonly";
const DRIVE: &str = "https://www.googleapis.com/auth/drive.readonly";

#[tokio::test]
async fn google_records_only_the_scopes_the_person_left_ticked() {
    let fake = google::start().await;
    let scopes =
        format!("scopes = [\"openid\", \"email\", \"profile\", \"{CALENDAR}\", \"{DRIVE}\"]");
    let app = app_with_edit(&fake, "google", &scopes).await;
    fake.tick_only(CALENDAR);
    connect(&app, &fake, "google").await;
    let asked = fake
        .seen("/o/oauth2/v2/auth")
        .pop()
        .expect("an authorize request");
    assert!(asked.query.contains("drive.readonly"), "{}", asked.query);

    let mut stored: Vec<String> = sqlx::query_scalar("SELECT scopes FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    stored.sort();
    let mut granted = [
        CALENDAR,
        "https://www.googleapis.com/auth/userinfo.email",
        "https://www.googleapis.com/auth/userinfo.profile",
        "openid",
    ];
    granted.sort();
    assert_eq!(stored, granted);

    let ask_for = |scope: &str| json!({"provider": "google", "scopes": [scope]});
    let (_, drive) = app.call_tool("alice", "connect", ask_for(DRIVE)).await;
    assert_eq!(drive["result"]["resultType"], "input_required", "{drive}");
    let (_, calendar) = app.call_tool("alice", "connect", ask_for(CALENDAR)).await;
    assert_eq!(calendar["result"]["resultType"], "complete", "{calendar}");
}
