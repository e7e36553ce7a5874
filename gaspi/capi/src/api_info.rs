//! Information, time, errors, the state vector and statistics.

use std::ffi::{c_char, CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use rt::{Counter, Error, PeerState};

use crate::ffi::{self, need, out, with_ctx, write_array};
use crate::gaspi_api;
use crate::types::*;

/// Level set by `gaspi_statistic_verbosity_level` (the counters are kept at every level).
static VERBOSITY: AtomicU32 = AtomicU32::new(1);

/// The standard's text for each return code, as C strings with static lifetime.
fn code_strings() -> &'static [CString] {
    static TABLE: OnceLock<Vec<CString>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (-1..=29)
            .map(|c| CString::new(rt::error_str(c)).unwrap_or_default())
            .collect()
    })
}

fn code_str(code: gaspi_return_t) -> &'static CStr {
    let t = code_strings();
    let i = usize::try_from(code.saturating_add(1)).unwrap_or(t.len() - 1);
    t.get(i).unwrap_or(&t[t.len() - 1])
}

/// Counter names and descriptions as static C strings.
fn counter_strings(c: Counter) -> (&'static CStr, &'static CStr) {
    static TABLE: OnceLock<Vec<(CString, CString)>> = OnceLock::new();
    let t = TABLE.get_or_init(|| {
        Counter::ALL
            .iter()
            .map(|c| {
                let (n, d) = c.info();
                (
                    CString::new(n).unwrap_or_default(),
                    CString::new(d).unwrap_or_default(),
                )
            })
            .collect()
    });
    let (n, d) = &t[c as usize];
    (n, d)
}

/// `gaspi_error_str`: the text of a return code (static storage; valid before init).
#[export_name = "pgaspi_error_str"]
pub extern "C" fn gaspi_error_str(error_code: gaspi_return_t) -> gaspi_string_t {
    code_str(error_code).as_ptr().cast_mut()
}
crate::weak_alias!(gaspi_error_str);

/// `tnt_gaspi_last_error`: the message of this thread's last failed call ("" if none),
/// valid until the thread's next failed call.
#[no_mangle]
pub extern "C" fn tnt_gaspi_last_error() -> *const c_char {
    ffi::last_error_ptr()
}

