//! The `mcp-connect dev` command line: its arguments, and `dev token`, which
//! mints a token from the stored dev keys without a running server.

use std::{io::Write, time::Duration};

use anyhow::{anyhow, bail};
use secrecy::SecretString;

use super::{DevError, DevServices, UserName, database};
use crate::db;

pub const DEFAULT_DATABASE_URL: &str = "postgres://localhost/mcp_connect_dev";
/// The client id of tokens minted on the command line.
pub const CLI_CLIENT_ID: &str = "mcp-connect-dev-cli";
/// The OAuth client the web pages sign people in with.
pub const WEB_CLIENT_ID: &str = "mcp-connect-web";
pub(super) const CLI_TOKEN_TTL_SECS: u64 = 12 * 3600;

/// Run mcp-connect for development: on 127.0.0.1 only, with a built-in
/// identity provider (any user name, no password) at /dev/idp.
#[derive(clap::Args, Debug)]
pub struct DevArgs {
    /// The port to listen on, on 127.0.0.1; 0 picks a free one (the
    /// output names it). For `dev token`: the port the dev server listens
    /// on (not 0), which names the token's issuer and audience.
    #[arg(long, global = true, default_value_t = 8080)]
    pub port: u16,
    /// The Postgres database: `dev` creates it if missing and migrates it;
    /// `dev token` reads the keys `dev` stored there.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true,
          default_value = DEFAULT_DATABASE_URL, value_parser = secret)]
    pub database_url: SecretString,
    /// Print exactly one JSON line {"mcp_url", "web_url", "token"} on stdout
    /// once the server is ready, and nothing else (logs go to stderr).
    #[arg(long)]
    pub json: bool,
    /// `--config`, which dev refuses (it reads environment variables only):
    /// taken here so that `dev --help` does not offer it as the other
    /// commands' help does.
    #[arg(long, value_name = "FILE", hide = true)]
    pub config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Option<DevCommand>,
}

#[derive(clap::Subcommand, Debug)]
pub enum DevCommand {
    /// Print a bearer token for a user, signed with the dev keys stored in the
    /// database (no server needed). The issuer and audience name
    /// http://127.0.0.1:<--port>, so the token works with a dev server
    /// started with the same --port.
    Token(TokenArgs),
}

#[derive(clap::Args, Debug)]
pub struct TokenArgs {
    /// The user (the token's `sub`): 1 to 64 letters, digits, '.', '_' or '-'.
    #[arg(long)]
    pub sub: String,
    /// The OAuth client the token is issued to.
    #[arg(long, default_value = CLI_CLIENT_ID)]
    pub client_id: String,
    /// Space-separated scopes to put in the token.
    #[arg(long, default_value = "")]
    pub scope: String,
    /// Lifetime in seconds (at most 30 days).
    #[arg(long, default_value_t = CLI_TOKEN_TTL_SECS,
          value_parser = clap::value_parser!(u64).range(1..=30 * 24 * 3600))]
    pub ttl_secs: u64,
}

fn secret(s: &str) -> Result<SecretString, std::convert::Infallible> {
    Ok(SecretString::from(s))
}

/// `mcp-connect dev token`: prints one token on stdout and nothing else.
pub(super) async fn print_token(args: &DevArgs, token_args: &TokenArgs) -> anyhow::Result<()> {
    let user =
        UserName::parse(&token_args.sub).map_err(|e| anyhow!("--sub {:?}: {e}", token_args.sub))?;
    if args.port == 0 {
        bail!("--port 0 names no server: give the port `mcp-connect dev` reported");
    }
    let (options, place) = database::options(&args.database_url)?;
    let not_set_up = || {
        anyhow!(
            "the database {place} has no dev keys yet: run `mcp-connect dev` with the same \
             --database-url or DATABASE_URL first"
        )
    };
    match db::check_reachable(&options, db::ANSWER_WITHIN).await {
        Ok(()) => {}
        Err(db::DbSetupError::Missing { .. }) => return Err(not_set_up()),
        Err(e) => {
            let files = database::PasswordFiles::check(&args.database_url);
            return Err(database::explained(e, &place, &files));
        }
    }
    let pool = db::pool(options, 1);
    let public_url = format!("http://127.0.0.1:{}", args.port);
    let loaded = DevServices::load(&pool, &public_url).await;
    pool.close().await;
    let dev = match loaded {
        Ok(dev) => dev,
        Err(DevError::NotInitialised) => return Err(not_set_up()),
        Err(e) => return Err(anyhow::Error::new(e).context("cannot read the dev keys")),
    };
    let scopes: Vec<&str> = token_args.scope.split_whitespace().collect();
    let ttl = Duration::from_secs(token_args.ttl_secs);
    let token = dev.mint_access_token(user.as_str(), &token_args.client_id, &scopes, ttl)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{token}")?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        dev: DevArgs,
    }

    #[test]
    fn token_subcommand_takes_port_before_or_after() {
        let cli = Cli::try_parse_from(["dev", "token", "--sub", "bob", "--port", "9000"]).unwrap();
        assert_eq!(cli.dev.port, 9000);
        let Some(DevCommand::Token(t)) = cli.dev.command else {
            panic!("no token command")
        };
        assert_eq!(
            (t.sub.as_str(), t.client_id.as_str(), t.ttl_secs),
            ("bob", CLI_CLIENT_ID, CLI_TOKEN_TTL_SECS)
        );
        let cli = Cli::try_parse_from(["dev", "--port", "0", "--json"]).unwrap();
        assert!(cli.dev.json && cli.dev.port == 0 && cli.dev.command.is_none());
        assert!(Cli::try_parse_from(["dev", "token", "--sub", "bob", "--ttl-secs", "0"]).is_err());
    }

    #[test]
    fn database_url_is_not_shown_in_debug() {
        let cli =
            Cli::try_parse_from(["dev", "--database-url", "postgres://u:hunter2@db/x"]).unwrap();
        assert!(!format!("{cli:?}").contains("hunter2"));
    }
}
