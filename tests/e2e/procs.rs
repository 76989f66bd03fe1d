//! Child processes of the suite: each with its stdout and stderr in a log
//! file of its own, killed when its handle is dropped (and the Node peers
//! also exit by themselves when our end of their stdin closes, should this
//! process die without unwinding).

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Child,
    /// Held open: closing it tells a Node peer to exit.
    _stdin: Option<ChildStdin>,
}

impl Proc {
    /// Starts `command` with its output going to `<logs>/<name>.log`.
    pub fn spawn(name: &str, logs: &Path, mut command: Command) -> anyhow::Result<Proc> {
        let log = logs.join(format!("{name}.log"));
        let out = File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let err = out.try_clone()?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .with_context(|| format!("start {name} ({:?})", command.get_program()))?;
        let stdin = child.stdin.take();
        Ok(Proc {
            name: name.to_owned(),
            log,
            child,
            _stdin: stdin,
        })
    }

    /// Waits until `ready` says yes, failing early if the process exits.
    pub fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        mut ready: impl FnMut(&str) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if ready(&log) {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited ({status}) before {what}; its log:\n{}",
                    self.name,
                    tail(&log, 40)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "{} not {what} after {timeout:?}; its log:\n{}",
                    self.name,
                    tail(&log, 40)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
