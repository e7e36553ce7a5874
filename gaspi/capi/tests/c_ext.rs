//! The GPI-2 extension headers: `GASPI_Threads.h` (a thread pool of 4 threads per rank doing
//! writes, queue waits, passive messages and `gaspi_threads_sync_all`, built with
//! AddressSanitizer), and `PGASPI.h`, the profiling interface (a tool that defines its own
//! `gaspi_*` and calls `pgaspi_*`, linked dynamically and statically), which is generated
//! from the other headers (`TNT_BLESS=1` regenerates it); and `gaspi_printf`/`gaspi_printf_to`,
//! exported functions of the library that a program may declare or look up itself.

mod common;

use std::time::Duration;

use common::{compile, include_dir, Link};
use rt::env::TransportChoice;
use rt::testing::{Job, JobOutcome};

fn run(exe: &std::path::Path, n: u16, t: TransportChoice) -> JobOutcome {
    let mut job = Job::new(n, exe);
    job.transport = t;
    job.timeout = Duration::from_secs(90);
    // The Rust runtime is not instrumented; its thread-locals and caches live to exit.
    job.env.push((
        "ASAN_OPTIONS".into(),
        "detect_leaks=0:abort_on_error=1".into(),
    ));
    job.run()
}

fn passes(exe: &std::path::Path, name: &str, n: u16, t: TransportChoice) {
    let out = run(exe, n, t);
    out.assert_success();
    for r in &out.ranks {
        let want = format!("[Rank {:4}]: {name} ok on {n} ranks", r.rank);
        assert!(r.stdout.contains(&want), "{}", out.report());
        assert!(!r.stderr.contains("AddressSanitizer"), "{}", out.report());
    }
}

fn threads_program(tag: &str) -> std::path::PathBuf {
    compile(
        "threads",
        Link::Shared,
        tag,
        &[
            "-pthread",
            "-fsanitize=address",
            "-fno-omit-frame-pointer",
            "-g",
            // GASPI_Threads.h marks most of its functions deprecated, as GPI-2 does.
            "-Wno-deprecated-declarations",
        ],
    )
}

#[test]
fn thread_pool_of_4_per_rank_tcp_2() {
    passes(
        &threads_program("asan-tcp"),
        "threads",
        2,
        TransportChoice::Tcp,
    );
}

#[test]
fn thread_pool_of_4_per_rank_shm_2() {
    passes(
        &threads_program("asan-shm"),
        "threads",
        2,
        TransportChoice::Shm,
    );
}

#[test]
fn thread_pool_of_4_per_rank_tcp_3() {
    passes(
        &threads_program("asan-tcp3"),
        "threads",
        3,
        TransportChoice::Tcp,
    );
}

#[test]
fn profiling_tool_interposes_gaspi_calls_shared() {
    let exe = compile("pgaspi_tool", Link::Shared, "so", &[]);
    passes(&exe, "pgaspi_tool", 2, TransportChoice::Tcp);
}

#[test]
fn profiling_tool_interposes_gaspi_calls_static() {
    let exe = compile("pgaspi_tool", Link::Static, "a", &[]);
    passes(&exe, "pgaspi_tool", 2, TransportChoice::Shm);
}

/// `gaspi_printf`/`gaspi_printf_to` are exported functions (they were `static inline` in
/// `GASPI_Ext.h`, so a program that declares them itself, as GPI-2 codes and bindings may,
/// did not link): `printf_export.c` declares them itself, calls them before init, with a
/// 5000-character line and (`dlsym`) through pointers found by name at run time.
fn printf_exported(link: Link, tag: &str, args: &[&str], t: TransportChoice) {
    let exe = compile("printf_export", link, tag, &[]);
    let mut job = Job::new(2, &exe);
    job.args = args.iter().map(|a| a.to_string()).collect();
    job.transport = t;
    job.timeout = Duration::from_secs(90);
    let out = job.run();
    out.assert_success();
    let long = "x".repeat(5000);
    for r in &out.ranks {
        let mut want = vec![
            "[Rank    -]: before init 7\n".to_string(),
            format!("[Rank {:4}]: long {long}\n", r.rank),
            format!("[Rank {:4}]: to rank 0 from {}\n", r.rank, r.rank),
            format!("[Rank {:4}]: printf_export ok on 2 ranks\n", r.rank),
        ];
        if !args.is_empty() {
            for f in ["gaspi_printf", "gaspi_printf_to", "pgaspi_printf"] {
                want.push(format!("[Rank {:4}]: found by dlsym: {f}\n", r.rank));
            }
        }
        for w in want {
            assert!(r.stdout.contains(&w), "{w:?} missing\n{}", out.report());
        }
    }
}

#[test]
fn printf_functions_are_exported_shared() {
    printf_exported(Link::Shared, "so", &["dlsym"], TransportChoice::Tcp);
}

#[test]
fn printf_functions_are_exported_static() {
    printf_exported(Link::Static, "a", &[], TransportChoice::Shm);
}

/// The function declarations of a header: comments and preprocessor lines dropped, each
/// declaration on one line with single spaces, in order.
fn declarations(header: &str) -> Vec<String> {
    let text = std::fs::read_to_string(include_dir().join(header)).unwrap();
    let mut code = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("/*") {
        code += &rest[..i];
        let end = rest[i..].find("*/").expect("closed comment");
        rest = &rest[i + end + 2..];
    }
    code += rest;
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    code.split(';')
        .map(|d| d.rsplit(['{', '}']).next().unwrap_or_default())
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .map(|d| {
            d.trim_end_matches("TNT_GASPI_DEPRECATED")
                .trim()
                .to_string()
        })
        .filter(|d| {
            [
                "gaspi_return_t gaspi_",
                "gaspi_string_t gaspi_",
                "void gaspi_",
            ]
            .iter()
            .any(|p| d.starts_with(p))
        })
        .collect()
}

/// `PGASPI.h` as the headers say it must be: every function as `pgaspi_*`.
fn pgaspi_header() -> String {
    let mut out = String::from(
        "/*\n * PGASPI.h -- the profiling interface: every function of GASPI.h, GASPI_Ext.h and\n \
         * GASPI_Threads.h also exists as pgaspi_*, and the gaspi_* functions are weak aliases\n \
         * of them, so a tool may define its own gaspi_* and call pgaspi_* (as with PMPI).\n \
         * Generated from those headers (TNT_BLESS=1 cargo test -p tarantella-gaspi-capi --test c_ext);\n \
         * do not edit.\n */\n#ifndef TARANTELLA_PGASPI_H\n#define TARANTELLA_PGASPI_H\n\n\
         #include \"GASPI.h\"\n#include \"GASPI_Ext.h\"\n#include \"GASPI_Threads.h\"\n\n\
         #ifdef __cplusplus\nextern \"C\" {\n#endif\n",
    );
    for h in ["GASPI.h", "GASPI_Ext.h", "GASPI_Threads.h"] {
        out += &format!("\n/* {h} */\n");
        for d in declarations(h) {
            out += &d.replacen(" gaspi_", " pgaspi_", 1);
            out += ";\n";
        }
    }
    out += "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* TARANTELLA_PGASPI_H */\n";
    out
}

#[test]
fn pgaspi_header_is_generated_from_the_headers() {
    let want = pgaspi_header();
    let path = include_dir().join("PGASPI.h");
    if std::env::var_os("TNT_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "include/PGASPI.h is not what the headers declare: run \
         `TNT_BLESS=1 cargo test -p tarantella-gaspi-capi --test c_ext pgaspi_header` to regenerate it"
    );
    assert!(want.matches("pgaspi_").count() > 90);
}
