//! Ending a grant at the provider: a deleted connection's tokens, or
//! those a connect did not store, as a [`PendingRevocation`] holds them
//! (sealed as the connection sealed them). One attempt; what to do when
//! it fails is [`super::owed`]'s.

use secrecy::{ExposeSecret, SecretString};

use super::seal::{Kind, open, seal_bound};
use crate::{
    connect::ConnectionService,
    db::{self, pending_revocations::PendingRevocation},
    providers::{Provider, ProviderError, TokenHint, TokenSet},
};

/// An access token the provider does not revoke still ends the grant's
/// life there if it expires within this long.
const LAPSES_SOON: chrono::Duration = chrono::Duration::hours(1);

/// How long past its recorded expiry an access token is taken for dead
/// without asking the provider. The recorded expiry is already a little
/// late (counted from when the token's answer arrived, not from when the
/// provider issued it); this allows for a provider that honours a token
/// a moment longer.
const EXPIRED_FOR_GOOD: chrono::Duration = chrono::Duration::minutes(2);

/// What one attempt at a revocation came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Attempt {
    /// The grant has ended at the provider ([`grant_ended`]): revoked
    /// there (`already` is `None`), or, where only the access token
    /// revokes, nothing of it was left live to revoke, for the reason
    /// given, the access token having expired over [`EXPIRED_FOR_GOOD`]
    /// ago: `access_token_expired` (there is no refresh token),
    /// `refresh_token_dead` (the refresh token, which the provider's entry
    /// says it never rotates, is refused for good).
    Ended { already: Option<&'static str> },
    /// The provider refused or could not be reached: why, with no secret.
    /// Trying again may end it.
    Failed(String),
    /// Trying again cannot help, for the reason given: the tokens do not
    /// open with the key that sealed them (`does_not_open`: the bytes or
    /// the key's material are not what sealed them), or the refresh token
    /// that would buy a live access token is dead there
    /// (`refresh_token_dead`).
    Hopeless(&'static str),
}

/// Revokes the row's tokens the provider revokes.
pub(super) async fn upstream(
    state: &ConnectionService,
    row: &PendingRevocation,
    p: &Provider,
) -> Attempt {
    let provider = p.name();
    if !state.keys.has_key(&row.key_id) {
        return Attempt::Failed("sealed by a key not on this instance's ring".into());
    }
    let mut answers = Vec::with_capacity(2);
    let mut failures = Vec::new();
    let mut lapsed = None;
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
                tracing::warn!(provider = %provider, revocation = %row.id, error = %e, "a token owed a revocation does not open");
                return Attempt::Hopeless("does_not_open");
            }
        };
        let token = if hint == TokenHint::AccessToken {
            match live_access_token(state, row, p, token).await {
                Live::Token(token) => token,
                Live::RefreshFailed(e) => {
                    failures.push(format!("refresh before the access token's revocation: {e}"));
                    answers.push((hint, Answer::Failed));
                    continue;
                }
                Live::RefreshDoesNotOpen => return Attempt::Hopeless("does_not_open"),
                Live::RefreshTokenDead => return Attempt::Hopeless("refresh_token_dead"),
                Live::Lapsed(why) => {
                    lapsed = Some(why);
                    answers.push((hint, Answer::Lapsed));
                    continue;
                }
            }
        } else {
            token
        };
        let answer = match revoke_again_if_passing(state, row, p, &token, hint).await {
            Ok(()) => Answer::Accepted,
            Err(ProviderError::Rejected { error, .. }) if error == "unsupported_token_type" => {
                tracing::info!(provider = %provider, hint = hint.as_str(), "the provider does not revoke this kind of token");
                Answer::UnsupportedType
            }
            Err(e) => {
                tracing::warn!(provider = %provider, revocation = %row.id, error = %e, "revocation failed");
                failures.push(format!("{}: {e}", hint.as_str()));
                Answer::Failed
            }
        };
        answers.push((hint, answer));
    }
    let access_lapses_soon = row.access_token_expires_by(row.read_at + LAPSES_SOON);
    if grant_ended(&answers, access_lapses_soon) {
        Attempt::Ended { already: lapsed }
    } else if failures.is_empty() {
        Attempt::Failed("not every token of the grant was revoked".to_owned())
    } else {
        Attempt::Failed(failures.join("; "))
    }
}

/// How long after the first try a revocation the provider failed in
/// passing (a 5xx, a 429, a dropped connection) is tried again: the row
/// is already deleted, and a blip is not worth a retry minutes later. A
/// provider that answers slowly is not waited for again.
const RETRY_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The waits before the second and third tries.
const RETRY_WAITS: [std::time::Duration; 2] = [
    std::time::Duration::from_millis(500),
    std::time::Duration::from_millis(1500),
];

