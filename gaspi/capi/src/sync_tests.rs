//! Keeps `include/GASPI.h` and `include/GASPI_Ext.h` in sync with the Rust side: every
//! prototype returning `gaspi_return_t` has an export with the same name and parameter types
//! (and the other way round), and every typedef and `gaspi_config_t` field has the size,
//! signedness and offset of its Rust definition (checked by compiling the header with `cc`).

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use crate::types::*;

fn include_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The headers without comments and preprocessor lines, on one line.
fn header_text() -> String {
    let mut all = String::new();
    for h in ["GASPI.h", "GASPI_Ext.h", "GASPI_Threads.h"] {
        let s = std::fs::read_to_string(include_dir().join(h)).unwrap();
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find("/*") {
            out += &rest[..i];
            let end = rest[i..].find("*/").expect("closed comment");
            rest = &rest[i + end + 2..];
        }
        out += rest;
        for line in out.lines().filter(|l| !l.trim_start().starts_with('#')) {
            all += line;
            all.push(' ');
        }
    }
    all
}

/// C parameter declaration → its type, normalized: `const` dropped, the name dropped,
/// pointers as a trailing `*`, `float`/`unsigned long` as their gaspi names.
fn c_param_type(p: &str) -> String {
    if p.contains("(*") {
        // The one function-pointer parameter written out in a header (gaspi_threads_run).
        return "gaspi_thread_fn".into();
    }
    // An array parameter (`char const machine_type[64]`) is a pointer.
    if let Some(open) = p.find('[') {
        return c_param_type(&format!(
            "{}*",
            &p[..open].trim_end().rsplit_once(' ').map_or(p, |(t, _)| t)
        ));
    }
    let spaced = p.replace('*', " * ");
    let mut toks: Vec<&str> = spaced
        .split_whitespace()
        .filter(|t| *t != "const")
        .collect();
    if toks.len() > 1 && toks.last().is_some_and(|t| *t != "*") {
        toks.pop(); // the parameter name
    }
    let stars = toks.iter().filter(|t| **t == "*").count();
    let base = toks
        .iter()
        .filter(|t| **t != "*")
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let base = match base.as_str() {
        "float" => "gaspi_float".to_string(),
        "unsigned long" => "gaspi_ulong".to_string(),
        "char" => "c_char".to_string(),
        _ => base,
    };
    base + &"*".repeat(stars)
}

/// Rust parameter type as `stringify!` wrote it → the same normal form.
fn rust_param_type(t: &str) -> String {
    let mut t = t.trim();
    let mut stars = 0;
    while let Some(r) = t.strip_prefix("*mut").or_else(|| t.strip_prefix("*const")) {
        t = r.trim();
        stars += 1;
    }
    let t = if t == "c_void" { "void" } else { t };
    t.to_string() + &"*".repeat(stars)
}

/// `name → parameter types` of every header prototype returning `gaspi_return_t`.
fn header_prototypes() -> BTreeMap<String, Vec<String>> {
    let text = header_text();
    let mut out = BTreeMap::new();
    for decl in text.split(';') {
        // A declaration may follow `extern "C" {` or a closing brace.
        let decl = decl.rsplit(['{', '}']).next().unwrap_or_default().trim();
        let decl = decl.trim_end_matches("TNT_GASPI_DEPRECATED").trim();
        let Some(rest) = decl.strip_prefix("gaspi_return_t ") else {
            continue;
        };
        let Some(open) = rest.find('(') else { continue };
        let name = rest[..open].trim();
        if name.starts_with('(') || name.contains(' ') {
            continue;
        }
        let params = rest[open + 1..rest.rfind(')').expect("closing paren")].trim();
        let types: Vec<String> = if params == "void" || params.is_empty() {
            Vec::new()
        } else {
            params.split(',').map(c_param_type).collect()
        };
        if let Some(prev) = out.insert(name.to_string(), types.clone()) {
            assert_eq!(prev, types, "{name} is declared twice, differently");
        }
    }
    out
}

fn rust_exports() -> BTreeMap<String, Vec<String>> {
    let tables = [
        crate::api_proc::PROC_API,
        crate::api_segment::SEGMENT_API,
        crate::api_comm::COMM_API,
        crate::api_coll::COLL_API,
        crate::api_info::INFO_API,
        crate::api_ext::EXT_API,
        crate::threads::THREADS_API,
    ];
    tables
        .iter()
        .flat_map(|t| t.iter())
        .map(|(n, ts)| {
            (
                n.to_string(),
                ts.iter().map(|t| rust_param_type(t)).collect(),
            )
        })
        .collect()
}

#[test]
fn prototypes_match_the_rust_exports() {
    let h = header_prototypes();
    let r = rust_exports();
    assert!(h.len() >= 80, "parsed only {} prototypes", h.len());
    let only_h: Vec<_> = h.keys().filter(|k| !r.contains_key(*k)).collect();
    let only_r: Vec<_> = r.keys().filter(|k| !h.contains_key(*k)).collect();
    assert!(
        only_h.is_empty() && only_r.is_empty(),
        "declared but not exported: {only_h:?}; exported but not declared: {only_r:?}"
    );
    for (name, types) in &h {
        assert_eq!(types, &r[name], "parameter types of {name}");
    }
}

#[test]
fn normal_forms() {
    assert_eq!(c_param_type("gaspi_rank_t * const rank"), "gaspi_rank_t*");
    assert_eq!(
        c_param_type("const gaspi_config_t new_config"),
        "gaspi_config_t"
    );
    assert_eq!(c_param_type("unsigned long *value"), "gaspi_ulong*");
    assert_eq!(rust_param_type("*mut gaspi_pointer_t"), "gaspi_pointer_t*");
}

