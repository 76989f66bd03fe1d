//! Re-sealing stored tokens with the current key: the second phase of a
//! key rotation. Connections' tokens, and those of the revocations still
//! owed (`pending_revocations`), which need their key as long as they are
//! retried.

use std::collections::HashSet;

use uuid::Uuid;

use super::{
    claim::{Held, hold_refreshes},
    seal::{HoldsSealedTokens, Kind, context},
};
use crate::{
    connect::ConnectionService,
    crypto::{Purpose, Sealed},
    db,
};

/// At most this many passes over the rows left on older keys: a pass
/// finds those another instance sealed while the one before ran (an
/// instance not yet told the new key comes first).
const PASSES: usize = 3;

/// What a re-seal did, and what it could not do.
#[derive(Debug, Default)]
pub struct Rekeyed {
    /// Connections now sealed by the current key.
    pub resealed: u64,
    /// Connections whose tokens did not open with the key they name (the
    /// row's bytes damaged, or the key's material not what sealed them):
    /// each with why, and left as they were.
    pub failed: Vec<(Uuid, String)>,
    /// Connections still sealed by an older key this ring holds after the
    /// last pass (sealed again by an instance on the old key meanwhile).
    pub left_on_older_keys: u64,
    /// Revocations still owed now sealed by the current key.
    pub resealed_revocations: u64,
    /// Revocations still owed whose tokens did not open with the key they
    /// name, each with why, left as they were.
    pub failed_revocations: Vec<(Uuid, String)>,
    /// Revocations still owed sealed by an older key of this ring after
    /// the re-seal (an instance still on the old key owed one meanwhile).
    pub revocations_on_older_keys: u64,
}

impl Rekeyed {
    /// Whether every row an older key of this ring sealed is now sealed by
    /// the current one, so those keys may be retired.
    pub fn finished(&self) -> bool {
        self.failed.is_empty()
            && self.left_on_older_keys == 0
            && self.failed_revocations.is_empty()
            && self.revocations_on_older_keys == 0
    }
}

/// Re-seals every stored token sealed by another key of the ring than the
/// current one, so the old key can be retired. Each row is locked while it
/// changes; a row that cannot be re-sealed is reported and skipped, not a
/// reason to leave the rows after it on the old key. Rows sealed by keys
/// the ring lacks are left alone (`stale_keys` reports them).
pub async fn rekey_all(state: &ConnectionService) -> anyhow::Result<Rekeyed> {
    let current = state.keys.current_key_id().to_owned();
    let mut outcome = Rekeyed::default();
    let mut given_up: HashSet<Uuid> = HashSet::new();
    for _ in 0..PASSES {
        let pending = on_older_keys(state, &current, &given_up).await?;
        if pending.is_empty() {
            break;
        }
        for id in pending {
            match reseal_one(state, &current, id).await {
                Ok(true) => outcome.resealed += 1,
                Ok(false) => {}
                Err(Failure::Row(why)) => {
                    tracing::warn!(connection = %id, error = %why, "tokens rekey: connection not re-sealed");
                    given_up.insert(id);
                    outcome.failed.push((id, why));
                }
                Err(Failure::Database(e)) => return Err(e.into()),
            }
        }
    }
    outcome.left_on_older_keys = on_older_keys(state, &current, &given_up).await?.len() as u64;
    rekey_owed(state, &current, &mut outcome).await?;
    Ok(outcome)
}

/// Re-seals the revocations still owed that older keys of the ring
/// sealed, in [`PASSES`] as the connections are; the same binding (a
/// revocation's id is its connection's), so the same re-seal.
async fn rekey_owed(
    state: &ConnectionService,
    current: &str,
    outcome: &mut Rekeyed,
) -> anyhow::Result<()> {
    let mut given_up: HashSet<Uuid> = HashSet::new();
    let older = |rows: Vec<(Uuid, String)>, given_up: &HashSet<Uuid>| -> Vec<Uuid> {
        rows.into_iter()
            .filter(|(id, key_id)| state.keys.has_key(key_id) && !given_up.contains(id))
            .map(|(id, _)| id)
            .collect()
    };
    for _ in 0..PASSES {
        let rows = db::pending_revocations::ids_not_sealed_by(&state.db, current).await?;
        let pending = older(rows, &given_up);
        if pending.is_empty() {
            break;
        }
        for id in pending {
            match reseal_owed(state, current, id).await {
                Ok(true) => outcome.resealed_revocations += 1,
                Ok(false) => {}
                Err(Failure::Row(why)) => {
                    tracing::warn!(revocation = %id, error = %why, "tokens rekey: revocation still owed not re-sealed");
                    given_up.insert(id);
                    outcome.failed_revocations.push((id, why));
                }
                Err(Failure::Database(e)) => return Err(e.into()),
            }
        }
    }
    let rows = db::pending_revocations::ids_not_sealed_by(&state.db, current).await?;
    outcome.revocations_on_older_keys = older(rows, &given_up).len() as u64;
    Ok(())
}

