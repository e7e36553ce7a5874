/* Assertion helpers of the C test programs: a failed check prints where, the code, its
 * text and the runtime's message, and exits with status 1. */
#ifndef TNT_CHECK_H
#define TNT_CHECK_H
#include <GASPI.h>
#include <GASPI_Ext.h>
#include <stdio.h>
#include <stdlib.h>

#define EXPECT(call, want)                                                              \
  do {                                                                                  \
    gaspi_return_t rc_ = (call);                                                        \
    if (rc_ != (want)) {                                                                \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d; last error: %s\n",      \
              __FILE__, __LINE__, #call, (int)rc_, gaspi_error_str(rc_), (int)(want),   \
              tnt_gaspi_last_error());                                                  \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#define CHECK(call) EXPECT(call, GASPI_SUCCESS)

#define ASSERT(cond)                                                                    \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);      \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* Bound for every blocking call of the tests: a hang becomes a failure. */
#define TMO ((gaspi_timeout_t)20000)

#endif
