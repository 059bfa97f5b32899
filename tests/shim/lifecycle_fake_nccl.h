/* What the stand-in NCCL of tests/shim/lifecycle_fake_nccl.c records, for the scenarios of
 * tests/shim/lifecycle_scenarios.c. */
#ifndef NCCL_LAMPORT_LIFECYCLE_FAKE_NCCL_H_
#define NCCL_LAMPORT_LIFECYCLE_FAKE_NCCL_H_

#include <nccl.h>
#include <stdatomic.h>

struct FakeCounters {
  atomic_int callsOnDeadComm;  /* any call on a destroyed or aborted communicator */
  atomic_int concurrentCalls;  /* two threads inside ncclCommGetAsyncError of one communicator */
  atomic_int helperCalls;      /* calls from threads other than the main one (our set-up thread) */
  atomic_int helperGroupEnds;  /* of those, ncclGroupEnd: the set-up's exchange rounds */
  atomic_int allReduceCalls;   /* ncclAllReduce calls that reached NCCL */
  atomic_int helperCallsAfterFinalize; /* our set-up thread calling NCCL on a finalized communicator */
  /* FAKE_ABORT_REUSES_HANDLE=1: the non-blocking communicator another thread created, inside
   * ncclCommAbort, at the address the abort had just freed; =split: the child of
   * fakeSplitParentDuringAbort that another thread's split got there, once its poll of the parent
   * saw the parent ready; =split-unpolled (also FAKE_DESTROY_REUSES_HANDLE, in ncclCommDestroy):
   * that child as soon as NCCL wrote it, nothing polled. */
  void* _Atomic reusedComm;
};

extern struct FakeCounters fakeCounters;

/* The parent that FAKE_ABORT_REUSES_HANDLE=split splits inside ncclCommAbort (set by the scenario). */
extern ncclComm_t _Atomic fakeSplitParentDuringAbort;

/* Called on any thread but the main one (our set-up thread) at the start of each NCCL call it makes
 * on a communicator and of its ncclGroupEnd (comm NULL): a scenario's way to act at an exact point
 * of the set-up. */
extern void (*_Atomic fakeHelperCallHook)(const char* function, ncclComm_t comm);

/* Called on the calling thread as ncclCommInitRankConfig, ncclCommInitAll, ncclCommSplit,
 * ncclCommGetAsyncError and ncclGroupEnd return, their answer computed: a scenario's way to act right after NCCL
 * answered, before the interposer's wrapper goes on. */
extern void (*_Atomic fakeReturnHook)(const char* function, ncclComm_t comm);

/* Sets fakeHelperCallHook (for C++ callers, which cannot name the _Atomic object). */
void fakeSetHelperCallHook(void (*hook)(const char* function, ncclComm_t comm));

/* NCCL's init job of a non-blocking communicator ends now (instead of FAKE_READY_MS after init). */
void fakeCommMakeReady(ncclComm_t comm);

/* From now on for `ms` milliseconds (0: no longer) the communicator is busy with an operation the
 * set-up enqueued (a non-blocking group, as the workspace exchange): ncclCommGetAsyncError answers
 * ncclInProgress, and so every call that checks readiness gets ncclInvalidArgument. */
void fakeCommBusyFor(ncclComm_t comm, int ms);

/* The calling thread's ncclCommGetAsyncError answers ms later than it computed its answer (a
 * watchdog thread preempted between NCCL's answer and our wrapper's use of it). */
void fakeSlowPollsOnThisThread(int ms);

#endif /* NCCL_LAMPORT_LIFECYCLE_FAKE_NCCL_H_ */
