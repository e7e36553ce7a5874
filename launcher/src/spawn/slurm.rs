//! Inside a Slurm allocation: one `srun` starts every rank; a small wrapper maps
//! `SLURM_PROCID`/`SLURM_NTASKS`/`SLURM_LOCALID` onto the gaspi variables.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::LazyLock;

use gaspi::env::{self as genv, torchrun};

use super::{Kind, OpenStreams, Proc, Tails};
use crate::cli::MapBy;
use crate::error::{Error, Result};
use crate::plan::{env, Plan, RankPlan, TORCHRUN_VARIABLES};
use crate::{rundir, shell};

/// Arguments: run directory, `1` when every rank's output is shown, `1` when srun deals the
/// ranks round-robin over the nodes (`--distribution=cyclic`), then the command.
/// Ranks other than 0 write to `rank-K.log` unless shown; a failing rank leaves
/// `status-K` (`<status> <host>`) so tarantella can name it.
///
/// The ranks per node come from `SLURM_STEP_TASKS_PER_NODE` (`2(x3),1`: 2, 2, 2 and 1), the
/// local count being this node's entry (`SLURM_NODEID`; the first entry should that be
/// out of range). Rank 0's host (the rendezvous and
/// `MASTER_ADDR`) is the first of the step's nodes. The ports are drawn from the job and
/// step ids, so that every rank computes the same ones: the rendezvous from 20000 on, and
/// `MASTER_PORT` half the range (20000) further, clear of the rendezvous ports of this step
/// and of the job's other steps.
///
/// For programs linked against GPI-2, each rank writes the step's machine file
/// (`GASPI_MFILE`: rank r's node on line r, following the distribution) to a private
/// temporary file on its node, removed when the rank ends; `GASPI_SOCKET` is its local rank
/// and `GASPI_MASTER` rank 0's node.
///
/// A `format!` string, so that the variables' names are the constants the runtime reads
/// them by: `{g_...}` stand for gaspi's names, `{t_...}` for torchrun's, `{{` and `}}` are
/// the script's own braces.
static WRAPPER: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "d=$1; a=$2; y=$3; shift 3; ",
            "export {g_rank}=\"$SLURM_PROCID\" {g_nranks}=\"$SLURM_NTASKS\" {g_local_rank}=\"${{SLURM_LOCALID:-0}}\"; ",
            "c=$(printf '%s\\n' \"${{SLURM_STEP_TASKS_PER_NODE:-${{SLURM_TASKS_PER_NODE:-1}}}}\" | tr ',' '\\n' ",
            "| sed 's/^\\([0-9]*\\)(x\\([0-9]*\\))$/\\1 \\2/' | awk '{{ for (i = 0; i < ($2 == \"\" ? 1 : $2); i++) print $1 }}'); ",
            "t=$(printf '%s\\n' \"$c\" | sed -n \"$((${{SLURM_NODEID:-0}} + 1))p\"); [ -n \"$t\" ] || t=$(printf '%s\\n' \"$c\" | head -n 1); ",
            "export {g_local_nranks}=\"$t\"; ",
            "nl=\"${{SLURM_STEP_NODELIST:-$SLURM_JOB_NODELIST}}\"; hs=$(scontrol show hostnames \"$nl\" 2>/dev/null); ",
            "case \"$nl\" in *'['*) ;; *) [ -n \"$hs\" ] || hs=$(printf '%s\\n' \"$nl\" | tr ',' '\\n');; esac; ",
            "h=$(printf '%s\\n' \"$hs\" | head -n 1); [ -n \"$h\" ] || h=\"${{nl%%[,[]*}}\"; ",
            "s=$(((SLURM_JOB_ID * 16 + ${{SLURM_STEP_ID:-0}}) % 40000)); ",
            "[ -n \"${g_rendezvous}\" ] || export {g_rendezvous}=\"$h:$((20000 + s))\"; ",
            "export {t_rank}=\"${g_rank}\" {t_world_size}=\"${g_nranks}\" {t_local_rank}=\"${g_local_rank}\" ",
            "{t_local_world_size}=\"${g_local_nranks}\" {node_rank}=\"${{SLURM_NODEID:-0}}\" ",
            "{t_master_addr}=\"$h\" {t_master_port}=\"$((20000 + (s + 20000) % 40000))\" {g_master}=\"$h\"; ",
            "[ \"${g_local_rank}\" -gt 255 ] || export {g_socket}=\"${g_local_rank}\"; ",
            "m=; if [ -n \"$hs\" ] && [ \"$(printf '%s\\n' \"$hs\" | grep -c .)\" = \"$(printf '%s\\n' \"$c\" | grep -c .)\" ] ",
            "&& m=$(mktemp \"${{TMPDIR:-/tmp}}/tnt-${g_job_id}-machines.XXXXXX\"); then ",
            "printf '%s\\n' \"$c\" | awk -v cyclic=\"$y\" -v hosts=\"$(printf '%s ' $hs)\" '",
            "BEGIN {{ nh = split(hosts, h, \" \") }} {{ k[NR] = $1 }} ",
            "END {{ if (cyclic == 1) {{ left = 1; while (left) {{ left = 0; for (i = 1; i <= nh; i++) if (k[i] > 0) {{ print h[i]; k[i]--; left = 1 }} }} }} ",
            "else for (i = 1; i <= nh; i++) for (j = 0; j < k[i]; j++) print h[i] }}' >\"$m\"; export {g_mfile}=\"$m\"; ",
            "else echo \"tarantella: rank $SLURM_PROCID gets no {g_mfile}: the step's nodes could not be listed (scontrol)\" >&2; fi; ",
            "if [ \"$a\" != 1 ] && [ \"$SLURM_PROCID\" != 0 ]; then mkdir -p \"$d\"; exec >\"$d/rank-$SLURM_PROCID.log\" 2>&1; fi; ",
            "\"$@\"; r=$?; [ -z \"$m\" ] || rm -f \"$m\"; [ \"$r\" = 0 ] || echo \"$r $(hostname)\" >\"$d/status-$SLURM_PROCID\"; exit \"$r\""
        ),
        g_rank = genv::RANK,
        g_nranks = genv::NRANKS,
        g_local_rank = genv::LOCAL_RANK,
        g_local_nranks = genv::LOCAL_NRANKS,
        g_rendezvous = genv::RENDEZVOUS,
        g_job_id = genv::JOB_ID,
        g_master = genv::MASTER,
        g_socket = genv::SOCKET,
        g_mfile = genv::MFILE,
        t_rank = torchrun::RANK,
        t_world_size = torchrun::WORLD_SIZE,
        t_local_rank = torchrun::LOCAL_RANK,
        t_local_world_size = torchrun::LOCAL_WORLD_SIZE,
        t_master_addr = torchrun::MASTER_ADDR,
        t_master_port = torchrun::MASTER_PORT,
        node_rank = env::NODE_RANK,
    )
});

