//! Before anything runs: where things are, building mcp-connect and
//! bench-bare with this harness's profile, and the benchmark's own database
//! (created by mcp-connect dev, dropped here at the end).

use std::path::Path;

use anyhow::{Context, anyhow, bail};

use crate::servers::Paths;

/// The benchmark's own database; dropped when this is.
pub struct Database {
    pub server: String,
    pub name: String,
    pub tls: bool,
}

impl Database {
    pub fn url(&self) -> String {
        let mode = if self.tls { "prefer" } else { "disable" };
        format!("{}/{}?sslmode={mode}", self.server, self.name)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let dropped = std::process::Command::new("psql")
            .arg(format!("{}/postgres", self.server))
            .args([
                "-qAtc",
                &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
            ])
            .stdout(std::process::Stdio::null())
            .status();
        if !dropped.is_ok_and(|s| s.success()) {
            eprintln!(
                "bench: could not drop database {}; drop it by hand",
                self.name
            );
        }
    }
}

pub fn paths() -> anyhow::Result<Paths> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or_else(|| anyhow!("no workspace root"))?
        .to_path_buf();
    let bin_dir = std::env::current_exe()?
        .parent()
        .ok_or_else(|| anyhow!("no directory for this executable"))?
        .to_path_buf();
    let logs = root.join("target/bench-logs");
    Ok(Paths {
        root,
        bin_dir,
        logs,
    })
}

/// Builds mcp-connect and bench-bare with this harness's profile. Two
/// separate builds: each package alone resolves the same features as its
/// own everyday build, so nothing is compiled twice.
pub fn build(paths: &Paths) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for (package, bin) in [("mcp-connect", "mcp-connect"), ("bench", "bench-bare")] {
        let mut command = std::process::Command::new(&cargo);
        command
            .current_dir(&paths.root)
            .args(["build", "-p", package, "--bin", bin]);
        if !cfg!(debug_assertions) {
            command.arg("--release");
        }
        let status = command
            .status()
            .with_context(|| format!("cannot run {cargo}"))?;
        if !status.success() {
            bail!("building {bin} failed");
        }
    }
    Ok(())
}
