/*
 * gaspi_printf and gaspi_printf_to, GPI-2's variadic printing functions of GASPI_Ext.h,
 * defined in C because stable Rust cannot define a C variadic function. Compiled by build.rs
 * (the cc crate) into libgaspi.so and libgaspi.a. As every function of the library, each is
 * exported as pgaspi_NAME with gaspi_NAME a weak alias of it (PGASPI.h), so that a tool may
 * define its own gaspi_printf and still call the library's.
 *
 * What they print: "[Rank    3]: text" on this process's stdout, flushed; before init (or
 * after term) the rank shows as "-". GPI-2 sends the line to a logger daemon of the target
 * rank's host instead; here the launcher collects every rank's output, so gaspi_printf_to
 * prints on the caller's output too and `rank` only keeps GPI-2's signature.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "PGASPI.h"

/* Lines up to this long are formatted on the stack; longer ones in a heap buffer, so that
 * no line is cut. */
#define TNT_PRINTF_STACK 1024

static void tnt_vprintf_rank(const char *fmt, va_list ap) {
  char small[TNT_PRINTF_STACK];
  char *text = small;
  va_list again;
  va_copy(again, ap);
  int len = vsnprintf(small, sizeof small, fmt, ap);
  if (len >= (int)sizeof small) {
    text = malloc((size_t)len + 1);
    if (text != NULL) {
      vsnprintf(text, (size_t)len + 1, fmt, again);
    } else {
      text = small; /* out of memory: the line as far as it fits */
    }
  }
  va_end(again);
  if (len < 0) {
    text[0] = '\0'; /* an encoding error: print the prefix only */
  }
  /* The message is formatted before the rank is looked up: a failed lookup replaces this
   * thread's tnt_gaspi_last_error() text, which may be one of the arguments. Asking
   * gaspi_initialized first keeps that text intact before init. The pgaspi_ names are
   * called so that a tool's own gaspi_* wrappers do not see these internal calls. */
  gaspi_number_t initialized = 0;
  gaspi_rank_t rank = 0;
  if (pgaspi_initialized(&initialized) == GASPI_SUCCESS && initialized &&
      pgaspi_proc_rank(&rank) == GASPI_SUCCESS) {
    printf("[Rank %4u]: %s", (unsigned)rank, text);
  } else {
    printf("[Rank    -]: %s", text);
  }
  fflush(stdout);
  if (text != small) {
    free(text);
  }
}

void pgaspi_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tnt_vprintf_rank(fmt, ap);
  va_end(ap);
}

void pgaspi_printf_to(gaspi_rank_t rank, const char *fmt, ...) {
  va_list ap;
  (void)rank;
  va_start(ap, fmt);
  tnt_vprintf_rank(fmt, ap);
  va_end(ap);
}

#pragma weak gaspi_printf = pgaspi_printf
#pragma weak gaspi_printf_to = pgaspi_printf_to
