//! The GPI-2 extensions of `GASPI_Ext.h` about the machine: `gaspi_machine_type`,
//! `gaspi_set_socket_affinity` and `gaspi_print_affinity_mask`.

use std::ffi::c_char;

use rt::{Error, Result};

use crate::ffi::{need, with_ctx};
use crate::gaspi_api;
use crate::types::*;

/// The CPUs this thread may run on, ascending.
fn affinity() -> Result<Vec<usize>> {
    // SAFETY: `cpu_set_t` is plain bits, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(Error::System {
            call: "sched_getaffinity",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the size of `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Binds this thread to `cpus`.
fn set_affinity(cpus: &[usize]) -> Result<()> {
    // SAFETY: as in `affinity`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: `cpu` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(Error::System {
            call: "sched_setaffinity",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
fn parse_cpulist(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// Formats CPUs as a kernel CPU list (`0-3,8`).
fn format_cpulist(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        out.push(if cpus[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[i])
        });
        i += 1;
    }
    out.join(",")
}

/// The CPUs of NUMA node `socket` (`/sys/devices/system/node`); a machine without NUMA
/// information has one socket, 0, with every online CPU.
fn socket_cpus(socket: u8) -> Result<Vec<usize>> {
    let node = format!("/sys/devices/system/node/node{socket}/cpulist");
    let list = match std::fs::read_to_string(&node) {
        Ok(t) => t,
        Err(_) if socket == 0 => std::fs::read_to_string("/sys/devices/system/cpu/online")
            .map_err(|e| Error::System {
                call: "reading the online CPUs",
                source: e,
            })?,
        Err(_) => {
            return Err(Error::InvalidNumber(format!(
                "socket {socket}: this machine has no NUMA node {socket}"
            )))
        }
    };
    parse_cpulist(&list)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| Error::System {
            call: "parsing a CPU list",
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{node}: {list:?}"),
            ),
        })
}

gaspi_api! { EXT_API;
    /// `gaspi_machine_type`: the processor architecture (`uname -m`, e.g. `x86_64`),
    /// NUL-terminated in the caller's 64 bytes.
    fn gaspi_machine_type(machine_type: *const c_char) {
        need(machine_type, "machine_type")?;
        with_ctx(|_| {
            // SAFETY: `utsname` is plain bytes, valid when zeroed; `uname` fills it.
            let mut u: libc::utsname = unsafe { std::mem::zeroed() };
            // SAFETY: `u` is a valid, writable `utsname`.
            if unsafe { libc::uname(&mut u) } != 0 {
                return Err(Error::System {
                    call: "uname",
                    source: std::io::Error::last_os_error(),
                });
            }
            // SAFETY: the kernel NUL-terminates `machine` inside the array.
            let name = unsafe { std::ffi::CStr::from_ptr(u.machine.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            let bytes = &name.as_bytes()[..name.len().min(63)];
            let dst = machine_type as *mut u8;
            // SAFETY: the prototype gives the caller's buffer 64 bytes (GPI-2's contract);
            // at most 63 bytes and the terminating NUL are written.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
                dst.add(bytes.len()).write(0);
            }
            Ok(())
        })
    }

    /// `gaspi_set_socket_affinity`: binds the calling thread to the CPUs of NUMA node
    /// `socket` (`GASPI_ERR_INV_NUM` for a node the machine does not have).
    fn gaspi_set_socket_affinity(socket: gaspi_uchar) {
        with_ctx(|_| set_affinity(&socket_cpus(socket)?))
    }
}

/// `gaspi_print_affinity_mask`: prints the calling thread's CPUs as a kernel CPU list,
/// `[Rank    3]: affinity 0-3,8`, on stdout.
#[export_name = "pgaspi_print_affinity_mask"]
pub extern "C" fn gaspi_print_affinity_mask() {
    let rank = crate::ffi::with_ctx(|c| Ok(c.rank().0)).ok();
    let who = rank.map_or_else(|| "[Rank    ?]".to_string(), |r| format!("[Rank {r:4}]"));
    match affinity() {
        Ok(cpus) => println!("{who}: affinity {}", format_cpulist(&cpus)),
        Err(e) => println!("{who}: affinity unknown ({e})"),
    }
}
crate::weak_alias!(gaspi_print_affinity_mask);

/// `gaspi_delay`: a hint for spin-wait loops (one `pause`), as in GPI-2.
#[export_name = "pgaspi_delay"]
pub extern "C" fn gaspi_delay() {
    std::hint::spin_loop();
}
crate::weak_alias!(gaspi_delay);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpulist("x"), None);
        assert_eq!(format_cpulist(&[]), "");
    }

    #[test]
    fn this_thread_has_cpus_and_socket_zero_exists() {
        let mine = affinity().unwrap();
        assert!(!mine.is_empty());
        assert!(!socket_cpus(0).unwrap().is_empty());
        assert!(socket_cpus(200).is_err());
    }
}
