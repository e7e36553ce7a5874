//! The command line as people type it for mpirun, srun, torchrun and gaspi_run, turned
//! into one that clap parses, before clap sees it.
//!
//! - The program needs no `--` before it: the first word that is neither an option nor an
//!   option's value starts the program, and every word from there on is the program's
//!   (`tarantella -n 2 ./train --epochs 3`), as with mpirun.
//! - Long options also take one dash, as Open MPI's do: `-np 4`, `-hostfile hosts`,
//!   `-host a,b`, `-npernode 2`. (clap reads `-np` as `-n p`, and `-hostfile` as `-h`.)
//! - A variable assignment where the program would start (`-x A=1 B=2`) is refused with
//!   the advice to repeat `-x`, instead of being run as a program named `B=2`.
//! - An option clap does not know gets a hint: it may be the program's, put after it.
//!
//! Only the words before the program (or before `--`) are looked at: the program's own
//! arguments are passed on untouched.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches};

use crate::cli::Cli;

/// Why the command line could not be parsed.
#[derive(Debug)]
pub enum ParseError {
    /// clap's error (or its `--help`/`--version` output), with a hint when one may help.
    Clap {
        /// clap's error, formatted for `tarantella`'s command.
        error: clap::Error,
        /// What may help beyond clap's message (an unknown option may be the program's).
        hint: Option<String>,
    },
    /// A mistake clap cannot see, explained.
    Usage(String),
}

impl ParseError {
    /// Prints the error (or the help text) as clap would and returns the exit status:
    /// 0 for `--help`/`--version`, 2 otherwise.
    pub fn report(&self) -> i32 {
        match self {
            ParseError::Clap { error, hint } => {
                // Output errors (a closed terminal) leave nothing else to do.
                let _ = error.print();
                if let Some(hint) = hint {
                    say!("\ntarantella: hint: {hint}");
                }
                error.exit_code()
            }
            ParseError::Usage(msg) => {
                say!("tarantella: error: {msg}");
                2
            }
        }
    }
}

/// Parses `tarantella`'s command line (program name first).
pub fn parse<I, T>(args: I) -> Result<Cli, ParseError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let args = normalize(args.into_iter().map(Into::into).collect()).map_err(ParseError::Usage)?;
    let mut command = Cli::command();
    command
        .try_get_matches_from_mut(args)
        .and_then(|mut matches| Cli::from_arg_matches_mut(&mut matches))
        .map_err(|error| {
            let hint = hint_for(&error);
            ParseError::Clap {
                error: error.format(&mut command),
                hint,
            }
        })
}

/// What an option word of `tarantella` is, as far as finding the program goes.
struct Options {
    /// Long names and aliases (without `--`), and whether each takes a value.
    long: Vec<(String, bool)>,
    /// Short names and aliases, and whether each takes a value.
    short: Vec<(char, bool)>,
}

impl Options {
    /// Read from the clap definition, so that this never disagrees with it.
    fn of_cli() -> Options {
        let mut command = Cli::command();
        // Adds --help and --version.
        command.build();
        let mut options = Options {
            long: Vec::new(),
            short: Vec::new(),
        };
        for arg in command.get_arguments() {
            let takes_value = arg.get_action().takes_values();
            for long in arg
                .get_long()
                .into_iter()
                .chain(arg.get_all_aliases().unwrap_or_default())
            {
                options.long.push((long.to_string(), takes_value));
            }
            for short in arg
                .get_short()
                .into_iter()
                .chain(arg.get_all_short_aliases().unwrap_or_default())
            {
                options.short.push((short, takes_value));
            }
        }
        options
    }

    /// `Some(takes_value)` for a known long name.
    fn long(&self, name: &str) -> Option<bool> {
        self.long.iter().find(|(l, _)| l == name).map(|&(_, v)| v)
    }

    fn short(&self, c: char) -> Option<bool> {
        self.short.iter().find(|(s, _)| *s == c).map(|&(_, v)| v)
    }
}

