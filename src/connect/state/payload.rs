//! The sealed payload, as bytes: a fixed layout of raw digests and
//! numbers, so that sealing writes and opening reads it without JSON, hex
//! or escaping, and the state a client carries is half as long as it was
//! with the first format's JSON ([`super::json`]).
//!
//! ```text
//! 0x02                                  format
//! 6 × 16 bytes                          audience, issuer, subject, client id,
//!                                       method, target: SHA-256, first 128 bits
//! 32 bytes                              SHA-256 of the canonical arguments
//! i64, big-endian                       expiry, Unix seconds
//! u32, big-endian                       round
//! u8                                    flags: 1 = ticket, 2 = account
//! [16 bytes, u8 n, n bytes]             ticket id, ticket secret (if flag 1)
//! [16 bytes]                            account (if flag 2)
//! u8 n, n bytes                         provider name
//! u16 n (big-endian), n × 16 bytes      accounts offered, in order
//! ```
//!
//! Nothing may follow; anything that does not read exactly so is refused.

use uuid::Uuid;

use super::{Bound, Opened, RoundState, RoundTicket, StateError};
use crate::{connect::tickets::TicketSecret, domain::ProviderName};

/// The first byte of this layout. (The JSON format starts with `{`.)
pub const FORMAT: u8 = 2;

const TICKET: u8 = 1;
const ACCOUNT: u8 = 2;

/// The payload for `round`, bound to `bound`, expiring at `exp`.
pub fn write(bound: &Bound, exp: i64, round: &RoundState) -> Result<Vec<u8>, StateError> {
    let too_long = |what: &str| StateError::Seal(format!("{what} does not fit the state"));
    let mut out = Vec::with_capacity(200 + round.offered.len() * 16);
    out.push(FORMAT);
    for value in &bound.values {
        out.extend_from_slice(value);
    }
    out.extend_from_slice(&bound.arguments);
    out.extend_from_slice(&exp.to_be_bytes());
    out.extend_from_slice(&round.round.to_be_bytes());
    let flags = if round.ticket.is_some() { TICKET } else { 0 }
        | if round.account.is_some() { ACCOUNT } else { 0 };
    out.push(flags);
    if let Some(ticket) = &round.ticket {
        out.extend_from_slice(ticket.id.as_bytes());
        let secret = ticket.secret.expose().as_bytes();
        out.push(u8::try_from(secret.len()).map_err(|_| too_long("the ticket"))?);
        out.extend_from_slice(secret);
    }
    if let Some(account) = round.account {
        out.extend_from_slice(account.as_bytes());
    }
    let provider = round.provider.as_bytes();
    out.push(u8::try_from(provider.len()).map_err(|_| too_long("the provider"))?);
    out.extend_from_slice(provider);
    let offered = u16::try_from(round.offered.len()).map_err(|_| too_long("the account list"))?;
    out.extend_from_slice(&offered.to_be_bytes());
    for account in &round.offered {
        out.extend_from_slice(account.as_bytes());
    }
    Ok(out)
}

/// What [`write`] wrote, format byte included.
pub fn read(bytes: &[u8]) -> Result<Opened, StateError> {
    let mut r = Reader(bytes);
    if r.byte()? != FORMAT {
        return Err(StateError::Payload);
    }
    let mut values = [[0u8; 16]; 6];
    for value in &mut values {
        *value = r.array()?;
    }
    let arguments = r.array()?;
    let exp = i64::from_be_bytes(r.array()?);
    let round = u32::from_be_bytes(r.array()?);
    let flags = r.byte()?;
    if flags & !(TICKET | ACCOUNT) != 0 {
        return Err(StateError::Payload);
    }
    let ticket = if flags & TICKET != 0 {
        let id = r.uuid()?;
        let secret = r.text()?;
        Some(RoundTicket {
            id,
            secret: TicketSecret::parse(secret).ok_or(StateError::Payload)?,
        })
    } else {
        None
    };
    let account = if flags & ACCOUNT != 0 {
        Some(r.uuid()?)
    } else {
        None
    };
    let provider = ProviderName::parse(r.text()?).map_err(|_| StateError::Payload)?;
    let count = u16::from_be_bytes(r.array()?);
    let offered = (0..count).map(|_| r.uuid()).collect::<Result<_, _>>()?;
    if !r.0.is_empty() {
        return Err(StateError::Payload);
    }
    Ok(Opened {
        bound: Bound { values, arguments },
        exp,
        round: RoundState {
            ticket,
            provider,
            round,
            account,
            offered,
        },
    })
}

