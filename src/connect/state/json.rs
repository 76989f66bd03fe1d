//! The first payload format: JSON, the bound values' digests in hex. No
//! longer written; still opened, so that a state sealed by an instance of
//! the previous version (during a rolling deploy, within a state's ten
//! minutes) opens on this one. It can go once no running instance writes it.

use serde::Deserialize;
use uuid::Uuid;

use super::{Bound, Opened, RoundState, RoundTicket, StateError};
use crate::{connect::tickets::TicketSecret, domain::ProviderName};

/// A JSON payload starts with this byte; [`super::payload`]'s never does.
pub const FIRST_BYTE: u8 = b'{';

#[derive(Deserialize)]
struct Payload<'a> {
    aud: &'a str,
    iss: &'a str,
    sub: &'a str,
    cid: &'a str,
    method: &'a str,
    target: &'a str,
    /// SHA-256 of the canonical arguments, hex.
    args: &'a str,
    #[serde(default)]
    ticket: Option<Uuid>,
    #[serde(default)]
    secret: Option<&'a str>,
    provider: ProviderName,
    round: u32,
    #[serde(default)]
    account: Option<Uuid>,
    #[serde(default)]
    offered: Vec<Uuid>,
    /// Expiry, Unix seconds.
    exp: i64,
}

/// A payload of the first format.
pub fn read(bytes: &[u8]) -> Result<Opened, StateError> {
    // Every string it wrote is hex, a uuid or a ticket secret: nothing
    // escaped, so each borrows from the bytes.
    let p: Payload = serde_json::from_slice(bytes).map_err(|_| StateError::Payload)?;
    let mut values = [[0u8; 16]; 6];
    for (value, hex) in values
        .iter_mut()
        .zip([p.aud, p.iss, p.sub, p.cid, p.method, p.target])
    {
        *value = unhex(hex)?;
    }
    let ticket = match (p.ticket, p.secret) {
        (Some(id), Some(secret)) => Some(RoundTicket {
            id,
            secret: TicketSecret::parse(secret).ok_or(StateError::Payload)?,
        }),
        (None, None) => None,
        _ => return Err(StateError::Payload),
    };
    Ok(Opened {
        bound: Bound {
            values,
            arguments: unhex(p.args)?,
        },
        exp: p.exp,
        round: RoundState {
            ticket,
            provider: p.provider,
            round: p.round,
            account: p.account,
            offered: p.offered,
        },
    })
}

/// Lower-case hex of exactly `N` bytes, as the first format wrote it.
fn unhex<const N: usize>(hex: &str) -> Result<[u8; N], StateError> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(StateError::Payload),
    };
    let hex = hex.as_bytes();
    if hex.len() != 2 * N {
        return Err(StateError::Payload);
    }
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_reads_back_and_nothing_else_does() {
        assert_eq!(unhex::<2>("00ff"), Ok([0x00, 0xff]));
        assert_eq!(unhex::<2>("a0f1"), Ok([0xa0, 0xf1]));
        for bad in ["00f", "00fff", "00FF", "0g00", "+1ff", ""] {
            assert_eq!(unhex::<2>(bad), Err(StateError::Payload), "{bad:?}");
        }
    }
}
