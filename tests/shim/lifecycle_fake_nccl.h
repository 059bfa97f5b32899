/* What the stand-in NCCL of tests/shim/lifecycle_fake_nccl.c records, for the scenarios of
 * tests/shim/lifecycle_scenarios.c. */
#ifndef NCCL_LAMPORT_LIFECYCLE_FAKE_NCCL_H_
#define NCCL_LAMPORT_LIFECYCLE_FAKE_NCCL_H_

#include <stdatomic.h>

struct FakeCounters {
  atomic_int callsOnDeadComm;  /* any call on a destroyed or aborted communicator */
  atomic_int concurrentCalls;  /* two threads inside ncclCommGetAsyncError of one communicator */
  atomic_int helperCalls;      /* calls from threads other than the main one (our set-up thread) */
  atomic_int helperGroupEnds;  /* of those, ncclGroupEnd: the set-up's exchange rounds */
  atomic_int allReduceCalls;   /* ncclAllReduce calls that reached NCCL */
  /* FAKE_ABORT_REUSES_HANDLE=1: the non-blocking communicator another thread created, inside
   * ncclCommAbort, at the address the abort had just freed. */
  void* _Atomic reusedComm;
};

extern struct FakeCounters fakeCounters;

#endif /* NCCL_LAMPORT_LIFECYCLE_FAKE_NCCL_H_ */
