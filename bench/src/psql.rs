//! SQL from the harness goes through `psql`, as the rest of the harness's
//! database chores do: no driver of its own beside the service's, and the
//! seeding script stays a plain `.sql` file anyone can run by hand.

use std::{path::Path, process::Stdio};

use anyhow::{Context, bail};
use tokio::{io::AsyncWriteExt, process::Command};

/// What `psql` runs.
pub enum Script<'a> {
    /// One command line (`-c`): only the last statement's rows are printed.
    Command(&'a str),
    /// A script file (`-f`), with `\if` and `:variables`.
    File(&'a Path),
    /// A script on standard input (every statement's rows are printed).
    Stdin(&'a str),
}

/// Runs `script` on the database at `url` with psql variables `vars`; the
/// rows printed unaligned, one per line, fields separated by `|`. Fails
/// (with psql's message) at the first error.
pub async fn run(url: &str, vars: &[(&str, String)], script: Script<'_>) -> anyhow::Result<String> {
    let mut command = Command::new("psql");
    command.args(["-qAtX", "-v", "ON_ERROR_STOP=1"]);
    for (name, value) in vars {
        command.arg("-v").arg(format!("{name}={value}"));
    }
    match script {
        Script::Command(sql) => command.arg("-c").arg(sql),
        Script::File(path) => command.arg("-f").arg(path),
        Script::Stdin(_) => command.args(["-f", "-"]),
    };
    let mut child = command
        .arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot run psql")?;
    if let (Script::Stdin(text), Some(mut stdin)) = (&script, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).await?;
    }
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!("psql: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One value from a one-row, one-column query.
pub async fn value(url: &str, sql: &str) -> anyhow::Result<String> {
    Ok(run(url, &[], Script::Command(sql)).await?.trim().to_owned())
}