/// The srun command line.
pub fn command_line(plan: &Plan) -> Vec<String> {
    let mut v = vec!["srun".to_string()];
    if plan.nranks > 0 {
        v.push(format!("--ntasks={}", plan.nranks));
    }
    if let Some(k) = plan.slurm_per_node {
        v.push(format!("--ntasks-per-node={k}"));
    }
    // Said even for srun's default (block), since the ranks' machine file follows it.
    v.push(match plan.map_by {
        MapBy::Slot => "--distribution=block".to_string(),
        MapBy::Node => "--distribution=cyclic".to_string(),
    });
    v.extend(["--kill-on-bad-exit=1", "--export=ALL"].map(String::from));
    if plan.show_all_output {
        v.push("--label".into());
    }
    v.extend(["sh", "-c", &WRAPPER, "tarantella-rank"].map(String::from));
    v.push(plan.run_dir.to_string_lossy().into_owned());
    v.push(if plan.show_all_output { "1" } else { "0" }.into());
    v.push(if plan.map_by == MapBy::Node { "1" } else { "0" }.into());
    let rank0 = RankPlan {
        rank: 0,
        host: None,
        local_rank: 0,
        local_nranks: 1,
        node_rank: 0,
    };
    v.extend(plan.rank_argv(&rank0));
    v
}

