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
