//! The GASPI C interface over the Rust runtime: `libgaspi.so` / `libgaspi.a` with the headers
//! `include/GASPI.h` and `include/GASPI_Ext.h`, so that GASPI C programs written against the
//! reference implementation (GPI-2) build and run unchanged.
//!
//! ```c
//! #include <GASPI.h>
//! #include <stdlib.h>
//!
//! int main(void) {
//!   if (gaspi_proc_init(GASPI_BLOCK) != GASPI_SUCCESS) return EXIT_FAILURE;
//!   gaspi_rank_t me, n;
//!   gaspi_proc_rank(&me);
//!   gaspi_proc_num(&n);
//!   gaspi_segment_create(0, 1 << 20, GASPI_GROUP_ALL, GASPI_BLOCK, GASPI_MEM_INITIALIZED);
//!   gaspi_write_notify(0, 0, (me + 1) % n, 0, 8, 8, 0, 1, 0, GASPI_BLOCK);
//!   gaspi_notification_id_t id;
//!   gaspi_notify_waitsome(0, 0, 1, &id, GASPI_BLOCK);
//!   gaspi_wait(0, GASPI_BLOCK);
//!   gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK);
//!   return gaspi_proc_term(GASPI_BLOCK) == GASPI_SUCCESS ? EXIT_SUCCESS : EXIT_FAILURE;
//! }
//! ```
//!
//! `gaspi/capi/install.sh /opt/tnt`, then `cc ring.c $(pkg-config --cflags --libs GPI2)`
//! (`PKG_CONFIG_PATH=/opt/tnt/lib/pkgconfig`; `gaspi` works too) and `tarantella -n 4 --
//! ./a.out`. The library's SONAME is `libgaspi.so.1`, which the install provides; linking
//! `target/release/libgaspi.so` directly also needs `libgaspi.so.1 -> libgaspi.so` there.
//!
//! There is one implementation underneath: every function calls the [`rt::Context`] method of
//! the same name, and errors map to return codes through [`rt::Error::code`]. The context
//! lives in a process-wide slot between `gaspi_proc_init` and `gaspi_proc_term`; calls
//! before init return `GASPI_ERR_NOINIT`, null output pointers `GASPI_ERR_NULLPTR`, and a
//! panic inside the runtime is caught at the boundary and returned as `GASPI_ERROR`. The
//! message of the last failed call of a thread is available as `tnt_gaspi_last_error()`.
//!
//! # Safety
//! The exported functions are `unsafe extern "C"`: as in the reference implementation,
//! pointer arguments must be null (which is reported) or valid for the documented number of
//! elements, and user memory given to `gaspi_segment_bind`/`use` must stay valid until the
//! segment is deleted.
#![allow(non_camel_case_types, clippy::missing_safety_doc)]

mod api_coll;
mod api_comm;
mod api_ext;
mod api_info;
mod api_proc;
mod api_segment;
mod config;
mod ffi;
#[cfg(test)]
mod sync_tests;
mod threads;
pub mod types;

/// Makes `gaspi_NAME` a weak alias of the function exported as `pgaspi_NAME` (GPI-2's
/// profiling interface, `PGASPI.h`): a tool or program may define its own `gaspi_NAME` and
/// call `pgaspi_NAME`, as MPI tools do with `PMPI_`. ELF only; `build.rs` exports the aliases
/// from the shared library.
macro_rules! weak_alias {
    ($name:ident) => {
        #[cfg(target_os = "linux")]
        core::arch::global_asm!(concat!(
            ".weak ",
            stringify!($name),
            "\n.type ",
            stringify!($name),
            ",@function\n.set ",
            stringify!($name),
            ", p",
            stringify!($name)
        ));
    };
}
pub(crate) use weak_alias;

/// Defines `unsafe extern "C"` functions that return `gaspi_return_t`, each exported as
/// `pgaspi_NAME` with `gaspi_NAME` a weak alias of it ([`weak_alias`]): each body is an
/// expression of type `rt::Result<()>`, run by [`ffi::guard`] (panics caught, errors mapped to
/// codes). The macro also records every signature in `$table` so that a test can compare
/// them with the prototypes of the headers.
macro_rules! gaspi_api {
    ($table:ident; $(
        $(#[$m:meta])*
        fn $name:ident ( $( $arg:ident : $ty:ty ),* $(,)? ) $body:block
    )*) => {
        $(
            $(#[$m])*
            #[export_name = concat!("p", stringify!($name))]
            pub unsafe extern "C" fn $name( $($arg: $ty),* ) -> $crate::types::gaspi_return_t {
                $crate::ffi::guard(stringify!($name), move || $body)
            }
            $crate::weak_alias!($name);
        )*
        /// Name and parameter types of every function defined here.
        #[cfg(test)]
        pub(crate) const $table: &[(&str, &[&str])] = &[
            $( (stringify!($name), &[ $(stringify!($ty)),* ]) ),*
        ];
    };
}
pub(crate) use gaspi_api;
