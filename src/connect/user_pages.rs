//! The operations of the connections and approval pages on the user's
//! several accounts and their clients' grants. Like the rest of the
//! service, they take the user's identity and never hand out a token.

use crate::domain::{ProviderName, UserRef};
use std::time::Duration;

use uuid::Uuid;

use super::{ConnectedAccount, ConnectionService, grants, vault};
use crate::db::{
    self,
    client_grants::Grant,
    connections::{ConnectionStatus, ConnectionSummary, Renamed},
    oauth_flows::OAuthFlow,
    tickets::Ticket,
};

impl ConnectionService {
    /// The account a completed connect flow stored, while it is the user's
    /// and usable: what a reload of the success page shows again. `None`
    /// after a flow that stored nothing (its code exchange failed).
    pub async fn account_connected_by(
        &self,
        user: UserRef<'_>,
        flow: &OAuthFlow,
    ) -> Result<Option<ConnectedAccount>, sqlx::Error> {
        let Some(id) = flow.connection_id else {
            return Ok(None);
        };
        let found = db::connections::find_summary_for_user(&self.db, user, id).await?;
        Ok(found
            .filter(|c| c.status == ConnectionStatus::Active)
            .map(|c| ConnectedAccount {
                account_label: c.account_label,
                account_id: c.account_id,
            }))
    }

    /// The user's connection `id`, if it is theirs. Never a token.
    pub async fn connection_of(
        &self,
        user: UserRef<'_>,
        id: Uuid,
    ) -> Result<Option<ConnectionSummary>, sqlx::Error> {
        db::connections::find_summary_for_user(&self.db, user, id).await
    }

    /// Renames one of the user's connections, unless another of their
    /// accounts at that provider has the label already.
    pub async fn rename(
        &self,
        user: UserRef<'_>,
        id: Uuid,
        label: &str,
    ) -> Result<Renamed, sqlx::Error> {
        let mut tx = self.db.begin().await?;
        super::vault::wait_for_refreshes(&mut tx, &self.settings.database).await?;
        db::connections::lock_labels(&mut *tx, user, id).await?;
        let renamed = db::connections::set_label(&mut *tx, user, id, label).await?;
        tx.commit().await?;
        Ok(renamed)
    }

    /// [`Self::disconnect`] for one account among several (`None`: the
    /// oldest): what the provider was told, or `None` when there was no
    /// such connection.
    pub async fn disconnect_account(
        &self,
        user: UserRef<'_>,
        provider: &ProviderName,
        connection: Option<Uuid>,
    ) -> anyhow::Result<Option<vault::Revocation>> {
        vault::disconnect_account(self, user, provider, connection).await
    }

    /// Counts a new connect link against the user's per-minute share; the
    /// wait when it is spent. Tools' answers and the Reconnect button
    /// share it.
    pub fn take_link(&self, user: UserRef<'_>) -> Result<(), Duration> {
        self.link_limit.take(user)
    }

    /// The user's grants to MCP clients, over all their connections.
    pub async fn client_grants(&self, user: UserRef<'_>) -> Result<Vec<Grant>, sqlx::Error> {
        db::client_grants::list_for_user(&self.db, user).await
    }

    /// Clients waiting for the user to allow them on one of their
    /// connections (the connections page lists them).
    pub async fn pending_approvals(&self, user: UserRef<'_>) -> Result<Vec<Ticket>, sqlx::Error> {
        db::tickets::pending_approvals(&self.db, user).await
    }

    /// The approval page's Allow: see [`grants::allow`].
    pub async fn allow_client(
        &self,
        user: UserRef<'_>,
        ticket: &Ticket,
    ) -> anyhow::Result<grants::Allowed> {
        grants::allow(self, user, ticket).await
    }

    /// Whether the person asked for this ticket on their connections page
    /// (Connect, Reconnect, Add another account) rather than an MCP
    /// client: pages then send them back there, not to a client.
    pub fn asked_on_connections_page(&self, ticket: &Ticket) -> bool {
        self.settings.auth.web_client_id.as_deref() == Some(ticket.client_id.as_str())
    }

    /// Whether this approval ticket was allowed already: redeemed (not
    /// declined or left to expire) and its client on the connection. A
    /// second Allow (a double click) finds its ticket used by the first.
    pub async fn was_allowed(&self, ticket: &Ticket) -> Result<bool, sqlx::Error> {
        let Some(connection_id) = ticket.connection_id else {
            return Ok(false);
        };
        let now = db::tickets::find_by_id(&self.db, ticket.id).await?;
        if !now.is_some_and(|t| t.redeemed_at.is_some() && t.declined_at.is_none()) {
            return Ok(false);
        }
        Ok(
            db::client_grants::find(&self.db, connection_id, &ticket.client_id)
                .await?
                .is_some(),
        )
    }

    /// Whether this ticket was declined already (by a first Deny or
    /// Cancel, when a second one finds it no longer usable).
    pub async fn was_declined(&self, ticket: &Ticket) -> Result<bool, sqlx::Error> {
        let now = db::tickets::find_by_id(&self.db, ticket.id).await?;
        Ok(now.is_some_and(|t| t.declined_at.is_some()))
    }

    /// "Remove access": the client may no longer use the connection.
    pub async fn remove_client_access(
        &self,
        user: UserRef<'_>,
        connection_id: Uuid,
        client_id: &str,
    ) -> anyhow::Result<bool> {
        grants::remove(self, user, connection_id, client_id).await
    }
}
