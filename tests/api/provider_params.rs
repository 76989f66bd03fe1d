//! Provider parameters stored with a connection (`db::params`), as the
//! connect flow will carry them from the page to the connection.

use mcp_connect::domain::{ProviderName, UserRef};
use std::collections::BTreeMap;

use mcp_connect::db::{
    connections,
    params::{self, Holder},
};
use uuid::Uuid;

use crate::helpers::spawn_app;

#[tokio::test]
async fn parameters_are_stored_with_the_connection() {
    let app = spawn_app().await;
    let mut conn = app.db.acquire().await.unwrap();
    let id = connections::claim_id(
        &mut conn,
        UserRef::new("https://idp.example", "alice"),
        &ProviderName::parse("zendesk").unwrap(),
        "1",
    )
    .await
    .unwrap();
    assert_eq!(
        params::get(&app.db, Holder::Connection, id).await.unwrap(),
        Some(BTreeMap::new()),
        "none until set"
    );
    let values = BTreeMap::from([
        ("subdomain".to_owned(), "acme".to_owned()),
        (
            "instance_url".to_owned(),
            "https://acme.my.salesforce.com".to_owned(),
        ),
    ]);
    assert!(
        params::set(&app.db, Holder::Connection, id, &values)
            .await
            .unwrap()
    );
    assert_eq!(
        params::get(&app.db, Holder::Connection, id).await.unwrap(),
        Some(values.clone())
    );
    let nobody = Uuid::new_v4();
    for holder in [Holder::Ticket, Holder::Flow, Holder::Connection] {
        assert!(!params::set(&app.db, holder, nobody, &values).await.unwrap());
        assert_eq!(params::get(&app.db, holder, nobody).await.unwrap(), None);
    }
}
