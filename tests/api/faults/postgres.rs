//! A Postgres of the test's own, to freeze (SIGSTOP), stop and restart
//! without disturbing the shared one: `initdb` and `pg_ctl` from the local
//! installation into a temporary directory, on a free port, run as the
//! `postgres` user when the tests run as root (Postgres refuses root).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

pub struct OwnPostgres {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
}

fn pg_bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("a local Postgres installation")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().expect("initdb")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `program` with `args`, as `postgres` when we are root.
fn run(program: &Path, args: &[&str]) -> std::process::Output {
    let output = if is_root() {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(program)
            .args(args)
            .output()
    } else {
        Command::new(program).args(args).output()
    }
    .expect("run a Postgres tool");
    assert!(
        output.status.success(),
        "{}: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl OwnPostgres {
    /// A fresh cluster, started; `settings` are extra `-c name=value`.
    pub fn start(settings: &[&str]) -> Self {
        Self::start_with(settings, None)
    }

    /// A fresh cluster whose superuser `postgres` has `password`, asked
    /// for (scram-sha-256) on every TCP connection, as a fresh Debian
    /// Postgres asks.
    pub fn start_with_password(password: &str) -> Self {
        Self::start_with(&[], Some(password))
    }

    fn start_with(settings: &[&str], password: Option<&str>) -> Self {
        let dir = std::env::temp_dir().join(format!("mcp-connect-pg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        if is_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres", &dir.display().to_string()])
                .status()
                .expect("chown");
            assert!(status.success());
        }
        let bin = pg_bin();
        let data = dir.join("data");
        let data_dir = data.display().to_string();
        let mut initdb = vec!["-D", &data_dir, "-U", "postgres", "--no-sync"];
        let password_file = dir.join("password").display().to_string();
        match password {
            Some(password) => {
                std::fs::write(&password_file, password).expect("password file");
                initdb.extend([
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    "--pwfile",
                    &password_file,
                ]);
            }
            None => initdb.push("--auth=trust"),
        }
        run(&bin.join("initdb"), &initdb);
        let mut conf = String::from("fsync = off\nlisten_addresses = '127.0.0.1'\n");
        for s in settings {
            conf.push_str(s);
            conf.push('\n');
        }
        let auto = data.join("postgresql.auto.conf");
        let mut existing = std::fs::read_to_string(&auto).unwrap_or_default();
        existing.push_str(&conf);
        std::fs::write(&auto, existing).expect("write settings");
        let pg = Self {
            dir,
            bin,
            port: provider_fakes::ports::unused_port(&[]),
        };
        pg.up();
        pg
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}", self.port)
    }

    /// Starts the stopped server and waits until it accepts connections.
    pub fn up(&self) {
        let data = self.dir.join("data").display().to_string();
        let options = format!("-p {} -k {}", self.port, self.dir.display());
        let log = self.dir.join("log").display().to_string();
        run(
            &self.bin.join("pg_ctl"),
            &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
        );
    }

    /// Stops the server at once (connections are cut).
    pub fn down(&self) {
        let data = self.dir.join("data").display().to_string();
        run(
            &self.bin.join("pg_ctl"),
            &["-D", &data, "-m", "immediate", "-w", "stop"],
        );
    }

    /// The postmaster and every backend it started.
    fn processes(&self) -> Vec<String> {
        let pid_file = self.dir.join("data").join("postmaster.pid");
        let Ok(text) = std::fs::read_to_string(pid_file) else {
            return Vec::new();
        };
        let Some(main) = text.lines().next().map(str::trim).map(str::to_owned) else {
            return Vec::new();
        };
        let children = Command::new("pgrep")
            .args(["-P", &main])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        std::iter::once(main)
            .chain(children.lines().map(str::to_owned))
            .collect()
    }

    fn signal(&self, signal: &str) {
        for pid in self.processes() {
            let _ = Command::new("kill").args([signal, &pid]).status();
        }
    }

    /// Freezes the whole server: sockets stay open, nothing answers.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    pub fn thaw(&self) {
        self.signal("-CONT");
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        self.thaw();
        let data = self.dir.join("data").display().to_string();
        let mut stop = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"));
            c
        } else {
            Command::new(self.bin.join("pg_ctl"))
        };
        let _ = stop
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
        std::thread::sleep(Duration::from_millis(50));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
