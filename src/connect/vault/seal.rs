//! How a stored token is sealed: with the key ring (purpose `token`),
//! bound to the connection's id, user, provider and kind, so a sealed token
//! copied to another row never opens.

use secrecy::{ExposeSecret, SecretString};
use uuid::Uuid;

use crate::{
    connect::ConnectionService,
    crypto::{CryptoError, Purpose, Sealed},
    db::{
        connections::{ConnectionRow, SealedTokenRow},
        pending_revocations::PendingRevocation,
    },
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
    let mut id_text = Uuid::encode_buffer();
    let id = &*id.hyphenated().encode_lower(&mut id_text);
    let parts: [&str; 5] = [id, user.issuer(), user.subject(), provider, kind];
    let mut ctx = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for part in parts {
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

/// A row that holds tokens sealed for it: a connection, or a revocation
/// still owed (its tokens sealed as its connection's were, for the same
/// id, or for an id of its own).
pub(super) trait HoldsSealedTokens {
    /// What its tokens are bound to, and the key that sealed them.
    fn binding(&self) -> Binding<'_>;
    /// Its sealed token of `kind`; `None`: it has none.
    fn sealed(&self, kind: Kind) -> Option<&[u8]>;
}

/// The rows whose tokens sit in `access_token` and `refresh_token`, bound
/// to their `id`, `user()` and `provider`, sealed by `key_id`: each
/// table's row type, and a re-seal's page.
macro_rules! holds_sealed_tokens {
    ($($row:ty),+) => {$(
        impl HoldsSealedTokens for $row {
            fn binding(&self) -> Binding<'_> {
                Binding {
                    id: self.id,
                    user: self.user(),
                    provider: &self.provider,
                    key_id: &self.key_id,
                }
            }

            fn sealed(&self, kind: Kind) -> Option<&[u8]> {
                match kind {
                    Kind::Access => Some(&self.access_token),
                    Kind::Refresh => self.refresh_token.as_deref(),
                }
            }
        }
    )+};
}

holds_sealed_tokens!(ConnectionRow, SealedTokenRow, PendingRevocation);

/// Seals `secret`, a token of `kind` of connection (or owed revocation)
/// `id`, `user`'s at `provider`, with the ring's current key: bound as
/// [`open_bound`] opens it.
pub(super) fn seal_bound(
    state: &ConnectionService,
    (id, user, provider): (Uuid, UserRef<'_>, &ProviderName),
    kind: Kind,
    secret: &SecretString,
) -> Result<Sealed, CryptoError> {
    state.keys.seal(
        Purpose::Token,
        &context(id, user, provider, kind),
        secret.expose_secret().as_bytes(),
    )
}

/// Opens one of the row's sealed tokens; `None`: the row has no such token.
pub(super) fn open(
    state: &ConnectionService,
    row: &impl HoldsSealedTokens,
    kind: Kind,
) -> anyhow::Result<Option<SecretString>> {
    let Some(bytes) = row.sealed(kind) else {
        return Ok(None);
    };
    open_bound(state, &row.binding(), kind, bytes).map(Some)
}

/// Opens `bytes`, a token of `kind` sealed for `binding`.
pub(super) fn open_bound(
    state: &ConnectionService,
    binding: &Binding<'_>,
    kind: Kind,
    bytes: &[u8],
) -> anyhow::Result<SecretString> {
    let plain = state
        .keys
        .open_bytes(
            Purpose::Token,
            &context(binding.id, binding.user, binding.provider, kind),
            binding.key_id,
            bytes,
        )
        .map_err(|e| {
            anyhow::Error::new(e).context(format!(
                "stored token of connection {} does not open",
                binding.id
            ))
        })?;
    Ok(SecretString::from(String::from_utf8(plain)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens sealed by any earlier version must keep opening: the binding
    /// is part of the associated data, byte for byte.
    #[test]
    fn the_binding_is_written_as_it_always_was() {
        let id = Uuid::parse_str("0b9f3c1e-2a4d-4e8f-9c71-5d6e7f809a1b").unwrap();
        let provider = ProviderName::parse("github").unwrap();
        let user = UserRef::new("https://idp.example", "alice");
        let mut expected = Vec::new();
        for part in [
            "0b9f3c1e-2a4d-4e8f-9c71-5d6e7f809a1b",
            "https://idp.example",
            "alice",
            "github",
            "refresh",
        ] {
            expected.extend_from_slice(&(part.len() as u32).to_be_bytes());
            expected.extend_from_slice(part.as_bytes());
        }
        assert_eq!(context(id, user, &provider, Kind::Refresh), expected);
        assert!(context(id, user, &provider, Kind::Access).ends_with(b"\0\0\0\x06access"));
    }
}
