//! How a stored token is sealed: with the key ring (purpose `token`),
//! bound to the connection's id, user, provider and kind, so a sealed token
//! copied to another row never opens.

use secrecy::SecretString;
use uuid::Uuid;

use crate::{
    connect::ConnectionService,
    crypto::{Purpose, Sealed},
    db::connections::ConnectionRow,
    domain::{ProviderName, UserRef},
};

#[derive(Clone, Copy)]
pub(super) enum Kind {
    Access,
    Refresh,
}

pub(super) fn context(id: Uuid, user: UserRef<'_>, provider: &ProviderName, kind: Kind) -> Vec<u8> {
    let kind = match kind {
        Kind::Access => "access",
        Kind::Refresh => "refresh",
    };
    let mut ctx = Vec::new();
    for part in [
        id.to_string().as_str(),
        user.issuer(),
        user.subject(),
        provider,
        kind,
    ] {
        ctx.extend_from_slice(&(part.len() as u32).to_be_bytes());
        ctx.extend_from_slice(part.as_bytes());
    }
    ctx
}

/// What a connection's sealed tokens are bound to, and the key that
/// sealed them.
pub(super) struct Binding<'a> {
    pub id: Uuid,
    pub user: UserRef<'a>,
    pub provider: &'a ProviderName,
    pub key_id: &'a str,
}

impl<'a> Binding<'a> {
    pub fn of(row: &'a ConnectionRow) -> Self {
        Self {
            id: row.id,
            user: row.user(),
            provider: &row.provider,
            key_id: &row.key_id,
        }
    }
}

/// Opens one of the row's sealed tokens; `None`: the row has no such token.
pub(super) fn open(
    state: &ConnectionService,
    row: &ConnectionRow,
    kind: Kind,
) -> anyhow::Result<Option<SecretString>> {
    let bytes = match kind {
        Kind::Access => Some(&row.access_token),
        Kind::Refresh => row.refresh_token.as_ref(),
    };
    let Some(bytes) = bytes else { return Ok(None) };
    open_bound(state, &Binding::of(row), kind, bytes).map(Some)
}

/// Opens `bytes`, a token of `kind` sealed for `binding`.
pub(super) fn open_bound(
    state: &ConnectionService,
    binding: &Binding<'_>,
    kind: Kind,
    bytes: &[u8],
) -> anyhow::Result<SecretString> {
    let sealed = Sealed {
        key_id: binding.key_id.to_owned(),
        bytes: bytes.to_vec(),
    };
    let plain = state
        .keys
        .open(
            Purpose::Token,
            &context(binding.id, binding.user, binding.provider, kind),
            &sealed,
        )
        .map_err(|e| {
            anyhow::Error::new(e).context(format!(
                "stored token of connection {} does not open",
                binding.id
            ))
        })?;
    Ok(SecretString::from(String::from_utf8(plain)?))
}
