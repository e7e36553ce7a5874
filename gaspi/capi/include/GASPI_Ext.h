/*
 * GASPI_Ext.h -- extensions of the reference implementation (GPI-2) that real codes use,
 * plus tnt_gaspi_last_error(), this implementation's detailed message of the last failure.
 */
#ifndef TARANTELLA_GASPI_EXT_H
#define TARANTELLA_GASPI_EXT_H

/* Programs written against earlier versions of this header got printf from it. */
#include <stdio.h>

#include "GASPI.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 between gaspi_proc_init and gaspi_proc_term, else 0 (valid before init). */
gaspi_return_t gaspi_initialized(gaspi_number_t *initialized);
/* Rank among the ranks on this host, and their number. */
gaspi_return_t gaspi_proc_local_rank(gaspi_rank_t *const local_rank);
gaspi_return_t gaspi_proc_local_num(gaspi_rank_t *const local_num);
/* The text of a return code (static storage, valid before init). */
gaspi_string_t gaspi_error_str(gaspi_return_t error_code);
/* Whether a rank answers within the timeout. */
gaspi_return_t gaspi_proc_ping(const gaspi_rank_t rank, gaspi_timeout_t tout);
/* The lowest segment id not in use here. */
gaspi_return_t gaspi_segment_avail_local(gaspi_segment_id_t *const avail_seg_id);
gaspi_return_t gaspi_segment_size(const gaspi_segment_id_t segment_id, const gaspi_rank_t rank,
                                  gaspi_size_t *const size);
/* The NUMA socket from GASPI_SOCKET (GASPI_ERR_ENV when the job has none). */
gaspi_return_t gaspi_numa_socket(gaspi_uchar *const socket);
/* The processor architecture (uname -m), NUL-terminated in the caller's 64 bytes. */
gaspi_return_t gaspi_machine_type(char const machine_type[64]);
/* Binds the calling thread to the CPUs of NUMA node `socket`. */
gaspi_return_t gaspi_set_socket_affinity(const gaspi_uchar socket);
/* Prints the calling thread's CPUs ("[Rank    3]: affinity 0-3,8") on stdout. */
void gaspi_print_affinity_mask(void);
/* A hint for spin-wait loops (one pause instruction). Valid before init. */
void gaspi_delay(void);
/* gaspi_time_ticks counts nanoseconds: reported as 1000 MHz. */
gaspi_return_t gaspi_cpu_frequency(gaspi_float *const cpu_mhz);
gaspi_return_t gaspi_rw_list_elem_max(gaspi_number_t *const elem_max);
/* Detailed message of this thread's last failed call ("" if none); valid until the next. */
const char *tnt_gaspi_last_error(void);

#if defined(__GNUC__)
#define TNT_GASPI_PRINTF_FORMAT(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TNT_GASPI_PRINTF_FORMAT(fmt, args)
#endif

/* printf with the caller's rank in front, one line per call: "[Rank    3]: text" on this
 * process's stdout (flushed); before init the rank shows as "-". gaspi_printf_to prints on
 * the caller's output as well (the launcher collects the output of every rank); `rank` is
 * accepted for compatibility. Functions of the library, declared as GPI-2 declares them. */
void gaspi_printf(const char *fmt, ...) TNT_GASPI_PRINTF_FORMAT(1, 2);
void gaspi_printf_to(gaspi_rank_t rank, const char *fmt, ...) TNT_GASPI_PRINTF_FORMAT(2, 3);

#ifdef __cplusplus
}
#endif

#endif /* TARANTELLA_GASPI_EXT_H */
