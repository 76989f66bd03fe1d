//! What each preset knows about its provider: endpoints, client
//! authentication, default scopes, where the account identity is, and the
//! quirks that make it differ from plain RFC 6749. Settings override any of
//! the values here field by field (see `catalog`).

/// A preset name from settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PresetKind {
    Github,
    Google,
    Slack,
    Demo,
    Generic,
}

impl PresetKind {
    pub(super) const NAMES: &'static str = "github, google, slack, demo, generic";

    pub(super) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "github" => Self::Github,
            "google" => Self::Google,
            "slack" => Self::Slack,
            "demo" => Self::Demo,
            "generic" => Self::Generic,
            _ => return None,
        })
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Github => "github",
            Self::Google => "google",
            Self::Slack => "slack",
            Self::Demo => "demo",
            Self::Generic => "generic",
        }
    }
}

/// How the client authenticates at the token and revocation endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenAuthMethod {
    ClientSecretPost,
    ClientSecretBasic,
    /// A public client: `client_id` in the body, no secret.
    None,
}

impl TokenAuthMethod {
    pub(super) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "client_secret_post" => Self::ClientSecretPost,
            "client_secret_basic" => Self::ClientSecretBasic,
            "none" => Self::None,
            _ => return None,
        })
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::ClientSecretPost => "client_secret_post",
            Self::ClientSecretBasic => "client_secret_basic",
            Self::None => "none",
        }
    }
}

/// Where a provider departs from RFC 6749 or needs extra headers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Quirks {
    /// The authorize parameter carrying scopes (`user_scope` for Slack user
    /// tokens: `scope` there asks for bot scopes).
    pub scope_param: &'static str,
    pub scope_separator: &'static str,
    /// Extra authorize parameters (Google issues a refresh token only with
    /// `access_type=offline`, and again only with `prompt=consent`).
    pub authorize_extras: &'static [(&'static str, &'static str)],
    /// Authorize parameters that make the provider show its account chooser
    /// (to connect another account); they replace extras of the same name.
    pub account_chooser: &'static [(&'static str, &'static str)],
    /// Slack: errors are HTTP 200 with `{"ok": false, "error": …}`, and the
    /// user token is nested under `authed_user`.
    pub slack_envelope: bool,
    /// Headers on userinfo and API calls (GitHub wants a versioned media
    /// type and refuses requests without a User-Agent).
    pub api_headers: &'static [(&'static str, &'static str)],
}

const PLAIN: Quirks = Quirks {
    scope_param: "scope",
    scope_separator: " ",
    authorize_extras: &[],
    account_chooser: &[],
    slack_envelope: false,
    api_headers: &[("accept", "application/json")],
};

/// A preset's defaults. URLs are strings because the demo provider's live
/// under this server's own base URL.
#[derive(Debug, Clone)]
pub(super) struct Defaults {
    pub display_name: Option<&'static str>,
    pub authorize_url: Option<String>,
    pub token_url: Option<String>,
    pub revocation_url: Option<String>,
    pub userinfo_url: Option<String>,
    pub api_base_url: Option<String>,
    pub issuer: Option<String>,
    /// The provider always sends `iss` on its callbacks (RFC 9207).
    pub require_iss: bool,
    pub auth_method: TokenAuthMethod,
    pub scopes: &'static [&'static str],
    /// Dotted path into the userinfo JSON.
    pub account_id_field: &'static str,
    /// Tried in order; the id is the last resort.
    pub account_label_fields: &'static [&'static str],
    pub allowed_methods: &'static [&'static str],
    pub quirks: Quirks,
}

const READ_ONLY: &[&str] = &["GET", "HEAD"];

