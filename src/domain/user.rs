//! [`UserRef`]: who a person is to this service — the identity provider
//! that vouches for them (`issuer`) and their identifier there (`subject`).
//! Connections, tickets, grants and sessions all belong to one.

/// A person, as the pair (issuer, subject), borrowed from whatever verified
/// it: the bearer token's principal, the browser session, or a stored row.
/// The two always travel together, so no function can receive them swapped
/// or from two different people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UserRef<'a> {
    issuer: &'a str,
    subject: &'a str,
}

impl<'a> UserRef<'a> {
    /// The person `subject` at `issuer`. Only for values that were verified
    /// (a token, a session) or stored from such a value (a row).
    pub fn new(issuer: &'a str, subject: &'a str) -> Self {
        Self { issuer, subject }
    }

    /// The identity provider's issuer identifier, as configured.
    pub fn issuer(&self) -> &'a str {
        self.issuer
    }

    /// The person's identifier at the issuer.
    pub fn subject(&self) -> &'a str {
        self.subject
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_person_only_when_both_parts_match() {
        let a = UserRef::new("https://idp", "u1");
        assert_eq!(a, UserRef::new("https://idp", "u1"));
        assert_ne!(a, UserRef::new("https://idp", "u2"));
        assert_ne!(a, UserRef::new("https://other", "u1"));
    }
}