/// Re-seals revocation `id` under its row lock; `false` when there was
/// nothing to do (settled meanwhile, already current, or sealed by a key
/// the ring lacks).
async fn reseal_owed(state: &ConnectionService, current: &str, id: Uuid) -> Result<bool, Failure> {
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    let Some(row) = db::pending_revocations::find_for_update(&mut *tx, id).await? else {
        return Ok(false);
    };
    let Some((access, refresh)) = resealed(state, current, &row)? else {
        return Ok(false);
    };
    db::pending_revocations::reseal(
        &mut *tx,
        id,
        &access.bytes,
        refresh.as_ref().map(|r| r.bytes.as_slice()),
        &access.key_id,
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// The row's tokens (access, refresh) sealed by the current key; `None`
/// when there is nothing to do: sealed by `current` already, or by a key
/// the ring lacks.
fn resealed(
    state: &ConnectionService,
    current: &str,
    row: &impl HoldsSealedTokens,
) -> Result<Option<(Sealed, Option<Sealed>)>, Failure> {
    let binding = row.binding();
    if binding.key_id == current || !state.keys.has_key(binding.key_id) {
        return Ok(None);
    }
    let ctx = |kind| context(binding.id, binding.user, binding.provider, kind);
    let again = |kind| {
        row.sealed(kind)
            .map(|bytes| reseal(state, binding.key_id, bytes, &ctx(kind)))
            .transpose()
    };
    let Some(access) = again(Kind::Access)? else {
        return Err(Failure::Row("the row holds no access token".into()));
    };
    Ok(Some((access, again(Kind::Refresh)?)))
}

/// `bytes`, sealed by `key_id` for `ctx`, sealed by the current key.
fn reseal(
    state: &ConnectionService,
    key_id: &str,
    bytes: &[u8],
    ctx: &[u8],
) -> Result<Sealed, Failure> {
    let sealed = Sealed {
        key_id: key_id.to_owned(),
        bytes: bytes.to_vec(),
    };
    state
        .keys
        .reseal(Purpose::Token, ctx, &sealed)
        .map_err(|e| Failure::Row(e.to_string()))
}

/// The connections sealed by a key of the ring other than `current`,
/// leaving out those already given up on.
async fn on_older_keys(
    state: &ConnectionService,
    current: &str,
    given_up: &HashSet<Uuid>,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let rows = db::connections::ids_not_sealed_by(&state.db, current).await?;
    Ok(rows
        .into_iter()
        .filter(|(id, key_id)| state.keys.has_key(key_id) && !given_up.contains(id))
        .map(|(id, _)| id)
        .collect())
}

enum Failure {
    /// This row's tokens would not re-seal: why, in words with no secret.
    Row(String),
    Database(sqlx::Error),
}

impl From<sqlx::Error> for Failure {
    fn from(e: sqlx::Error) -> Self {
        Failure::Database(e)
    }
}

/// Re-seals connection `id` under its refresh claim and row lock; `false`
/// when there was nothing to do (gone, already current, or sealed by a
/// key the ring lacks).
async fn reseal_one(state: &ConnectionService, current: &str, id: Uuid) -> Result<bool, Failure> {
    // Re-sealed under the refresh's claim: a refresh still writing what the
    // provider answered writes over the row only as it read it.
    let claim = match hold_refreshes(state, id).await? {
        Held::Claim(claim) => Some(claim),
        Held::Gone => return Ok(false),
        Held::Unclaimed => None,
    };
    let resealed = reseal_locked(state, current, id).await;
    if let Some(claim) = claim {
        claim.release().await;
    }
    resealed
}

/// [`reseal_one`] under the row lock.
async fn reseal_locked(
    state: &ConnectionService,
    current: &str,
    id: Uuid,
) -> Result<bool, Failure> {
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    let Some(row) = db::connections::find_for_update(&mut *tx, id).await? else {
        return Ok(false);
    };
    let Some((access, refresh)) = resealed(state, current, &row)? else {
        return Ok(false);
    };
    db::connections::reseal(
        &mut *tx,
        id,
        &access.bytes,
        refresh.as_ref().map(|r| r.bytes.as_slice()),
        &access.key_id,
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}
