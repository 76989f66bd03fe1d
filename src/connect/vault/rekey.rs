//! Re-sealing stored tokens with the current key: the second phase of a
//! key rotation.

use super::seal::{Kind, context};
use crate::{
    connect::ConnectionService,
    crypto::{Purpose, Sealed},
    db,
};

/// Re-seals every stored token not sealed by the current key (the second
/// phase of a key rotation, so the old key can be retired). Each row is
/// locked while it changes. Returns how many connections were re-sealed.
pub async fn rekey_all(state: &ConnectionService) -> anyhow::Result<u64> {
    let current = state.keys.current_key_id().to_owned();
    let ids = db::connections::ids_not_sealed_by(&state.db, &current).await?;
    let mut done = 0;
    for id in ids {
        let mut tx = crate::db::transaction::begin(&state.db).await?;
        let Some(row) = db::connections::find_for_update(&mut *tx, id).await? else {
            continue;
        };
        // Sealed by a key this ring lacks: left as it is, and reported.
        if row.key_id == current || !state.keys.has_key(&row.key_id) {
            continue;
        }
        let ctx = |kind| context(row.id, row.user(), &row.provider, kind);
        let reseal = |bytes: &Vec<u8>, kind| {
            let sealed = Sealed {
                key_id: row.key_id.clone(),
                bytes: bytes.clone(),
            };
            state.keys.reseal(Purpose::Token, &ctx(kind), &sealed)
        };
        let access = reseal(&row.access_token, Kind::Access)
            .map_err(|e| anyhow::anyhow!("connection {id}: {e}"))?;
        let refresh = match &row.refresh_token {
            Some(bytes) => Some(
                reseal(bytes, Kind::Refresh)
                    .map_err(|e| anyhow::anyhow!("connection {id}: {e}"))?,
            ),
            None => None,
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
        done += 1;
    }
    Ok(done)
}
