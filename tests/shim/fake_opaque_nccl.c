/* A stand-in NCCL for the trampolines of plugin/abi/opaque_forward.S: the names are those of
 * plugin/abi/opaque_api_list.h, the signatures (tests/shim/fake_opaque_nccl.h) use every register
 * that can carry an argument or a result, so a slow path that lost one is caught. Loaded by the
 * plugin through NCCL_LAMPORT_NCCL_PATH (tests/shim/opaque_calls.c "abi"); plain names only, as
 * an NCCL without profiling aliases, which the plugin uses by handle. */
#include <stdarg.h>

#include "fake_opaque_nccl.h"

#define CHECK_ARG(bit, value, expected) (((value) == (expected)) ? 0L : (1L << (bit)))

/* Every NCCL has it; the plugin takes a library without it for no NCCL at all. */
int ncclGetVersion(int* version) {
  *version = 22800;
  return 0;
}

long ncclLLA2ACalcSlots(long i0, long i1, long i2, long i3, long i4, long i5, double d0, double d1, double d2,
                        double d3, double d4, double d5, double d6, double d7, long s0, long s1) {
  const long ints[] = {i0, i1, i2, i3, i4, i5, s0, s1};
  const double doubles[] = {d0, d1, d2, d3, d4, d5, d6, d7};
  long wrong = 0;
  for (int i = 0; i < 8; ++i) wrong |= CHECK_ARG(i, ints[i], FAKE_OPAQUE_INT(i));
  for (int i = 0; i < 8; ++i) wrong |= CHECK_ARG(8 + i, doubles[i], FAKE_OPAQUE_DOUBLE(i));
  return wrong;
}

long ncclDevCommCreate(int n, ...) {
  va_list args;
  long wrong = 0;
  va_start(args, n);
  for (int i = 0; i < n; ++i) wrong |= CHECK_ARG(i, va_arg(args, double), FAKE_OPAQUE_DOUBLE(i));
  for (int i = 0; i < n; ++i) wrong |= CHECK_ARG(16 + i, va_arg(args, long), FAKE_OPAQUE_INT(i));
  va_end(args);
  return wrong;
}

FakeTeam ncclTeamWorld(FakeTeam team, int delta) {
  FakeTeam out = {team.nRanks + delta, team.rank + delta, team.stride + delta};
  return out;
}

double ncclTeamRail(double x, long y) { return 2 * x + (double)y; }

FakeBig ncclTeamLsa(long seed) {
  FakeBig big;
  for (int i = 0; i < 5; ++i) big.words[i] = seed + i;
  return big;
}