trait Fact {
    const SIGNED: bool;
}
macro_rules! fact {
    ($($t:ty => $s:expr),*) => { $(impl Fact for $t { const SIGNED: bool = $s; })* };
}
fact!(i8 => true, u8 => false, i16 => true, u16 => false, i32 => true, u32 => false,
      i64 => true, u64 => false, f32 => true, f64 => true);

/// `(name, size, signed)` of the arithmetic typedefs, and `(name, size)` of the others.
macro_rules! arith {
    ($($t:ident),*) => { vec![$((stringify!($t), size_of::<$t>(), <$t as Fact>::SIGNED)),*] };
}
macro_rules! sized {
    ($($t:ident),*) => { vec![$((stringify!($t), size_of::<$t>())),*] };
}
macro_rules! offsets {
    ($($f:ident $(. $g:ident)*),*) => {
        vec![$((concat!(stringify!($f) $(, ".", stringify!($g))*), offset_of!(gaspi_config_t, $f $(. $g)*))),*]
    };
}

#[test]
fn type_sizes_and_config_layout_match_the_header() {
    let arith = arith!(
        gaspi_char,
        gaspi_uchar,
        gaspi_short,
        gaspi_ushort,
        gaspi_int,
        gaspi_uint,
        gaspi_long,
        gaspi_ulong,
        gaspi_float,
        gaspi_double,
        gaspi_timeout_t,
        gaspi_rank_t,
        gaspi_group_t,
        gaspi_number_t,
        gaspi_queue_id_t,
        gaspi_size_t,
        gaspi_alloc_t,
        gaspi_segment_id_t,
        gaspi_offset_t,
        gaspi_atomic_value_t,
        gaspi_time_t,
        gaspi_cycles_t,
        gaspi_notification_id_t,
        gaspi_notification_t,
        gaspi_statistic_counter_t,
        gaspi_memory_description_t
    );
    let sized = sized!(
        gaspi_pointer_t,
        gaspi_reduce_state_t,
        gaspi_string_t,
        gaspi_return_t,
        gaspi_network_t,
        gaspi_operation_t,
        gaspi_datatype_t,
        gaspi_state_t,
        gaspi_state_vector_t,
        gaspi_topology_t,
        gaspi_statistic_argument_t,
        gaspi_reduce_operation_t,
        gaspi_dev_config_t,
        gaspi_config_t
    );
    let offsets = offsets!(
        logger,
        sn_port,
        net_info,
        user_net,
        sn_persistent,
        sn_timeout,
        dev_config,
        dev_config.network_type,
        dev_config.params.ib.netdev_id,
        dev_config.params.ib.mtu,
        dev_config.params.ib.port_check,
        dev_config.params.tcp.port,
        dev_config.params.ofi.use_shm,
        dev_config.params.ofi.provider_info,
        dev_config.params.ofi.progress_auto,
        network,
        queue_size_max,
        queue_num,
        group_max,
        segment_max,
        transfer_size_max,
        notification_num,
        passive_queue_size_max,
        passive_transfer_size_max,
        allreduce_buf_size,
        allreduce_elem_max,
        rw_list_elem_max,
        build_infrastructure,
        user_defined
    );
    let mut c = String::from(
        "#include <GASPI.h>\n#include <GASPI_Ext.h>\n#include <stddef.h>\nint main(void) {\n",
    );
    for (n, _, _) in &arith {
        c += &format!("  printf(\"{n} %zu %d\\n\", sizeof({n}), ({n})-1 < ({n})0);\n");
    }
    for (n, _) in &sized {
        c += &format!("  printf(\"{n} %zu\\n\", sizeof({n}));\n");
    }
    for (f, _) in &offsets {
        c += &format!("  printf(\"{f} %zu\\n\", offsetof(gaspi_config_t, {f}));\n");
    }
    let consts = [
        ("GASPI_BLOCK", GASPI_BLOCK.to_string()),
        ("GASPI_TEST", GASPI_TEST.to_string()),
        ("GASPI_GROUP_ALL", GASPI_GROUP_ALL.to_string()),
    ];
    for (n, _) in &consts {
        c += &format!("  printf(\"{n} %lu\\n\", (unsigned long){n});\n");
    }
    c += "  return 0;\n}\n";
    let dir = std::env::temp_dir().join(format!("tnt-capi-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, c).unwrap();
    // Only the headers are needed: the program calls nothing of the library.
    let status = Command::new("cc")
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-type-limits",
            "-o",
        ])
        .arg(&exe)
        .arg("-I")
        .arg(include_dir())
        .arg(&src)
        .status()
        .expect("cc is installed (scripts/setup.sh)");
    assert!(status.success(), "the headers do not compile cleanly");
    let run = Command::new(&exe).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(run.status.success());
    let got: BTreeMap<String, String> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    for (n, size, signed) in arith {
        assert_eq!(
            got[n],
            format!("{size} {}", i32::from(signed)),
            "size and signedness of {n}"
        );
    }
    for (n, size) in sized {
        assert_eq!(got[n], size.to_string(), "size of {n}");
    }
    for (f, off) in offsets {
        assert_eq!(got[f], off.to_string(), "offset of gaspi_config_t.{f}");
    }
    for (n, v) in consts {
        assert_eq!(got[n], v, "value of {n}");
    }
}