/// The command line rewritten for clap: single-dash long options get their second dash,
/// and a `--` goes before the program when there is none. Errors explain an assignment
/// where the program should start.
fn normalize(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let options = Options::of_cli();
    let mut words = args.into_iter();
    let mut out: Vec<OsString> = words.next().into_iter().collect();
    let mut exports_given = false;
    while let Some(word) = words.next() {
        let Some(text) = word.to_str().map(str::to_string) else {
            // Not UTF-8: no option of ours, so the program.
            out.push("--".into());
            out.push(word);
            out.extend(words);
            return Ok(out);
        };
        if text == "--" {
            out.push(word);
            out.extend(words);
            return Ok(out);
        }
        let takes_next = if let Some(long) = text.strip_prefix("--") {
            out.push(word);
            !long.contains('=') && options.long(long) == Some(true)
        } else if let Some(short) = text.strip_prefix('-').filter(|s| !s.is_empty()) {
            let name = short.split('=').next().unwrap_or(short);
            if name.chars().count() > 1 && options.long(name).is_some() {
                // `-np 4`, `-hostfile FILE`: Open MPI's single-dash long options.
                out.push(format!("-{text}").into());
                !short.contains('=') && options.long(name) == Some(true)
            } else {
                if short.ends_with('N') {
                    refuse_a_count_after_numa(words.as_slice().first())?;
                }
                out.push(word);
                exports_given |= short.starts_with('x');
                short_cluster_takes_next(short, &options)
            }
        } else {
            // The program.
            if let Some(var) = assignment(&text) {
                return Err(if exports_given {
                    format!(
                        "{text:?} stands where the program should start; -x takes one \
                         VAR=VALUE, so give each variable its own -x \
                         (`-x A=1 -x {text}`)"
                    )
                } else {
                    format!(
                        "{text:?} stands where the program should start; to set {var} on \
                         every rank, use `-x {text}`"
                    )
                });
            }
            out.push("--".into());
            out.push(word);
            out.extend(words);
            return Ok(out);
        };
        if takes_next {
            out.extend(words.next());
        }
    }
    Ok(out)
}

/// `-N` is gaspi_run's NUMA flag and takes no value; mpirun's `-N K` (K ranks per node) and
/// srun's `-N K` (K nodes) do. A number after it is one of those, not the program.
fn refuse_a_count_after_numa(next: Option<&OsString>) -> Result<(), String> {
    let Some(count) = next
        .and_then(|w| w.to_str())
        .filter(|w| w.parse::<u64>().is_ok())
    else {
        return Ok(());
    };
    Err(format!(
        "-N {count}: tarantella's -N is gaspi_run's NUMA flag and takes no value; for \
         {count} ranks per host (mpirun's -N {count}) use --n-per-node {count}; the hosts \
         (srun's -N) come from --hostfile, -H or the Slurm allocation"
    ))
}

/// Whether the short option cluster `cluster` (after its `-`) ends with an option whose
/// value is the next word: `-n` does, `-n4` and `-dn4` do not, `-d` does not.
fn short_cluster_takes_next(cluster: &str, options: &Options) -> bool {
    let mut chars = cluster.chars();
    while let Some(c) = chars.next() {
        match options.short(c) {
            // The rest of the word, if any, is the value.
            Some(true) => return chars.as_str().is_empty(),
            Some(false) => {}
            // Unknown: clap reports it; the next word is not known to be a value.
            None => return false,
        }
    }
    false
}

