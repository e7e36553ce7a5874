//! `tarantella [OPTIONS] -- PROGRAM [ARGS...]`: see the `launcher` crate docs.

use clap::Parser;

fn main() {
    let cli = launcher::cli::Cli::parse();
    let code = match launcher::run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tarantella: error: {e}");
            2
        }
    };
    std::process::exit(code);
}
