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
        #[arg(long)]
        provider: Option<String>,
        /// Their issuer [default: `auth.issuer`, as written].
        #[arg(long)]
        issuer: Option<String>,
        /// Start after this subject (the next page: the last one shown).
        #[arg(long, default_value = "")]
        after: String,
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
    /// `audit.retention_days`. Without --yes, prints what would go.
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
    #[arg(long)]
    issuer: Option<String>,
}

/// The issuer people are stored under: `given` spelt as stored (without
/// the `/` a URL parser adds to a bare host), else `auth.issuer`.
fn stored_issuer(settings: &Settings, given: Option<String>) -> anyhow::Result<String> {
    Ok(match given {
        Some(issuer) => {
            let url = url::Url::parse(&issuer)
                .map_err(|e| anyhow::anyhow!("--issuer is not a URL ({e}): {issuer}"))?;
            mcp_connect::auth::configured_issuer(&url)
        }
        None => mcp_connect::auth::configured_issuer(&settings.auth.issuer),
    })
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
            let provider = provider
                .map(ProviderName::parse)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--provider: {e}"))?;
            let issuer = stored_issuer(&state.settings, issuer)?;
            let people =
                users::list(&state.connect, &issuer, provider.as_ref(), &after, limit).await?;
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
                Some(last) if people.len() as i64 == limit => eprintln!(
                    "{limit} shown; the next page: --after '{}'",
                    last.subject.replace('\'', "'\\''")
                ),
                _ => eprintln!("{} person(s) with connections at {issuer}", people.len()),
            }
            return Ok(());
        }
        UsersCommand::Show(who) => (who, None),
        UsersCommand::Remove { who, yes } => (who, Some(yes)),
    };
    let issuer = stored_issuer(&state.settings, who.issuer)?;
    let user = UserRef::new(&issuer, &who.subject);
    let record = users::record(&state.connect, user).await?;
    println!("{} at {issuer}", who.subject);
    println!("{record}");
    if record.is_empty() {
        println!("nothing is kept about this person (are the subject and --issuer right?)");
    }
    match remove {
        None => return Ok(()),
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
            "not revoked at {}: this configuration does not name {} (run `users` with the \
             service's own configuration); the connections are deleted here, their access may \
             stay live there until it expires or the person removes it",
            names.join(", "),
            if names.len() == 1 { "it" } else { "them" }
        );
    }
    if removed.connections > 0 && state.settings.webhooks.endpoints.is_empty() {
        println!("no webhook endpoint is configured here: no connection.deleted event was queued");
    }
    if removed.not_revoked > 0 {
        println!(
            "{} connection(s) could not be revoked at their provider (it refused or could not be \
             reached; see the log): deleted here, their access may stay live there until it \
             expires or the person removes it",
            removed.not_revoked
        );
    }
    Ok(())
}
