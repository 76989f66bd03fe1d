//! `mcp-connect users`: who has connections, what is kept about one
//! person, and removing them (the work is `connect::users`; this is the
//! command line and what it prints).

use clap::Subcommand;
use mcp_connect::{
    config::Settings,
    connect::users,
    domain::{ProviderName, UserRef},
    state::AppState,
};

#[derive(Subcommand, Debug)]
pub enum UsersCommand {
    /// List the people with connections, by subject, a page at a time:
    /// subject, connections, their providers, when one was last used.
    /// Tab-separated, with a header line.
    List {
        /// Only people with a connection at this provider.
        #[arg(long, value_parser = provider_name)]
        provider: Option<ProviderName>,
        /// Their issuer [default: `auth.issuer`, as written].
        #[arg(long, value_parser = stored_issuer)]
        issuer: Option<String>,
        /// Start after this subject (the next page: the last one shown;
        /// default: from the first).
        #[arg(long)]
        after: Option<String>,
        /// People per page.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        limit: i64,
    },
    /// Print a person's connections (provider, account, status, when
    /// connected and last used, the clients allowed to use each), browser
    /// sign-ins and unused connect links. Never a token.
    Show(UserArgs),
    /// Remove a person: end their browser sign-ins, delete their connect
    /// links, and disconnect every connection as they would (revoked at
    /// the provider where it offers revocation, `connection.deleted` sent
    /// to the webhooks). Disable them at the identity provider first, or
    /// they can sign in and connect again. Audit rows about them stay until
    /// `audit.retention_days`. Without --yes, prints what would go. Exits
    /// 1, removing nothing, when nothing is kept about the person (a
    /// mistyped subject or issuer, or removed already).
    Remove {
        #[command(flatten)]
        who: UserArgs,
        /// Remove, rather than print what would be removed.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(clap::Args, Debug)]
pub struct UserArgs {
    /// The person's subject: the `sub` of their tokens (or the claim
    /// `auth.subject_claim` names), as audit rows and webhook events show it.
    subject: String,
    /// Their issuer, for people who signed in through an earlier
    /// `auth.issuer` [default: `auth.issuer`, as written].
    #[arg(long, value_parser = stored_issuer)]
    issuer: Option<String>,
}

/// `--issuer`, spelt as people are stored under it: without the `/` a
/// URL parser adds to a bare host.
fn stored_issuer(given: &str) -> Result<String, String> {
    let url = url::Url::parse(given).map_err(|e| format!("not a URL ({e})"))?;
    Ok(mcp_connect::auth::configured_issuer(&url))
}

/// `--provider`, checked as provider names are.
fn provider_name(given: &str) -> Result<ProviderName, String> {
    ProviderName::parse(given).map_err(|e| e.to_string())
}

/// The issuer asked for, else `auth.issuer` as written.
fn issuer_or_configured(settings: &Settings, given: Option<String>) -> String {
    given.unwrap_or_else(|| mcp_connect::auth::configured_issuer(&settings.auth.issuer))
}

/// Runs `users list`, `users show` or `users remove` on `state` (built
/// as for any maintenance command: migrated, nothing in the background).
pub async fn run(state: &AppState, command: UsersCommand) -> anyhow::Result<()> {
    let (who, remove) = match command {
        UsersCommand::List {
            provider,
            issuer,
            after,
            limit,
        } => {
            let issuer = issuer_or_configured(&state.settings, issuer);
            let from = after.as_deref().unwrap_or_default();
            let people =
                users::list(&state.connect, &issuer, provider.as_ref(), from, limit).await?;
            println!("subject\tconnections\tproviders\tlast used");
            for p in &people {
                let last_used = p
                    .last_used_at
                    .map(|at| at.format("%Y-%m-%d %H:%M UTC").to_string())
                    .unwrap_or_else(|| "never".to_owned());
                println!(
                    "{}\t{}\t{}\t{last_used}",
                    users::for_terminal(&p.subject),
                    p.connections,
                    p.providers.join(",")
                );
            }
            match people.last() {
                // Perhaps the last page exactly: the next one then is empty.
                Some(last) if people.len() as i64 == limit => {
                    eprintln!("{limit} shown; the next page: {}", next_page(&last.subject))
                }
                _ if after.is_some() => eprintln!("{} more; none after these", people.len()),
                _ => eprintln!("{} person(s) with connections at {issuer}", people.len()),
            }
            return Ok(());
        }
        UsersCommand::Show(who) => (who, None),
        UsersCommand::Remove { who, yes } => (who, Some(yes)),
    };
    let issuer = issuer_or_configured(&state.settings, who.issuer);
    let user = UserRef::new(&issuer, &who.subject);
    let record = users::record(&state.connect, user).await?;
    println!("{} at {issuer}", users::for_terminal(&who.subject));
    println!("{record}");
    if record.is_empty() {
        println!("nothing is kept about this person (are the subject and --issuer right?)");
    }
    match remove {
        None => return Ok(()),
        // A script must not read a mistyped subject or issuer as a person
        // removed (nor write an audit row about someone who never was).
        Some(_) if record.is_empty() => {
            anyhow::bail!("nothing was removed: no one is known by this subject at {issuer}")
        }
        // A script that left out --yes must not read this as done.
        Some(false) => anyhow::bail!("nothing was removed: add --yes to remove this person"),
        Some(true) => {}
    }
    let removed = users::remove(&state.connect, user).await?;
    tracing::info!(subject = %who.subject, connections = removed.connections, "user removed");
    println!(
        "removed: {} connection(s) ({} revoked at the provider), {} sign-in(s), {} connect link(s)",
        removed.connections, removed.revoked, removed.sessions, removed.tickets
    );
    if !removed.unconfigured.is_empty() {
        let names: Vec<&str> = removed.unconfigured.iter().map(|p| p.as_str()).collect();
        println!(
            "not revoked at {} yet: this configuration does not name {} (run `users` with the \
             service's own configuration); the connections are deleted here, and the service's \
             instances that name {} try their revocations for up to {} hours",
            names.join(", "),
            if names.len() == 1 { "it" } else { "them" },
            if names.len() == 1 { "it" } else { "them" },
            state.settings.revocation.retry_hours
        );
    }
    if removed.connections > 0 && state.settings.webhooks.endpoints.is_empty() {
        println!("no webhook endpoint is configured here: no connection.deleted event was queued");
    }
    if removed.retrying > 0 {
        println!(
            "{} connection(s) could not be revoked at their provider yet (it refused or could not \
             be reached; see the log): deleted here, their access may still be live there; the \
             service tries again for up to {} hours (`revocation_abandoned` in the audit log if it \
             gives up)",
            removed.retrying, state.settings.revocation.retry_hours
        );
    }
    if removed.shared > 0 {
        println!(
            "{} connection(s) were not revoked at their provider on purpose: another person here \
             connected the same account, and revoking would end their connection too",
            removed.shared
        );
    }
    if removed.not_revoked > 0 {
        println!(
            "{} connection(s) could not be revoked at their provider (their tokens do not open \
             with these keys; see the log): deleted here, their access may stay live there until \
             it expires or the person removes it",
            removed.not_revoked
        );
    }
    Ok(())
}

/// The `--after` that gives the page after `subject`, for a shell: single
/// quotes (a subject may start with `-`), or, for a subject with
/// characters a terminal would act on, their escapes and what to do.
fn next_page(subject: &str) -> String {
    if users::for_terminal(subject) == subject {
        format!("--after='{}'", subject.replace('\'', "'\\''"))
    } else {
        format!(
            "--after with the subject {} (written with these escapes; in bash, $'…')",
            users::for_terminal(subject)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_is_given_as_a_shell_reads_it() {
        assert_eq!(next_page("alice"), "--after='alice'");
        assert_eq!(next_page("-o'brien"), "--after='-o'\\''brien'");
        let escaped = next_page("a\u{1b}[2J");
        assert!(
            escaped.contains("\"a\\u{1b}[2J\"") && !escaped.contains('\u{1b}'),
            "{escaped}"
        );
    }

    #[test]
    fn flags_are_checked_before_anything_is_opened() {
        assert_eq!(
            stored_issuer("https://idp.example.com/").unwrap(),
            "https://idp.example.com"
        );
        assert!(
            stored_issuer("not a url")
                .unwrap_err()
                .contains("not a URL")
        );
        assert!(provider_name("Not A Name").is_err());
        assert_eq!(provider_name("github").unwrap().as_str(), "github");
    }
}
