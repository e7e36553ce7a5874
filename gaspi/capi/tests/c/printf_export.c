/* gaspi_printf and gaspi_printf_to are functions of the library with GPI-2's signatures
 * (GPI-2 declares them in GASPI_Ext.h and defines them in src/GPI2_Logger.c): a program or
 * binding that declares them itself links without GASPI_Ext.h, and with the argument
 * "dlsym" they (and their pgaspi_ names) are found by name at run time as well. Also: a
 * line longer than any fixed buffer, and a call before init (rank shown as "-"). */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <GASPI.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gaspi_printf(const char *fmt, ...);
void gaspi_printf_to(gaspi_rank_t rank, const char *fmt, ...);

typedef void (*printf_fn)(const char *fmt, ...);
typedef void (*printf_to_fn)(gaspi_rank_t rank, const char *fmt, ...);

/* check.h's ASSERT, repeated: check.h includes GASPI_Ext.h, which this program must do
 * without. */
#define ASSERT(cond)                                                                    \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);      \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)
#define CHECK(call) ASSERT((call) == GASPI_SUCCESS)
#define TMO ((gaspi_timeout_t)20000)
#define LONG 5000

/* The address of symbol `name` as a pointer to a function (POSIX: same representation). */
static void *lookup(const char *name) {
  void *sym = dlsym(RTLD_DEFAULT, name);
  ASSERT(sym != NULL);
  return sym;
}

int main(int argc, char **argv) {
  gaspi_rank_t me, n;
  static char big[LONG + 1];
  memset(big, 'x', LONG);
  gaspi_printf("before init %d\n", 7);
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  gaspi_printf("long %s\n", big);
  gaspi_printf_to(0, "to rank 0 from %u\n", (unsigned)me);
  if (argc > 1 && strcmp(argv[1], "dlsym") == 0) {
    printf_fn p;
    printf_to_fn pt;
    void *sym = lookup("gaspi_printf");
    memcpy(&p, &sym, sizeof p);
    sym = lookup("gaspi_printf_to");
    memcpy(&pt, &sym, sizeof pt);
    p("found by dlsym: %s\n", "gaspi_printf");
    pt(0, "found by dlsym: %s\n", "gaspi_printf_to");
    sym = lookup("pgaspi_printf");
    memcpy(&p, &sym, sizeof p);
    p("found by dlsym: %s\n", "pgaspi_printf");
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  gaspi_printf("printf_export ok on %u ranks\n", (unsigned)n);
  CHECK(gaspi_proc_term(TMO));
  return 0;
}