/// `Some(VAR)` when `word` is `VAR=VALUE` with a variable name: a shell assignment.
fn assignment(word: &str) -> Option<&str> {
    let (var, _) = word.split_once('=')?;
    let mut bytes = var.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    (first_ok && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')).then_some(var)
}

/// A hint for an option clap does not know: it may be the program's own.
fn hint_for(error: &clap::Error) -> Option<String> {
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let option = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => return None,
    };
    Some(format!(
        "if {option} is an option of your program, put it after the program, which starts \
         at the first word that is not an option of tarantella: \
         `tarantella [OPTIONS] PROGRAM {option} ...`, or mark the start with `--`: \
         `tarantella [OPTIONS] -- PROGRAM {option} ...`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(args: &[&str]) -> Result<Vec<String>, String> {
        let mut line = vec!["tarantella"];
        line.extend(args);
        normalize(line.into_iter().map(OsString::from).collect()).map(|words| {
            words[1..]
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect()
        })
    }

    fn parsed(args: &[&str]) -> Cli {
        let mut line = vec!["tarantella"];
        line.extend(args);
        match parse(line) {
            Ok(cli) => cli,
            Err(ParseError::Clap { error, .. }) => panic!("{args:?}: {error}"),
            Err(ParseError::Usage(msg)) => panic!("{args:?}: {msg}"),
        }
    }

    #[test]
    fn the_program_needs_no_double_dash_and_keeps_its_own_options() {
        let cli = parsed(&["-n", "2", "./train", "--epochs", "3", "-n", "5", "--"]);
        assert_eq!(cli.nranks, Some(2));
        assert_eq!(cli.command, ["./train", "--epochs", "3", "-n", "5", "--"]);
        // Values of options are not the program, whatever they look like.
        let cli = parsed(&[
            "--log-level",
            "info",
            "-x",
            "A=1",
            "-xB=2",
            "--interpreter=python3 -u",
            "--job-id",
            "j1",
            "prog",
        ]);
        assert_eq!(cli.export, ["A=1", "B=2"]);
        assert_eq!(cli.command, ["prog"]);
        // An explicit `--` still works, and is the program's after the program.
        assert_eq!(
            parsed(&["-n", "2", "--", "prog", "--", "x"]).command,
            ["prog", "--", "x"]
        );
        assert_eq!(
            normalized(&["-n", "2", "prog", "a"]).unwrap(),
            ["-n", "2", "--", "prog", "a"]
        );
    }

    #[test]
    fn single_dash_long_options_as_open_mpi_takes_them() {
        let cli = parsed(&["-np", "4", "-hostfile", "hosts", "prog", "-np", "9"]);
        assert_eq!(cli.nranks, Some(4));
        assert_eq!(cli.hostfile.as_deref(), Some(std::path::Path::new("hosts")));
        assert_eq!(
            cli.command,
            ["prog", "-np", "9"],
            "the program's -np is its own"
        );
        assert_eq!(parsed(&["-np=3", "prog"]).nranks, Some(3));
        assert_eq!(parsed(&["-host", "a:2,b", "prog"]).hosts, ["a:2,b"]);
        assert_eq!(
            normalized(&["-np", "2", "--", "p", "-np"]).unwrap(),
            ["--np", "2", "--", "p", "-np"]
        );
        // Short options and their clusters are left alone.
        assert_eq!(parsed(&["-n4", "p"]).nranks, Some(4));
        assert_eq!(parsed(&["-n", "4", "p"]).nranks, Some(4));
    }

    #[test]
    fn an_assignment_where_the_program_starts_is_explained() {
        let err = normalized(&["-x", "A=1", "B=2", "--", "prog"]).unwrap_err();
        assert!(
            err.contains("\"B=2\" stands where the program should start")
                && err.contains("give each variable its own -x (`-x A=1 -x B=2`)"),
            "{err}"
        );
        let err = normalized(&["FOO=1", "prog"]).unwrap_err();
        assert!(
            err.contains("to set FOO on every rank, use `-x FOO=1`"),
            "{err}"
        );
        // After the program, or after `--`, assignments are the program's business.
        assert!(normalized(&["env", "A=1", "prog"]).is_ok());
        assert!(normalized(&["-x", "A=1", "--", "B=2", "prog"]).is_ok());
    }

    #[test]
    fn a_count_after_dash_capital_n_is_explained() {
        let err = normalized(&["-N", "2", "prog"]).unwrap_err();
        assert!(
            err.contains("gaspi_run's NUMA flag") && err.contains("use --n-per-node 2"),
            "{err}"
        );
        assert!(normalized(&["-dN", "4", "prog"]).is_err());
        assert!(parsed(&["-N", "prog"]).numa);
        assert!(
            parsed(&["-N", "--", "4"]).numa,
            "a program named 4 after --"
        );
    }

    #[test]
    fn an_unknown_option_gets_a_hint_to_put_it_after_the_program() {
        let line = ["tarantella", "-n", "2", "--epochs", "3", "./train"];
        let Err(ParseError::Clap { error, hint }) = parse(line) else {
            panic!("accepted");
        };
        assert_eq!(error.kind(), ErrorKind::UnknownArgument);
        let hint = hint.expect("a hint");
        assert!(
            hint.contains("if --epochs is an option of your program")
                && hint.contains("tarantella [OPTIONS] -- PROGRAM --epochs ..."),
            "{hint}"
        );
        // Other mistakes get clap's message alone.
        let Err(ParseError::Clap { hint, .. }) = parse(["tarantella", "-n", "x", "p"]) else {
            panic!("accepted");
        };
        assert_eq!(hint, None);
    }

    #[test]
    fn help_and_version_are_not_errors() {
        for flag in ["--help", "-h", "--version", "-V"] {
            let Err(ParseError::Clap { error, .. }) = parse(["tarantella", flag]) else {
                panic!("{flag} parsed");
            };
            assert_eq!(error.exit_code(), 0, "{flag}");
        }
    }
}
