//! Re-sealing stored tokens with the current key: the second phase of a
//! key rotation. Connections' tokens, and those of the revocations still
//! owed (`pending_revocations`), which need their key as long as they are
//! retried.

use std::collections::HashSet;

use uuid::Uuid;

use super::{
    claim::{Held, claim_hold, hold_refreshes},
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
/// changes (a page of connections at a time, in one transaction); a row
/// that cannot be re-sealed is reported and skipped, not a reason to leave
/// the rows after it on the old key. Rows sealed by keys
/// the ring lacks are left alone (`stale_keys` reports them).
pub async fn rekey_all(state: &ConnectionService) -> anyhow::Result<Rekeyed> {
    let current = state.keys.current_key_id().to_owned();
    let connections = rekey_table(state, &current, Table::Connections).await?;
    // The same binding (a revocation's id is its connection's), so the
    // same re-seal.
    let owed = rekey_table(state, &current, Table::Owed).await?;
    Ok(Rekeyed {
        resealed: connections.resealed,
        failed: connections.failed,
        left_on_older_keys: connections.left,
        resealed_revocations: owed.resealed,
        failed_revocations: owed.failed,
        revocations_on_older_keys: owed.left,
    })
}

/// The tables whose rows hold sealed tokens.
#[derive(Clone, Copy)]
enum Table {
    Connections,
    /// `pending_revocations`.
    Owed,
}

/// What a re-seal did to one table.
#[derive(Default)]
struct TableRekeyed {
    resealed: u64,
    failed: Vec<(Uuid, String)>,
    /// Rows still on an older key of the ring after the last pass.
    left: u64,
}

/// How many rows a re-seal reads at once: the ids it holds are a page's,
/// however many rows the table holds (plus those it gave up on, which it
/// reports), and each statement reads a page, however few of its rows
/// are on an older key.
const PAGE: i64 = 1000;

/// Re-seals `table`'s rows sealed by older keys of the ring, page by page,
/// in up to [`PASSES`]; then counts those left.
async fn rekey_table(
    state: &ConnectionService,
    current: &str,
    table: Table,
) -> anyhow::Result<TableRekeyed> {
    let mut done = TableRekeyed::default();
    let mut given_up: HashSet<Uuid> = HashSet::new();
    for _ in 0..PASSES {
        let mut pages = OlderPages::new(table, current);
        let mut found = false;
        while let Some(page) = pages.next(state, &given_up).await? {
            if page.is_empty() {
                continue;
            }
            found = true;
            let outcome = match table {
                Table::Connections => reseal_connections(state, current, &page).await?,
                Table::Owed => reseal_owed_rows(state, current, &page).await?,
            };
            done.resealed += outcome.resealed;
            for (id, why) in outcome.failed {
                tracing::warn!(table = table.name(), row = %id, error = %why, "tokens rekey: tokens not re-sealed");
                given_up.insert(id);
                done.failed.push((id, why));
            }
        }
        if !found {
            break;
        }
    }
    let mut pages = OlderPages::new(table, current);
    while let Some(page) = pages.next(state, &given_up).await? {
        done.left += page.len() as u64;
    }
    Ok(done)
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Connections => "connections",
            Table::Owed => "pending_revocations",
        }
    }
}

/// The rows of a table sealed by a key of the ring other than the current
/// one, page by page in id order, leaving out those given up on (and
/// those a key the ring lacks sealed: nothing here can open them).
struct OlderPages<'a> {
    table: Table,
    current: &'a str,
    walk: db::page::Walk,
}

impl<'a> OlderPages<'a> {
    fn new(table: Table, current: &'a str) -> Self {
        Self {
            table,
            current,
            walk: db::page::Walk::new(PAGE),
        }
    }

    /// The next page's ids (it may be empty where a whole page was left
    /// out); `None` at the end.
    async fn next(
        &mut self,
        state: &ConnectionService,
        given_up: &HashSet<Uuid>,
    ) -> Result<Option<Vec<Uuid>>, sqlx::Error> {
        let Some(after) = self.walk.next_after() else {
            return Ok(None);
        };
        let (db, current) = (&state.db, self.current);
        let page = match self.table {
            Table::Connections => {
                db::connections::ids_not_sealed_by(db, current, after, PAGE).await?
            }
            Table::Owed => {
                db::pending_revocations::ids_not_sealed_by(db, current, after, PAGE).await?
            }
        };
        Ok(Some(
            self.walk
                .past(page)
                .into_iter()
                .filter(|(id, key_id)| state.keys.has_key(key_id) && !given_up.contains(id))
                .map(|(id, _)| id)
                .collect(),
        ))
    }
}

