/* Shared by tests/shim/fake_opaque_nccl.c (a stand-in NCCL whose functions carry the names of
 * plugin/abi/opaque_api_list.h but signatures chosen to use every argument register) and
 * tests/shim/opaque_calls.c (calls them through libnccl-lamport.so's trampolines). Each checking
 * function returns a bit mask of the arguments that did not arrive as expected: 0 = all did. */
#ifndef NCCL_LAMPORT_FAKE_OPAQUE_NCCL_H_
#define NCCL_LAMPORT_FAKE_OPAQUE_NCCL_H_

#define FAKE_OPAQUE_INT(i) (1000L + (i))       /* i-th integer argument */
#define FAKE_OPAQUE_DOUBLE(i) ((i) + 0.25)     /* i-th floating-point argument */

typedef struct {
  int nRanks, rank, stride; /* ncclTeam: 12 bytes, passed and returned in two registers */
} FakeTeam;

typedef struct {
  long words[5]; /* 40 bytes: returned through a hidden pointer (rdi on x86-64, x8 on aarch64) */
} FakeBig;

/* ncclLLA2ACalcSlots: 6 integer registers, 8 floating-point registers, 2 stack arguments. */
typedef long (*FakeAllRegistersFn)(long, long, long, long, long, long, double, double, double, double, double,
                                   double, double, double, long, long);
/* ncclDevCommCreate: varargs (x86-64: al = number of vector registers used): n, then n doubles,
 * then n longs. */
typedef long (*FakeVarargsFn)(int n, ...);
/* ncclTeamWorld: team by value in and out: {nRanks + delta, rank + delta, stride + delta}. */
typedef FakeTeam (*FakeTeamFn)(FakeTeam team, int delta);
/* ncclTeamRail: returns 2 * x + y in a floating-point register. */
typedef double (*FakeDoubleFn)(double x, long y);
/* ncclTeamLsa: returns {seed, seed + 1, ..., seed + 4} in memory. */
typedef FakeBig (*FakeBigFn)(long seed);

#endif /* NCCL_LAMPORT_FAKE_OPAQUE_NCCL_H_ */