gaspi_api! { INFO_API;
    fn gaspi_transfer_size_min(transfer_size_min: *mut gaspi_size_t) {
        need(transfer_size_min, "transfer_size_min")?;
        with_ctx(|c| out(transfer_size_min, "transfer_size_min", c.transfer_size_min()))
    }

    fn gaspi_transfer_size_max(transfer_size_max: *mut gaspi_size_t) {
        need(transfer_size_max, "transfer_size_max")?;
        with_ctx(|c| out(transfer_size_max, "transfer_size_max", c.transfer_size_max()))
    }

    fn gaspi_rw_list_elem_max(elem_max: *mut gaspi_number_t) {
        need(elem_max, "elem_max")?;
        with_ctx(|c| out(elem_max, "elem_max", c.rw_list_elem_max()))
    }

    fn gaspi_network_type(network_type: *mut gaspi_network_t) {
        need(network_type, "network_type")?;
        with_ctx(|c| out(network_type, "network_type", c.network_type() as gaspi_network_t))
    }

    /// `gaspi_build_infrastructure`: the configured `gaspi_topology_t` value.
    fn gaspi_build_infrastructure(build: *mut gaspi_number_t) {
        need(build, "build")?;
        with_ctx(|c| out(build, "build", u32::from(c.config().build_infrastructure)))
    }

    /// `gaspi_time_ticks`: ticks of the process clock (`rt::clock`), `gaspi_cpu_frequency`
    /// per microsecond. Valid before init.
    fn gaspi_time_ticks(ticks: *mut gaspi_cycles_t) {
        out(ticks, "ticks", rt::clock::time_ticks())
    }

    /// `gaspi_time_get`: milliseconds of the process clock. Valid before init.
    fn gaspi_time_get(wtime: *mut gaspi_time_t) {
        out(wtime, "wtime", rt::clock::time_ms() as f32)
    }

    /// `gaspi_print_error`: a copy of the code's text in memory from `malloc`, which the
    /// caller releases with `free`. Valid before init.
    fn gaspi_print_error(error_code: gaspi_return_t, error_message: *mut gaspi_string_t) {
        need(error_message, "error_message")?;
        let s = code_str(error_code).to_bytes_with_nul();
        // SAFETY: malloc with a non-zero size; the result is checked for null before use.
        let p = unsafe { libc::malloc(s.len()) }.cast::<c_char>();
        if p.is_null() {
            return Err(Error::NoMemory("error message".into()));
        }
        // SAFETY: `p` holds `s.len()` freshly allocated bytes that do not overlap `s`.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), p, s.len()) };
        out(error_message, "error_message", p)
    }

    /// `gaspi_state_vec_get`: one `gaspi_state_t` per rank.
    fn gaspi_state_vec_get(state_vector: gaspi_state_vector_t) {
        need(state_vector, "state_vector")?;
        with_ctx(|c| {
            let v: Vec<gaspi_state_t> = c
                .state_vec()
                .iter()
                .map(|s| match s {
                    PeerState::Healthy => GASPI_STATE_HEALTHY,
                    PeerState::Corrupt => GASPI_STATE_CORRUPT,
                })
                .collect();
            write_array(state_vector, &v, "state_vector")
        })
    }

    /// `gaspi_statistic_verbosity_level`: recorded; the counters are kept at every level.
    /// The statistics calls work before init, as in GPI-2 (every counter is 0 then).
    fn gaspi_statistic_verbosity_level(verbosity_level: gaspi_number_t) {
        VERBOSITY.store(verbosity_level, Ordering::Relaxed);
        Ok(())
    }

    fn gaspi_statistic_counter_max(counter_max: *mut gaspi_number_t) {
        out(counter_max, "counter_max", Counter::ALL.len() as gaspi_number_t)
    }

    fn gaspi_statistic_counter_info(
        counter: gaspi_statistic_counter_t,
        counter_argument: *mut gaspi_statistic_argument_t,
        counter_name: *mut gaspi_string_t,
        counter_description: *mut gaspi_string_t,
        verbosity_level: *mut gaspi_number_t,
    ) {
        need(counter_argument, "counter_argument")?;
        need(counter_name, "counter_name")?;
        need(counter_description, "counter_description")?;
        need(verbosity_level, "verbosity_level")?;
        let c = Counter::from_index(counter)?;
        let (n, d) = counter_strings(c);
        out(counter_argument, "counter_argument", GASPI_STATISTIC_ARGUMENT_NONE)?;
        out(counter_name, "counter_name", n.as_ptr().cast_mut())?;
        out(counter_description, "counter_description", d.as_ptr().cast_mut())?;
        out(verbosity_level, "verbosity_level", 1)
    }

    fn gaspi_statistic_counter_get(
        counter: gaspi_statistic_counter_t,
        argument: gaspi_number_t,
        value: *mut gaspi_ulong,
    ) {
        let _ = argument;
        need(value, "value")?;
        let c = Counter::from_index(counter)?;
        match ffi::with_ctx(|ctx| Ok(ctx.statistic_counter_get(c))) {
            Ok(v) => out(value, "value", v),
            Err(Error::NotInitialized) => out(value, "value", 0),
            Err(e) => Err(e),
        }
    }

    fn gaspi_statistic_counter_reset(counter: gaspi_statistic_counter_t) {
        let c = Counter::from_index(counter)?;
        match ffi::with_ctx(|ctx| {
            ctx.statistic_counter_reset(c);
            Ok(())
        }) {
            Err(Error::NotInitialized) => Ok(()),
            other => other,
        }
    }
}