/// What re-sealing a page did.
#[derive(Default)]
struct PageOutcome {
    resealed: u64,
    /// Rows whose tokens would not re-seal, with why.
    failed: Vec<(Uuid, String)>,
}

impl PageOutcome {
    /// Counts what re-sealing row `id` alone did.
    fn add(&mut self, id: Uuid, resealed: Result<bool, Failure>) -> Result<(), sqlx::Error> {
        match resealed {
            Ok(true) => self.resealed += 1,
            Ok(false) => {}
            Err(Failure::Row(why)) => self.failed.push((id, why)),
            Err(Failure::Database(e)) => return Err(e),
        }
        Ok(())
    }
}

/// Re-seals the revocations owed of `ids` one at a time ([`reseal_owed`]):
/// they are few, and each is retried alone.
async fn reseal_owed_rows(
    state: &ConnectionService,
    current: &str,
    ids: &[Uuid],
) -> Result<PageOutcome, sqlx::Error> {
    let mut outcome = PageOutcome::default();
    for &id in ids {
        outcome.add(id, reseal_owed(state, current, id).await)?;
    }
    Ok(outcome)
}

/// Re-seals the connections of `ids` (a page): in one transaction, those
/// it can lock and claim at once ([`reseal_free`]); then each of the
/// others alone ([`reseal_one`]), waiting for the refresh or the write
/// that holds it. A page per transaction, not a row: three commits and
/// half a dozen round trips a row made a million rows take hours.
async fn reseal_connections(
    state: &ConnectionService,
    current: &str,
    ids: &[Uuid],
) -> Result<PageOutcome, sqlx::Error> {
    let (mut outcome, done) = reseal_free(state, current, ids).await?;
    // Held by a refresh (its claim, or its row lock) or another write,
    // or deleted meanwhile.
    for &id in ids.iter().filter(|id| !done.contains(id)) {
        outcome.add(id, reseal_one(state, current, id).await)?;
    }
    Ok(outcome)
}

/// Re-seals, in one transaction, the connections of `ids` that nothing
/// holds: their rows locked without waiting for any (one another
/// transaction holds is left to [`reseal_one`]: a page waiting for a row
/// would hold the rest of its rows, and two writers taking rows in
/// different orders could wait for each other), and their refreshes
/// claimed inside the transaction, so that a claim never outlives it (a
/// run cut short leaves none behind) while a refresh that would begin
/// meanwhile waits for the commit. A connection whose refresh another
/// claim holds is left too: that refresh may still write over the row as
/// it read it. What it did, and the connections it dealt with.
async fn reseal_free(
    state: &ConnectionService,
    current: &str,
    ids: &[Uuid],
) -> Result<(PageOutcome, HashSet<Uuid>), sqlx::Error> {
    let mut outcome = PageOutcome::default();
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    let rows = db::connections::lock_sealed_tokens(&mut *tx, ids).await?;
    let locked: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let claim_id = Uuid::new_v4();
    let claimed =
        db::refresh_claims::claim_many(&mut *tx, &locked, claim_id, claim_hold(state)).await?;
    let done: HashSet<Uuid> = claimed.iter().copied().collect();
    let mut writes = Vec::with_capacity(rows.len());
    for row in rows.iter().filter(|r| done.contains(&r.id)) {
        match resealed(state, current, row) {
            Ok(Some((access, refresh))) => writes.push(db::connections::Resealed {
                id: row.id,
                access_token: access.bytes,
                refresh_token: refresh.map(|r| r.bytes),
                key_id: access.key_id,
            }),
            Ok(None) => {}
            Err(Failure::Row(why)) => outcome.failed.push((row.id, why)),
            Err(Failure::Database(e)) => return Err(e),
        }
    }
    if !writes.is_empty() {
        outcome.resealed = db::connections::reseal_many(&mut *tx, &writes).await?;
    }
    db::refresh_claims::release_many(&mut *tx, &claimed, claim_id).await?;
    tx.commit().await?;
    Ok((outcome, done))
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
