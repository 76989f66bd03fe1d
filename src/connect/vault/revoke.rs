//! Ending a deleted connection's grant at the provider, best effort: the
//! connection is gone whatever the provider answers.

use secrecy::{ExposeSecret, SecretString};

use super::seal::{Kind, open};
use crate::{
    connect::ConnectionService,
    db::connections::ConnectionRow,
    providers::{Provider, TokenHint},
};

/// Revokes the row's tokens the provider revokes; `true` when it accepted
/// every one. A refresh token it refused may still be live there, whatever
/// became of the access token (RFC 7009 §2.1: revoking an access token
/// only *may* end its refresh token), so one refusal is a failure.
pub(super) async fn upstream(state: &ConnectionService, row: &ConnectionRow, p: &Provider) -> bool {
    let provider = p.name();
    let (mut accepted, mut failed) = (0, 0);
    // Revoking the refresh token ends the whole grant at most providers;
    // the access token too, for those that keep them separate.
    for (kind, hint) in [
        (Kind::Refresh, TokenHint::RefreshToken),
        (Kind::Access, TokenHint::AccessToken),
    ] {
        if !p.revokes(hint) {
            continue;
        }
        let token = match open(state, row, kind) {
            Ok(Some(token)) => token,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(provider = %provider, error = %e, "stored token unreadable; the connection is deleted anyway");
                failed += 1;
                continue;
            }
        };
        let token = if hint == TokenHint::AccessToken {
            live_access_token(state, row, p, token).await
        } else {
            token
        };
        match p
            .revoke(&state.http, token.expose_secret(), hint, &row.params.0)
            .await
        {
            Ok(()) => accepted += 1,
            Err(e) => {
                failed += 1;
                tracing::warn!(provider = %provider, error = %e, "revocation failed; the connection is deleted anyway")
            }
        }
    }
    accepted > 0 && failed == 0
}

/// Where only the access token can end the grant (Dropbox revokes with it
/// as credential) and it has expired, a refresh buys one that works; the
/// stored one otherwise. The new token is used once and never stored.
async fn live_access_token(
    state: &ConnectionService,
    row: &ConnectionRow,
    p: &Provider,
    stored: SecretString,
) -> SecretString {
    let expired = row
        .access_token_expires_at
        .is_some_and(|at| at <= chrono::Utc::now());
    if !expired || p.revokes(TokenHint::RefreshToken) {
        return stored;
    }
    let Ok(Some(refresh)) = open(state, row, Kind::Refresh) else {
        return stored;
    };
    match p
        .refresh(&state.http, refresh.expose_secret(), &row.params.0)
        .await
    {
        Ok(tokens) => tokens.access_token,
        Err(e) => {
            tracing::warn!(provider = %p.name(), error = %e, "refresh before revocation failed");
            stored
        }
    }
}
