//! The program each rank runs: the interpreter in front of it, and the checks that it can
//! start before any rank does.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::shell;
use crate::which::find_on_path;

/// The interpreter a `.py` program gets without `--interpreter`, as in Tarantella.
pub const PYTHON: &str = "python3";

/// `interpreter` (split like a shell would), or `python3` for a `.py` program when none is
/// given, then `command`. `--interpreter ""` runs even a `.py` program by itself.
pub fn command_line(interpreter: Option<&str>, command: &[String]) -> Result<Vec<String>> {
    let mut argv = match interpreter {
        Some(words) => shell::split(words)?,
        None if command.first().is_some_and(|p| is_python_script(p)) => vec![PYTHON.to_string()],
        None => Vec::new(),
    };
    argv.extend(command.iter().cloned());
    Ok(argv)
}

fn is_python_script(program: &str) -> bool {
    Path::new(program)
        .extension()
        .is_some_and(|extension| extension == "py")
}

/// Checks, for ranks on this host, that `argv[0]` is an executable and, when an
/// interpreter runs the program, that a program that looks like a script path exists.
pub fn check(argv: &[String], command: &[String]) -> Result<()> {
    check_executable(&argv[0])?;
    if argv.len() > command.len() {
        let program = &command[0];
        if (program.contains('/') || is_python_script(program)) && !Path::new(program).exists() {
            return Err(Error::ProgramNotFound(program.clone()));
        }
    }
    Ok(())
}

fn check_executable(prog: &str) -> Result<()> {
    let path = if prog.contains('/') {
        PathBuf::from(prog)
    } else {
        find_on_path(prog).ok_or_else(|| Error::ProgramNotFound(prog.to_string()))?
    };
    let meta = std::fs::metadata(&path).map_err(|_| Error::ProgramNotFound(prog.to_string()))?;
    use std::os::unix::fs::PermissionsExt;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(Error::ProgramNotExecutable(path));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(interpreter: Option<&str>, command: &[&str]) -> Vec<String> {
        let command: Vec<String> = command.iter().map(|w| w.to_string()).collect();
        command_line(interpreter, &command).unwrap()
    }

    #[test]
    fn a_python_script_runs_with_python3_unless_told_otherwise() {
        assert_eq!(
            line(None, &["train.py", "--epochs", "3"]),
            ["python3", "train.py", "--epochs", "3"]
        );
        assert_eq!(line(None, &["dir/train.py"]), ["python3", "dir/train.py"]);
        assert_eq!(
            line(Some("python3.12 -u"), &["train.py"]),
            ["python3.12", "-u", "train.py"]
        );
        assert_eq!(line(Some(""), &["./train.py"]), ["./train.py"]);
        assert_eq!(line(None, &["./train", "x.py"]), ["./train", "x.py"]);
        assert_eq!(
            line(None, &["python3", "train.py"]),
            ["python3", "train.py"]
        );
    }

    #[test]
    fn a_missing_script_is_named() {
        let command = vec!["no-such-script-tnt.py".to_string()];
        let argv = vec!["sh".to_string(), command[0].clone()];
        let err = check(&argv, &command).unwrap_err().to_string();
        assert!(err.contains("\"no-such-script-tnt.py\" not found"), "{err}");
    }
}
