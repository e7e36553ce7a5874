//! A private `sshd` for the ssh tests: a throw-away host key and user key, listening where a
//! test asks, and the `tarantella` jobs that reach it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// Where the OpenSSH server is expected.
pub const SSHD: &str = "/usr/sbin/sshd";

/// An sshd (run with -D, so it is our child) with a throw-away host key and user key.
pub struct Sshd {
    child: Child,
    /// `TARANTELLA_SSH` value that reaches it.
    pub ssh: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn keygen(path: &Path) -> Result<(), String> {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("ssh-keygen: {e}"))?;
    st.success()
        .then_some(())
        .ok_or_else(|| format!("ssh-keygen failed: {st}"))
}

pub fn start_sshd(dir: &Path, addr: &str, port: u16, netns: Option<&str>) -> Result<Sshd, String> {
    if !Path::new(SSHD).exists() {
        return Err(format!(
            "{SSHD} is not installed (apt-get install openssh-server)"
        ));
    }
    let (host, user) = (dir.join("hostkey"), dir.join("userkey"));
    if !host.exists() {
        keygen(&host)?;
    }
    if !user.exists() {
        keygen(&user)?;
        std::fs::copy(dir.join("userkey.pub"), dir.join("authorized_keys"))
            .map_err(|e| e.to_string())?;
    }
    if nix::unistd::geteuid().is_root() {
        let _ = std::fs::create_dir_all("/run/sshd");
    }
    let tag = format!("{addr}-{port}");
    let cfg = dir.join(format!("sshd_config-{tag}"));
    let log = dir.join(format!("sshd-{tag}.log"));
    std::fs::write(
        &cfg,
        format!(
            "Port {port}\nListenAddress {addr}\nHostKey {}\nPidFile none\nAuthorizedKeysFile {}\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\n",
            host.display(),
            dir.join("authorized_keys").display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, SSHD]);
            c
        }
        None => Command::new(SSHD),
    };
    cmd.arg("-D")
        .arg("-f")
        .arg(&cfg)
        .arg("-E")
        .arg(&log)
        .stdin(Stdio::null());
    let mut child = cmd.spawn().map_err(|e| format!("cannot start sshd: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("Server listening on") {
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("sshd exited ({st}): {text}"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("sshd did not start listening: {text}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ssh = format!(
        "ssh -F /dev/null -p {port} -i {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        user.display()
    );
    Ok(Sshd { child, ssh })
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn loopback_sshd(dir: &TempDir) -> Option<Sshd> {
    match start_sshd(dir.path(), "127.0.0.1", free_port(), None) {
        Ok(s) => Some(s),
        Err(why) => {
            println!("SKIPPED: {why}");
            None
        }
    }
}

/// Starts `tarantella --hostfile HOSTFILE ARGS` with `sshd` as its ssh command.
pub fn ssh_job(sshd: &Sshd, hostfile: &Path, args: &[&str]) -> Job {
    let run = TempDir::new("sshrun");
    let mut cmd = tarantella(run.path());
    cmd.env(tnt_env::SSH, &sshd.ssh)
        .arg("--hostfile")
        .arg(hostfile)
        .args(args);
    Job::spawn(cmd, run)
}

/// Writes `text` as the hostfile `hosts` in `dir`.
pub fn hostfile(dir: &TempDir, text: &str) -> PathBuf {
    let p = dir.path().join("hosts");
    std::fs::write(&p, text).unwrap();
    p
}