/// The bytes not yet read.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StateError> {
        if self.0.len() < n {
            return Err(StateError::Payload);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], StateError> {
        self.take(N)?.try_into().map_err(|_| StateError::Payload)
    }

    fn byte(&mut self) -> Result<u8, StateError> {
        Ok(self.array::<1>()?[0])
    }

    fn uuid(&mut self) -> Result<Uuid, StateError> {
        Ok(Uuid::from_bytes(self.array()?))
    }

    /// A length-prefixed string (at most 255 bytes).
    fn text(&mut self) -> Result<&'a str, StateError> {
        let len = usize::from(self.byte()?);
        std::str::from_utf8(self.take(len)?).map_err(|_| StateError::Payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound() -> Bound {
        let mut values = [[0u8; 16]; 6];
        for (i, v) in values.iter_mut().enumerate() {
            *v = [i as u8 + 1; 16];
        }
        Bound {
            values,
            arguments: [0xab; 32],
        }
    }

    fn full_round() -> RoundState {
        RoundState {
            ticket: Some(RoundTicket {
                id: Uuid::new_v4(),
                secret: TicketSecret::generate(),
            }),
            provider: ProviderName::parse("google-drive_2").unwrap(),
            round: u32::MAX,
            account: Some(Uuid::new_v4()),
            offered: vec![Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()],
        }
    }

    #[test]
    fn every_field_reads_back() {
        let bare = RoundState {
            ticket: None,
            provider: ProviderName::parse("x").unwrap(),
            round: 0,
            account: None,
            offered: Vec::new(),
        };
        for (round, exp) in [(full_round(), i64::MIN), (bare, 1_800_000_000)] {
            let bytes = write(&bound(), exp, &round).unwrap();
            let opened = read(&bytes).unwrap();
            assert_eq!(opened.bound, bound());
            assert_eq!(opened.exp, exp);
            assert_eq!(opened.round, round);
        }
    }

    #[test]
    fn a_payload_is_small() {
        // A first round's state: ticket, provider, nothing offered.
        let round = RoundState {
            account: None,
            offered: Vec::new(),
            ..full_round()
        };
        let bytes = write(&bound(), 0, &round).unwrap();
        assert_eq!(
            bytes.len(),
            1 + 96 + 32 + 8 + 4 + 1 + 16 + 1 + 43 + 1 + 14 + 2
        );
    }

    #[test]
    fn anything_but_the_exact_layout_is_refused() {
        let bytes = write(&bound(), 0, &full_round()).unwrap();
        // Every shorter prefix, and anything after the end.
        for len in 0..bytes.len() {
            assert_eq!(read(&bytes[..len]), Err(StateError::Payload), "{len} bytes");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(read(&longer), Err(StateError::Payload));
        // Another format, unknown flags, a ticket or provider that is not one.
        let flags_at = 1 + 96 + 32 + 8 + 4;
        let secret_at = flags_at + 1 + 16 + 1;
        let provider_at = secret_at + 43 + 16 + 1;
        let corrupt = |at: usize, byte: u8| {
            let mut b = bytes.clone();
            b[at] = byte;
            read(&b)
        };
        assert_eq!(corrupt(0, b'{'), Err(StateError::Payload));
        assert_eq!(corrupt(flags_at, 4 | TICKET), Err(StateError::Payload));
        assert_eq!(corrupt(secret_at, b'='), Err(StateError::Payload));
        assert_eq!(corrupt(provider_at, b'A'), Err(StateError::Payload));
        assert_eq!(corrupt(provider_at, 0xff), Err(StateError::Payload));
    }
}
