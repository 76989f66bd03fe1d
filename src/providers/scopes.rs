//! Plain words for scopes, shown on the consent page so people know what
//! they grant. Only the common scopes of each preset; anything else is shown
//! as the raw scope by the caller.

use super::presets::PresetKind;

const GITHUB: &[(&str, &str)] = &[
    (
        "repo",
        "read and write all your repositories, including private ones",
    ),
    (
        "repo:status",
        "read and write commit statuses of your repositories",
    ),
    ("public_repo", "read and write your public repositories"),
    ("read:user", "read your profile"),
    ("user", "read and change your profile"),
    ("user:email", "read your email addresses"),
    ("user:follow", "follow and unfollow people"),
    ("gist", "create and change your gists"),
    ("notifications", "read your notifications"),
    ("read:org", "read your organisation and team memberships"),
    ("write:org", "change your organisation and team memberships"),
    ("workflow", "change GitHub Actions workflows"),
    ("read:packages", "download packages"),
    ("write:packages", "publish packages"),
    ("read:project", "read your projects"),
    ("project", "read and change your projects"),
    ("delete_repo", "delete repositories"),
];

/// Keyed by the short name; full `https://www.googleapis.com/auth/…` URLs
/// are looked up by their last part.
const GOOGLE: &[(&str, &str)] = &[
    ("openid", "confirm who you are"),
    ("email", "see your email address"),
    ("profile", "see your name and profile picture"),
    ("userinfo.email", "see your email address"),
    ("userinfo.profile", "see your name and profile picture"),
    ("calendar.readonly", "see your calendars and events"),
    ("calendar.events", "see and change your calendar events"),
    ("calendar", "see, change and delete your calendars"),
    (
        "drive.readonly",
        "see and download all your Google Drive files",
    ),
    (
        "drive.file",
        "see and change the Google Drive files you open with this app",
    ),
    (
        "drive",
        "see, change and delete all your Google Drive files",
    ),
    ("gmail.readonly", "read your email"),
    ("gmail.send", "send email as you"),
    ("contacts.readonly", "see your contacts"),
    ("documents.readonly", "see your Google Docs documents"),
    (
        "spreadsheets.readonly",
        "see your Google Sheets spreadsheets",
    ),
];

const SLACK: &[(&str, &str)] = &[
    ("users:read", "see people in your workspace"),
    (
        "users:read.email",
        "see the email addresses of people in your workspace",
    ),
    (
        "users.profile:read",
        "see profile details of people in your workspace",
    ),
    ("channels:read", "see the public channels in your workspace"),
    (
        "channels:history",
        "read messages in public channels you are in",
    ),
    ("groups:read", "see your private channels"),
    ("groups:history", "read messages in your private channels"),
    ("im:read", "see your direct messages"),
    ("im:history", "read your direct messages"),
    ("mpim:history", "read your group direct messages"),
    ("chat:write", "send messages as you"),
    ("search:read", "search your workspace's content"),
    (
        "files:read",
        "see files shared in your channels and conversations",
    ),
    ("reactions:read", "see emoji reactions"),
    ("reactions:write", "add and remove emoji reactions as you"),
    ("team:read", "see your workspace's name and domain"),
    ("identity.basic", "confirm who you are"),
    ("identity.email", "see your email address"),
];

const DEMO: &[(&str, &str)] = &[
    ("profile", "read your demo profile"),
    ("echo", "send messages to the demo echo service"),
];

/// The OpenID Connect scopes mean the same everywhere.
const OIDC: &[(&str, &str)] = &[
    ("openid", "confirm who you are"),
    ("email", "see your email address"),
    ("profile", "see your name and profile"),
    ("offline_access", "keep access while you are away"),
];

pub(super) fn describe(kind: PresetKind, scope: &str) -> Option<&'static str> {
    let table = match kind {
        PresetKind::Github => GITHUB,
        PresetKind::Google => GOOGLE,
        PresetKind::Slack => SLACK,
        PresetKind::Demo => DEMO,
        PresetKind::Generic => OIDC,
    };
    let key = match kind {
        PresetKind::Google => scope
            .strip_prefix("https://www.googleapis.com/auth/")
            .unwrap_or(scope),
        _ => scope,
    };
    lookup(table, key).or_else(|| lookup(OIDC, scope))
}

/// A scope as the provider means it: Google answers `email` as
/// `https://www.googleapis.com/auth/userinfo.email`.
fn canonical(kind: PresetKind, scope: &str) -> &str {
    match kind {
        PresetKind::Google => match scope
            .strip_prefix("https://www.googleapis.com/auth/")
            .unwrap_or(scope)
        {
            "userinfo.email" => "email",
            "userinfo.profile" => "profile",
            other => other,
        },
        _ => scope,
    }
}

/// GitHub's scopes nest: `repo` includes `public_repo`, `user` includes
/// `read:user`, and so on (its documentation, "Scopes for OAuth apps").
const GITHUB_PARENTS: &[(&str, &str)] = &[
    ("public_repo", "repo"),
    ("repo:status", "repo"),
    ("repo_deployment", "repo"),
    ("repo:invite", "repo"),
    ("security_events", "repo"),
    ("read:user", "user"),
    ("user:email", "user"),
    ("user:follow", "user"),
    ("read:org", "write:org"),
    ("write:org", "admin:org"),
    ("read:public_key", "write:public_key"),
    ("write:public_key", "admin:public_key"),
    ("read:repo_hook", "write:repo_hook"),
    ("write:repo_hook", "admin:repo_hook"),
    ("read:packages", "write:packages"),
];

/// Whether a grant of `granted` includes `wanted`.
pub(super) fn granted(kind: PresetKind, granted: &[String], wanted: &str) -> bool {
    let wanted = canonical(kind, wanted);
    let has = |s: &str| granted.iter().any(|g| canonical(kind, g) == s);
    if has(wanted) {
        return true;
    }
    if matches!(kind, PresetKind::Github) {
        let mut current = wanted;
        while let Some((_, parent)) = GITHUB_PARENTS.iter().find(|(child, _)| *child == current) {
            if has(parent) {
                return true;
            }
            current = parent;
        }
    }
    false
}

fn lookup(table: &[(&str, &'static str)], scope: &str) -> Option<&'static str> {
    table.iter().find(|(s, _)| *s == scope).map(|(_, d)| *d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_compared_as_the_provider_means_them() {
        let google = vec![
            "openid".to_owned(),
            "https://www.googleapis.com/auth/userinfo.email".to_owned(),
        ];
        assert!(granted(PresetKind::Google, &google, "email"));
        assert!(!granted(PresetKind::Google, &google, "profile"));
        let github = vec!["repo".to_owned(), "admin:org".to_owned()];
        assert!(granted(PresetKind::Github, &github, "public_repo"));
        assert!(granted(PresetKind::Github, &github, "read:org"));
        assert!(!granted(PresetKind::Github, &github, "read:user"));
        assert!(!granted(PresetKind::Demo, &["profile".to_owned()], "echo"));
    }

    #[test]
    fn tables_answer_per_preset() {
        assert_eq!(
            describe(PresetKind::Slack, "chat:write"),
            Some("send messages as you")
        );
        assert_eq!(describe(PresetKind::Github, "chat:write"), None);
        assert_eq!(
            describe(PresetKind::Demo, "echo"),
            Some("send messages to the demo echo service")
        );
        assert_eq!(
            describe(PresetKind::Generic, "openid"),
            Some("confirm who you are")
        );
        assert_eq!(
            describe(
                PresetKind::Google,
                "https://www.googleapis.com/auth/gmail.send"
            ),
            Some("send email as you")
        );
    }
}