/// Revokes `token`, tried again (within [`RETRY_WITHIN`]) while the
/// provider's failure is a passing one.
async fn revoke_again_if_passing(
    state: &ConnectionService,
    row: &PendingRevocation,
    p: &Provider,
    token: &SecretString,
    hint: TokenHint,
) -> Result<(), ProviderError> {
    let started = std::time::Instant::now();
    let mut waits = RETRY_WAITS.iter();
    loop {
        let answered = p
            .revoke(&state.http, token.expose_secret(), hint, &row.params.0)
            .await;
        match (answered, waits.next()) {
            (Err(e), Some(&wait)) if e.is_passing() && started.elapsed() + wait < RETRY_WITHIN => {
                tracing::info!(provider = %p.name(), hint = hint.as_str(), error = %e, "revocation failed in passing; trying again");
                tokio::time::sleep(wait).await;
            }
            (answered, _) => return answered,
        }
    }
}

/// What the provider answered one token's revocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Accepted,
    /// RFC 7009 §2.2.1 `unsupported_token_type`: it revokes no token of
    /// this kind (some servers revoke refresh tokens only).
    UnsupportedType,
    /// Not sent: the token is dead already, and nothing can renew it
    /// ([`Live::Lapsed`]).
    Lapsed,
    Failed,
}

/// Whether the answers say the grant has ended at the provider: the
/// refresh token's revocation accepted, if one was sent, and the access
/// token's accepted (or the token found dead, with nothing to renew it)
/// — or refused as a kind it does not revoke, once the
/// refresh token's was accepted and the access token expires soon
/// (`access_lapses_soon`): a server that revokes no access token does
/// not end them with the refresh token either (RFC 7009 §2.1), so one
/// that lives on would be access left live. A refresh token it refused
/// may still be live, whatever became of the access token (revoking an
/// access token only *may* end its refresh token), so any other refusal
/// is a failure; so is nothing revoked at all.
fn grant_ended(answers: &[(TokenHint, Answer)], access_lapses_soon: bool) -> bool {
    let refresh_revoked = answers
        .iter()
        .any(|&(hint, answer)| hint == TokenHint::RefreshToken && answer == Answer::Accepted);
    let accepted = answers
        .iter()
        .any(|&(_, answer)| matches!(answer, Answer::Accepted | Answer::Lapsed));
    accepted
        && answers.iter().all(|&(hint, answer)| match answer {
            Answer::Accepted | Answer::Lapsed => true,
            Answer::UnsupportedType => {
                hint == TokenHint::AccessToken && refresh_revoked && access_lapses_soon
            }
            Answer::Failed => false,
        })
}

