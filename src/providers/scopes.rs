//! How an entry spells, nests and describes its scopes, all from its data:
//! a prefix to strip (Google's `https://www.googleapis.com/auth/`), aliases
//! (Google answers `email` as `userinfo.email`), the broader scope that
//! includes another (GitHub's `repo` includes `public_repo`), and plain
//! words for the consent page.

use std::collections::BTreeMap;

/// The scope rules of one provider.
#[derive(Debug, Clone, Default)]
pub(super) struct ScopeRules {
    pub prefix: Option<String>,
    pub aliases: BTreeMap<String, String>,
    pub implied_by: BTreeMap<String, String>,
    pub descriptions: BTreeMap<String, String>,
    /// Granted without being named in a grant (`offline_access` at Entra).
    pub unlisted: Vec<String>,
}

/// The OpenID Connect scopes mean the same everywhere.
const OIDC: &[(&str, &str)] = &[
    ("openid", "confirm who you are"),
    ("email", "see your email address"),
    ("profile", "see your name and profile"),
    ("offline_access", "keep access while you are away"),
];

impl ScopeRules {
    /// A scope as the provider means it.
    fn canonical<'a>(&'a self, scope: &'a str) -> &'a str {
        let short = self
            .prefix
            .as_deref()
            .and_then(|p| scope.strip_prefix(p))
            .unwrap_or(scope);
        self.aliases.get(short).map_or(short, String::as_str)
    }

    pub(super) fn describe(&self, scope: &str) -> Option<&str> {
        let short = self
            .prefix
            .as_deref()
            .and_then(|p| scope.strip_prefix(p))
            .unwrap_or(scope);
        self.descriptions
            .get(short)
            .or_else(|| self.descriptions.get(self.canonical(scope)))
            .map(String::as_str)
            .or_else(|| OIDC.iter().find(|(s, _)| *s == scope).map(|(_, d)| *d))
    }

    /// Whether a grant of `granted` includes `wanted`.
    pub(super) fn granted(&self, granted: &[String], wanted: &str) -> bool {
        let has = |s: &str| granted.iter().any(|g| self.canonical(g) == s);
        let mut current = self.canonical(wanted);
        if self.unlisted.iter().any(|u| u == current) {
            return true;
        }
        // Bounded: a cycle in operator data must not hang a request.
        for _ in 0..=self.implied_by.len() {
            if has(current) {
                return true;
            }
            match self.implied_by.get(current) {
                Some(parent) => current = parent,
                None => return false,
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use crate::providers::test_catalog::catalog_for;

    #[test]
    fn grants_are_compared_as_the_provider_means_them() {
        let catalog = catalog_for("http://127.0.0.1:9");
        let google = catalog.get("google").unwrap();
        let grant = vec![
            "openid".to_owned(),
            "https://www.googleapis.com/auth/userinfo.email".to_owned(),
        ];
        assert!(google.scope_granted(&grant, "email"));
        assert!(!google.scope_granted(&grant, "profile"));
        let github = catalog.get("github").unwrap();
        let grant = vec!["repo".to_owned(), "admin:org".to_owned()];
        assert!(github.scope_granted(&grant, "public_repo"));
        assert!(github.scope_granted(&grant, "read:org"));
        assert!(!github.scope_granted(&grant, "read:user"));
        let demo = catalog.get("demo").unwrap();
        assert!(!demo.scope_granted(&["profile".to_owned()], "echo"));
    }

    #[test]
    fn descriptions_come_from_each_entry() {
        let catalog = catalog_for("http://127.0.0.1:9");
        let slack = catalog.get("slack").unwrap();
        assert_eq!(slack.describe_scope("chat:write"), "send messages as you");
        let github = catalog.get("github").unwrap();
        assert_eq!(github.describe_scope("chat:write"), "chat:write");
        let demo = catalog.get("demo").unwrap();
        assert_eq!(
            demo.describe_scope("echo"),
            "send messages to the demo echo service"
        );
        let rfc = catalog.get("rfc").unwrap();
        assert_eq!(rfc.describe_scope("openid"), "confirm who you are");
        let google = catalog.get("google").unwrap();
        assert_eq!(
            google.describe_scope("https://www.googleapis.com/auth/gmail.send"),
            "send email as you"
        );
    }
}
