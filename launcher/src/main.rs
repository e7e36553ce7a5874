//! `tarantella [OPTIONS] [--] PROGRAM [ARGS...]`: see the `launcher` crate docs.

fn main() {
    let cli = match launcher::argv::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => std::process::exit(e.report()),
    };
    let code = match launcher::run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tarantella: error: {e}");
            2
        }
    };
    std::process::exit(code);
}