/// The access token to revoke with, from [`live_access_token`].
enum Live {
    Token(SecretString),
    /// The access token has expired, and refreshing it failed in a way
    /// that may pass: sending it would be answered as unknown there
    /// (Dropbox's 401, GitHub's 422 then "Check a token"'s 404), which
    /// reads as a token already ended while the refresh token may live
    /// on. The attempt fails, and is tried again.
    RefreshFailed(ProviderError),
    /// The refresh is refused for good (`invalid_grant`) at a provider
    /// that may rotate refresh tokens. Whether the grant has ended cannot
    /// be told from here: the person may have
    /// removed the access at the provider, or (a rotating refresh token)
    /// an earlier refresh's answer was lost and the token it became lives
    /// on unknown here. Given up at once, saying so, rather than sending
    /// the expired token (read as ended) or retrying a dead token.
    RefreshTokenDead,
    /// The refresh token does not open with the key that sealed it.
    RefreshDoesNotOpen,
    /// Nothing of the grant is left live to revoke, for the reason given
    /// (see [`Attempt::Ended`]): the access token expired more than
    /// [`EXPIRED_FOR_GOOD`] ago, and there is no refresh token or it is
    /// refused for good at a provider whose entry says it never rotates
    /// them, so no other token of the grant can have been issued
    /// unknown here. Sending the expired token would only be answered as
    /// expired (Dropbox's 401 `expired_access_token`), and retried for days.
    Lapsed(&'static str),
}

/// Where only the access token can end the grant (Dropbox revokes with
/// it as credential, GitHub deletes it) and it has expired, a refresh
/// buys one that works; the stored one otherwise. The new token is used
/// for this revocation only; where the refresh rotated the refresh token,
/// both new tokens are kept on the row first, sealed as its own were, so
/// that a revocation that fails now is tried again with tokens that still
/// refresh (the old refresh token is dead once used).
async fn live_access_token(
    state: &ConnectionService,
    row: &PendingRevocation,
    p: &Provider,
    stored: SecretString,
) -> Live {
    let expired = row.access_token_expires_by(row.read_at);
    if !expired || p.revokes(TokenHint::RefreshToken) {
        return Live::Token(stored);
    }
    let long_expired = row.access_token_expires_by(row.read_at - EXPIRED_FOR_GOOD);
    let refresh = match open(state, row, Kind::Refresh) {
        Ok(Some(refresh)) => refresh,
        // No refresh token: the expired token is all there is of the
        // grant, and once it is past any leeway, nothing is live.
        Ok(None) if long_expired => return Live::Lapsed("access_token_expired"),
        Ok(None) => return Live::Token(stored),
        Err(e) => {
            tracing::warn!(provider = %p.name(), revocation = %row.id, error = %e, "a refresh token owed a revocation does not open");
            return Live::RefreshDoesNotOpen;
        }
    };
    match p
        .refresh(&state.http, refresh.expose_secret(), &row.params.0)
        .await
    {
        Ok(tokens) => {
            if tokens.refresh_token.is_some() {
                keep_rotated(state, row, &tokens).await;
            }
            Live::Token(tokens.access_token)
        }
        // A refresh token that is never rotated and is refused for good:
        // no token of the grant can be live but the expired one (Dropbox:
        // the person removed the app, or its tokens were revoked).
        Err(ProviderError::InvalidGrant) if p.keeps_its_refresh_token() && long_expired => {
            tracing::info!(provider = %p.name(), revocation = %row.id, "refresh before revocation refused for good; the grant has ended already");
            Live::Lapsed("refresh_token_dead")
        }
        // Dead, but the access token may still be honoured a moment: it is
        // sent, and a failure is tried again once it cannot be.
        Err(ProviderError::InvalidGrant) if p.keeps_its_refresh_token() => Live::Token(stored),
        Err(ProviderError::InvalidGrant) => {
            tracing::warn!(provider = %p.name(), revocation = %row.id, "refresh before revocation refused for good (invalid_grant)");
            Live::RefreshTokenDead
        }
        Err(e) => {
            tracing::warn!(provider = %p.name(), revocation = %row.id, error = %e, "refresh before revocation failed; tried again later");
            Live::RefreshFailed(e)
        }
    }
}

/// Keeps the tokens a refresh answered on revocation `row`, sealed as its
/// own were (bound to its id, person, provider and kind), with the new
/// access token's expiry: a retry within its life revokes it without
/// refreshing again. Failing that, the revocation under way goes on with
/// them all the same.
async fn keep_rotated(state: &ConnectionService, row: &PendingRevocation, tokens: &TokenSet) {
    let bound = (row.id, row.user(), &row.provider);
    let seal = |secret: &SecretString, kind| seal_bound(state, bound, kind, secret);
    let sealed = seal(&tokens.access_token, Kind::Access).and_then(|access| {
        let refresh = tokens
            .refresh_token
            .as_ref()
            .map(|r| seal(r, Kind::Refresh))
            .transpose()?;
        Ok((access, refresh))
    });
    let kept = match sealed {
        Ok((access, refresh)) => {
            let write = db::pending_revocations::keep_refreshed(
                &state.db,
                row.id,
                db::pending_revocations::Refreshed {
                    access_token: &access.bytes,
                    refresh_token: refresh.as_ref().map(|r| r.bytes.as_slice()),
                    key_id: &access.key_id,
                    lifetime: super::store::lifetime(tokens),
                },
            );
            db::faults::deadline(state.settings.database.deadline(), write)
                .await
                .map_err(anyhow::Error::from)
        }
        Err(e) => Err(anyhow::Error::from(e)),
    };
    match kept {
        Ok(true) => {}
        // Settled meanwhile by another attempt: nothing left to keep them for.
        Ok(false) => {
            tracing::debug!(revocation = %row.id, "a revocation settled while its tokens were refreshed")
        }
        Err(e) => {
            tracing::warn!(provider = %row.provider, revocation = %row.id, error = %e, "cannot keep the tokens a refresh before revocation rotated; if this revocation fails, its retries may not refresh")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Answer::*, TokenHint::*, *};

    #[test]
    fn the_grant_ends_only_when_no_token_of_it_may_be_left_live() {
        let ended = |answers: &[(TokenHint, Answer)]| grant_ended(answers, false);
        assert!(ended(&[(RefreshToken, Accepted), (AccessToken, Accepted)]));
        assert!(ended(&[(AccessToken, Accepted)]), "no refresh token stored");
        assert!(ended(&[(AccessToken, Lapsed)]), "nothing left live to send");
        assert!(
            ended(&[(RefreshToken, Accepted)]),
            "the access token not revoked there"
        );
        // Refresh tokens only (RFC 7009 §2.2.1): the refresh token's
        // revocation ends the grant once the access token lapses soon…
        let refresh_only = [(RefreshToken, Accepted), (AccessToken, UnsupportedType)];
        assert!(grant_ended(&refresh_only, true));
        // …and not while it lives on.
        assert!(!ended(&refresh_only));
        // Not without it: the refresh token may still be live.
        assert!(!grant_ended(
            &[(RefreshToken, Failed), (AccessToken, Accepted)],
            true
        ));
        assert!(!grant_ended(
            &[(RefreshToken, UnsupportedType), (AccessToken, Accepted)],
            true
        ));
        assert!(!grant_ended(&[(AccessToken, UnsupportedType)], true));
        assert!(!grant_ended(
            &[(RefreshToken, Accepted), (AccessToken, Failed)],
            true
        ));
        assert!(!grant_ended(&[], true), "nothing revoked");
    }
}
