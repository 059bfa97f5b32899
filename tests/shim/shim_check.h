/* The checks of the C shim test programs (tests/shim/dlopen_nccl.c, tests/shim/opaque_calls.c):
 * CHECK counts a failure and goes on; shimCheckResult prints "<program>: PASS" or the count and
 * gives main's exit status. */
#ifndef NCCL_LAMPORT_SHIM_CHECK_H_
#define NCCL_LAMPORT_SHIM_CHECK_H_

#include <stdio.h>

static int gFailures;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      ++gFailures;                                         \
    }                                                      \
  } while (0)

static int shimCheckResult(const char* program) {
  if (gFailures != 0) {
    fprintf(stderr, "%s: %d check(s) failed\n", program, gFailures);
    return 1;
  }
  printf("%s: PASS\n", program);
  return 0;
}

#endif /* NCCL_LAMPORT_SHIM_CHECK_H_ */
