//! Where bench-bare keeps who is connected: in memory (the ceiling), or —
//! with `--database` — in Postgres through mcp-connect's own tables, queries
//! and per-request connections (`mcp_connect::db`), so that "bare rmcp +
//! SQL" costs exactly the database round trips mcp-connect makes on S2 and
//! S3 and nothing else: no token check, no sealing, no logging — unless
//! `--required` asks for the stored tokens sealed at rest (`super::required`).

use std::{collections::HashSet, sync::Arc};

use mcp_connect::db::{self, hot::HotConnections};
use mcp_connect::domain::{ProviderName, UserRef};
use tokio::sync::RwLock;

use super::required::Required;

/// The issuer every bench-bare user belongs to.
pub const ISSUER: &str = "bench-bare";
/// The MCP client every bench-bare caller is.
const CLIENT: &str = "bench";

#[derive(Clone)]
pub enum Store {
    Memory(Arc<RwLock<HashSet<(String, String)>>>),
    Postgres {
        hot: HotConnections,
        /// Seals the stored tokens (with `--required`).
        required: Option<Arc<Required>>,
    },
}

impl Store {
    /// Connects to (and creates and migrates) the database at `url`.
    pub async fn postgres(url: &str, required: Option<Arc<Required>>) -> anyhow::Result<Self> {
        let options = db::connect_options(&url.to_owned().into())?;
        db::create_database_if_missing(&options, db::ANSWER_WITHIN).await?;
        let (pooled, hot) = db::split_connections(20);
        let pool = db::pool(options.clone(), pooled);
        db::migrate(&pool, db::ANSWER_WITHIN).await?;
        Ok(Store::Postgres {
            hot: HotConnections::new(options, hot, pool),
            required,
        })
    }

    /// mcp-connect's one read of a call (S2 and S3): the user's connections
    /// to the provider with their tokens and the client's grants.
    pub async fn is_connected(&self, subject: &str, provider: &str) -> anyhow::Result<bool> {
        match self {
            Store::Memory(set) => Ok(set
                .read()
                .await
                .contains(&(subject.to_owned(), provider.to_owned()))),
            Store::Postgres { .. } => Ok(self.token(subject, provider).await?.is_some()),
        }
    }

    /// The same lookup, returning the stored upstream token as it is (the
    /// floor of S4 unseals nothing), or opened (`--required`). In memory
    /// there is none.
    pub async fn token(&self, subject: &str, provider: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let Store::Postgres { hot, required } = self else {
            return Ok(None);
        };
        let provider = ProviderName::parse(provider)?;
        let found = hot
            .run(async |conn| {
                db::call_accounts::read(conn, UserRef::new(ISSUER, subject), &provider, CLIENT)
                    .await
            })
            .await?;
        // The first is the one mcp-connect picks when no account is named.
        let Some(row) = found
            .into_iter()
            .next()
            .filter(|a| a.grant.is_some())
            .map(|a| a.row)
        else {
            return Ok(None);
        };
        match required {
            Some(required) => required
                .open_token(row.id, subject, &provider, row.access_token)
                .map(Some),
            None => Ok(Some(row.access_token)),
        }
    }

    /// mcp-connect's ticket insert with its audit row (S2). In memory the
    /// ticket is only in the state, so there is nothing to do.
    pub async fn issue_ticket(
        &self,
        subject: &str,
        provider: &str,
        ticket: &str,
    ) -> anyhow::Result<()> {
        let Store::Postgres { hot, .. } = self else {
            return Ok(());
        };
        let provider = &ProviderName::parse(provider)?;
        let ticket_hash = mcp_connect::crypto::secret::sha256(ticket);
        hot.run(async |conn| {
            db::tickets::insert(
                conn,
                db::tickets::NewTicket {
                    id: uuid::Uuid::new_v4(),
                    ticket_hash: &ticket_hash,
                    user: UserRef::new(ISSUER, subject),
                    client_id: CLIENT,
                    provider,
                    scopes: &[],
                    ttl: std::time::Duration::from_secs(600),
                    connection_id: None,
                    add_account: false,
                },
            )
            .await
        })
        .await?;
        Ok(())
    }

    /// Marks a user connected (the harness's stand-in for the browser flow),
    /// with the upstream access token the S4 floor sends, if given.
    pub async fn mark_connected(
        &self,
        subject: String,
        provider: String,
        token: Option<String>,
    ) -> anyhow::Result<()> {
        match self {
            Store::Memory(set) => {
                set.write().await.insert((subject, provider));
                Ok(())
            }
            Store::Postgres { hot, required } => {
                let provider = ProviderName::parse(provider)?;
                let user = UserRef::new(ISSUER, &subject);
                let id = hot
                    .run(async |conn| {
                        db::connections::claim_id(conn, user, &provider, &subject).await
                    })
                    .await?;
                let token = token.as_deref().unwrap_or("not a token").as_bytes();
                let access_token = match required {
                    Some(required) => &required.seal_token(id, &subject, &provider, token)?,
                    None => token,
                };
                hot.run(async |conn| {
                    db::connections::store(
                        &mut *conn,
                        id,
                        db::connections::StoredTokens {
                            account_id: &subject,
                            account_label: &subject,
                            scopes: &[],
                            access_token,
                            refresh_token: None,
                            key_id: "bench",
                            expires_in: None,
                        },
                    )
                    .await?;
                    // As the connect flow grants the client that connected.
                    db::client_grants::insert(conn, id, CLIENT).await.map(drop)
                })
                .await?;
                Ok(())
            }
        }
    }
}