pub(super) fn defaults(kind: PresetKind, base_url: &str) -> Defaults {
    let s = |v: &str| Some(v.to_owned());
    match kind {
        PresetKind::Github => Defaults {
            display_name: Some("GitHub"),
            authorize_url: s("https://github.com/login/oauth/authorize"),
            token_url: s("https://github.com/login/oauth/access_token"),
            // GitHub's token revocation is its own REST API, not RFC 7009.
            revocation_url: None,
            userinfo_url: s("https://api.github.com/user"),
            api_base_url: s("https://api.github.com/"),
            issuer: None,
            require_iss: false,
            auth_method: TokenAuthMethod::ClientSecretPost,
            scopes: &["read:user"],
            account_id_field: "id",
            account_label_fields: &["login"],
            allowed_methods: READ_ONLY,
            quirks: Quirks {
                account_chooser: &[("prompt", "select_account")],
                api_headers: &[
                    ("accept", "application/vnd.github+json"),
                    ("x-github-api-version", "2022-11-28"),
                ],
                ..PLAIN
            },
        },
        PresetKind::Google => Defaults {
            display_name: Some("Google"),
            authorize_url: s("https://accounts.google.com/o/oauth2/v2/auth"),
            token_url: s("https://oauth2.googleapis.com/token"),
            revocation_url: s("https://oauth2.googleapis.com/revoke"),
            userinfo_url: s("https://openidconnect.googleapis.com/v1/userinfo"),
            api_base_url: s("https://www.googleapis.com/"),
            issuer: s("https://accounts.google.com"),
            require_iss: false,
            auth_method: TokenAuthMethod::ClientSecretPost,
            scopes: &["openid", "email", "profile"],
            account_id_field: "sub",
            account_label_fields: &["email", "name"],
            allowed_methods: READ_ONLY,
            quirks: Quirks {
                authorize_extras: &[("access_type", "offline"), ("prompt", "consent")],
                account_chooser: &[("prompt", "select_account consent")],
                ..PLAIN
            },
        },
        // The account comes from `auth.test`: it works with any user token,
        // whereas `users.identity` needs `identity.*` scopes, which Slack
        // refuses to grant together with any other scope. Id = `user_id`
        // (Slack user ids are unique across workspaces), label = `user`.
        PresetKind::Slack => Defaults {
            display_name: Some("Slack"),
            authorize_url: s("https://slack.com/oauth/v2/authorize"),
            token_url: s("https://slack.com/api/oauth.v2.access"),
            revocation_url: None,
            userinfo_url: s("https://slack.com/api/auth.test"),
            api_base_url: s("https://slack.com/api/"),
            issuer: None,
            require_iss: false,
            auth_method: TokenAuthMethod::ClientSecretPost,
            scopes: &["users:read"],
            account_id_field: "user_id",
            account_label_fields: &["user"],
            allowed_methods: READ_ONLY,
            quirks: Quirks {
                scope_param: "user_scope",
                scope_separator: ",",
                slack_envelope: true,
                ..PLAIN
            },
        },
        PresetKind::Demo => Defaults {
            display_name: Some("Demo"),
            authorize_url: Some(format!("{base_url}/dev/demo/authorize")),
            token_url: Some(format!("{base_url}/dev/demo/token")),
            revocation_url: Some(format!("{base_url}/dev/demo/revoke")),
            userinfo_url: Some(format!("{base_url}/dev/demo/api/me")),
            api_base_url: Some(format!("{base_url}/dev/demo/api/")),
            issuer: Some(format!("{base_url}/dev/demo")),
            require_iss: true,
            auth_method: TokenAuthMethod::ClientSecretBasic,
            scopes: &["profile"],
            account_id_field: "id",
            account_label_fields: &["login"],
            // POST so that `api_request` can reach the demo's /echo.
            allowed_methods: &["GET", "HEAD", "POST"],
            quirks: Quirks {
                account_chooser: &[("prompt", "select_account")],
                ..PLAIN
            },
        },
        PresetKind::Generic => Defaults {
            display_name: None,
            authorize_url: None,
            token_url: None,
            revocation_url: None,
            userinfo_url: None,
            api_base_url: None,
            issuer: None,
            require_iss: false,
            auth_method: TokenAuthMethod::ClientSecretBasic,
            scopes: &[],
            account_id_field: "sub",
            account_label_fields: &["preferred_username", "email", "name"],
            allowed_methods: READ_ONLY,
            quirks: PLAIN,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_preset_parses_back() {
        for name in PresetKind::NAMES.split(", ") {
            let kind = PresetKind::parse(name).unwrap();
            assert_eq!(kind.as_str(), name);
        }
        assert_eq!(PresetKind::parse("GitHub"), None);
    }

    #[test]
    fn demo_lives_under_the_base_url() {
        let d = defaults(PresetKind::Demo, "http://127.0.0.1:8080");
        assert_eq!(
            d.token_url.as_deref(),
            Some("http://127.0.0.1:8080/dev/demo/token")
        );
        assert_eq!(d.issuer.as_deref(), Some("http://127.0.0.1:8080/dev/demo"));
    }
}