/// `--dry-run`: the srun command line, with the variables that are the same on every rank
/// (the job token redacted), and what each rank's wrapper makes of `SLURM_*`.
pub fn describe(plan: &Plan) -> Result<String> {
    let mut words = vec!["env".to_string()];
    words.extend(
        plan.slurm_env()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    words.push(env::redacted_token_var());
    words.extend(command_line(plan));
    Ok(format!(
        "# one srun step; each rank maps SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NODEID to \
         GASPI_* and torchrun's {}\n{}\n",
        TORCHRUN_VARIABLES.join(", "),
        shell::join(&words)?
    ))
}

/// Starts the srun step (output goes straight to the terminal or the rank logs).
pub fn spawn(plan: &Plan) -> Result<Proc> {
    let line = command_line(plan);
    let (token_var, token) = plan.token_var();
    let mut cmd = Command::new(&line[0]);
    cmd.args(&line[1..])
        .envs(plan.slurm_env())
        // In srun's environment, which `--export=ALL` passes on to every rank.
        .env(token_var, token)
        .stdin(Stdio::null())
        .process_group(0);
    super::local::parent_death_signal(&mut cmd);
    let child = cmd.spawn().map_err(|source| Error::Spawn {
        what: "srun".into(),
        source,
    })?;
    Ok(Proc {
        rank: None,
        host: "slurm".into(),
        child,
        kind: Kind::Slurm,
        open_streams: OpenStreams::default(),
        tails: Tails::default(),
        reaped: None,
        status: None,
    })
}

/// The first failed rank, from the `status-K` files the wrapper leaves.
pub fn first_failure(run_dir: &Path) -> Option<(usize, String, i32)> {
    let mut found: Vec<(std::time::SystemTime, usize, String, i32)> = Vec::new();
    for e in std::fs::read_dir(run_dir).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rank) = name
            .strip_prefix(rundir::STATUS_PREFIX)
            .and_then(|r| r.parse().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut w = text.split_whitespace();
        let code = w.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        let host = w.next().unwrap_or("?").to_string();
        let t = e
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        found.push((t, rank, host, code));
    }
    found.sort();
    found.into_iter().next().map(|(_, r, h, c)| (r, h, c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    /// A scratch directory for one test, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static MADE: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "tnt-slurm-{tag}-{}-{}",
                std::process::id(),
                MADE.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Runs the wrapper here, as srun would on a node, with only `slurm` (and PATH, with
    /// `bin` in front when given) in its environment; returns the `VAR=value` lines that
    /// `show` prints.
    fn rank_sees(slurm: &[(&str, &str)], bin: Option<&Path>, show: &[&str]) -> Vec<String> {
        let script: String = show.iter().map(|v| format!("echo {v}=${v}; ")).collect();
        rank_prints(slurm, bin, false, &script).0
    }

    /// Runs the wrapper as [`rank_sees`] does, the ranks dealt round-robin when `cyclic`;
    /// returns the lines the shell `script` prints, and the wrapper's stderr.
    fn rank_prints(
        slurm: &[(&str, &str)],
        bin: Option<&Path>,
        cyclic: bool,
        script: &str,
    ) -> (Vec<String>, String) {
        let scratch = Scratch::new("run");
        let mut path = std::env::var("PATH").unwrap();
        if let Some(bin) = bin {
            path = format!("{}:{path}", bin.display());
        }
        let mut child = Command::new("sh")
            .args(["-c", &WRAPPER, "tarantella-rank"])
            .arg(&scratch.0)
            .args(["1", if cyclic { "1" } else { "0" }, "sh", "-c", script])
            .env_clear()
            .env("PATH", path)
            .envs(slurm.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded: a wrapper that hangs fails the test instead of holding it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("the wrapper did not exit within 20 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The few lines it printed fit in the pipes, so they can be read after the exit.
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        (lines, String::from_utf8_lossy(&out.stderr).into_owned())
    }

    const TORCHRUN: [&str; 7] = TORCHRUN_VARIABLES;

    #[test]
    fn a_slurm_rank_gets_torchruns_variables_and_its_nodes_rank_count() {
        // Rank 3 of 4, alone on the second of two nodes.
        let seen = rank_sees(
            &[
                ("SLURM_PROCID", "3"),
                ("SLURM_NTASKS", "4"),
                ("SLURM_LOCALID", "0"),
                ("SLURM_NODEID", "1"),
                ("SLURM_STEP_TASKS_PER_NODE", "3,1"),
                ("SLURM_STEP_NODELIST", "n1,n2"),
                ("SLURM_JOB_ID", "7"),
                ("SLURM_STEP_ID", "0"),
            ],
            None,
            &[&TORCHRUN[..], &["GASPI_LOCAL_NRANKS", "GASPI_RENDEZVOUS"]].concat(),
        );
        assert_eq!(
            seen,
            [
                "RANK=3",
                "WORLD_SIZE=4",
                "LOCAL_RANK=0",
                "LOCAL_WORLD_SIZE=1",
                "NODE_RANK=1",
                "MASTER_ADDR=n1",
                "MASTER_PORT=40112",
                "GASPI_LOCAL_NRANKS=1",
                "GASPI_RENDEZVOUS=n1:20112",
            ]
        );
    }

    #[test]
    fn a_compressed_node_list_is_expanded_by_scontrol() {
        let bin = Scratch::new("bin");
        let scontrol = bin.0.join("scontrol");
        std::fs::write(
            &scontrol,
            "#!/bin/sh\n[ \"$1 $2 $3\" = 'show hostnames node[1-2]' ] && printf 'node1\\nnode2\\n'\n",
        )
        .unwrap();
        std::fs::set_permissions(&scontrol, std::fs::Permissions::from_mode(0o755)).unwrap();
        let seen = rank_sees(
            &[
                ("SLURM_PROCID", "3"),
                ("SLURM_NTASKS", "4"),
                ("SLURM_LOCALID", "1"),
                ("SLURM_NODEID", "1"),
                ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
                ("SLURM_STEP_NODELIST", "node[1-2]"),
                ("SLURM_JOB_ID", "7"),
            ],
            Some(&bin.0),
            &["LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR"],
        );
        assert_eq!(
            seen,
            [
                "LOCAL_RANK=1",
                "LOCAL_WORLD_SIZE=2",
                "NODE_RANK=1",
                "MASTER_ADDR=node1"
            ]
        );
    }

    /// Rank 2 of a step of 2 ranks on n1, 1 on n2 and 2 on n3.
    const SPREAD_STEP: [(&str, &str); 8] = [
        ("SLURM_PROCID", "2"),
        ("SLURM_NTASKS", "5"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NODEID", "1"),
        ("SLURM_STEP_TASKS_PER_NODE", "2,1,2"),
        ("SLURM_STEP_NODELIST", "n1,n2,n3"),
        ("SLURM_JOB_ID", "7"),
        ("GASPI_JOB_ID", "slurm-test"),
    ];

    #[test]
    fn a_slurm_rank_gets_gpi2s_variables_and_a_machine_file_that_follows_the_distribution() {
        let show = "echo GASPI_SOCKET=$GASPI_SOCKET GASPI_MASTER=$GASPI_MASTER; \
                    echo \"$GASPI_MFILE\"; cat \"$GASPI_MFILE\"";
        let (block, _) = rank_prints(&SPREAD_STEP, None, false, show);
        assert_eq!(block[0], "GASPI_SOCKET=0 GASPI_MASTER=n1");
        assert_eq!(block[2..], ["n1", "n1", "n2", "n3", "n3"]);
        let (cyclic, _) = rank_prints(&SPREAD_STEP, None, true, show);
        assert_eq!(cyclic[2..], ["n1", "n2", "n3", "n1", "n3"]);
        for mfile in [&block[1], &cyclic[1]] {
            let tmp = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
            assert!(
                mfile.starts_with(&format!("{tmp}/tnt-slurm-test-machines.")),
                "{mfile}"
            );
            assert!(!Path::new(mfile).exists(), "{mfile} left behind");
        }
    }

    #[test]
    fn without_a_node_list_a_slurm_rank_runs_without_machine_file_and_says_so() {
        let mut step = SPREAD_STEP.to_vec();
        step.retain(|(k, _)| *k != "SLURM_STEP_NODELIST");
        step.push(("SLURM_STEP_NODELIST", "n[1-3]"));
        // An scontrol that cannot expand `n[1-3]`.
        let bin = Scratch::new("failing-bin");
        let scontrol = bin.0.join("scontrol");
        std::fs::write(&scontrol, "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::set_permissions(&scontrol, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (seen, err) = rank_prints(&step, Some(&bin.0), false, "echo \"[$GASPI_MFILE] $RANK\"");
        assert_eq!(seen, ["[] 2"]);
        assert!(
            err.contains("rank 2 gets no GASPI_MFILE: the step's nodes could not be listed"),
            "{err}"
        );
    }
}
