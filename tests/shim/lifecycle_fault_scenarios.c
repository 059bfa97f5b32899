/* Host memory running out inside libnccl-lamport.so, around NCCL's answer to a split or a poll
 * (LD_PRELOAD, the stand-in NCCL of tests/shim/lifecycle_fake_nccl.c). Each scenario is a sweep:
 * the k-th C++ allocation of the calling thread after a chosen point, or of the set-up thread of
 * a non-blocking batch (alloc-fails-in-setup-thread-*), throws std::bad_alloc, for k = 1, 2, ...
 * until k is past the last allocation of the path (tests/shim/alloc_faults.h).
 * For every k: NCCL's answer reaches the program unchanged, the program never polls for ever, and
 * a split child whose set-up could not start then is set up at a later poll, not lost.
 * Exit status 77 (SKIPPED) where the allocator cannot be replaced (a sanitizer's build). */
#include <pthread.h>
#include <stdlib.h>

#include "tests/shim/alloc_faults.h"
#include "tests/shim/lifecycle_scenario_support.h"

enum { kSkipped = 77, kMaxSweep = 400 };

static pthread_t gMainThread;
static const char* _Atomic gArmFunction; /* arm when this function returns on the main thread */
static atomic_int gArmAt;

/* fakeReturnHook: arms the failure right after NCCL answered, on the scenario's own thread only
 * (our set-up thread polls NCCL too). */
static void armOnReturn(const char* function, ncclComm_t comm) {
  (void)comm;
  const char* want = atomic_load(&gArmFunction);
  if (want == NULL || strcmp(want, function) != 0 || !pthread_equal(pthread_self(), gMainThread)) return;
  atomic_store(&gArmFunction, NULL);
  allocFaultArm(atomic_load(&gArmAt));
}

static void armAfterReturnOf(const char* function, int k) {
  atomic_store(&gArmAt, k);
  atomic_store(&gArmFunction, function);
}

/* Stops arming; 1 if the armed allocation was reached. */
static int disarm(void) {
  atomic_store(&gArmFunction, NULL);
  const int fired = allocFaultFired();
  allocFaultArm(0);
  return fired;
}

/* A ready non-blocking parent and its split's child, written late by NCCL into slots[k] (the
 * slot outlives the sweep step: a lost watch would read it later). */
static ncclComm_t gSlots[kMaxSweep + 1];
static ncclComm_t readyParent(void) {
  ncclComm_t parent = initNonBlocking();
  CHECK(pollReady(parent) == ncclSuccess, "parent never ready");
  return parent;
}

/* What every step ends with: the child ready within pollReady's 10 s (never in progress for
 * ever), registered where `mustBeKnown` (its set-up ran, late or not), its allreduce answered, and
 * both communicators destroyed. */
static void finishStep(int k, ncclComm_t parent, ncclComm_t child, int mustBeKnown) {
  CHECK(pollReady(child) == ncclSuccess, "allocation %d failing: the child never became ready", k);
  CHECK(!mustBeKnown || infoOf(child).known == 1, "allocation %d failing: the child was lost (no entry, no set-up)", k);
  float x = 1.0f;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, child, NULL) == ncclSuccess, "allocation %d: allreduce failed", k);
  CHECK(ncclCommDestroy(child) == ncclSuccess, "allocation %d: destroy of the child failed", k);
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "allocation %d: destroy of the parent failed", k);
}

/* Runs step(k) for k = 1, 2, ... until the k-th allocation was not reached (step returns 0):
 * every allocation of the path has failed once by then. minSteps: the allocations the path must
 * have at least (0 for a path that is to allocate nothing, where the sweep guards the future). */
static void sweepAtLeast(int (*step)(int k), const char* where, int minSteps) {
  int k = 1;
  while (k <= kMaxSweep && step(k)) ++k;
  CHECK(k - 1 >= minSteps && k <= kMaxSweep, "the sweep after %s ended after %d step(s)", where, k - 1);
  printf("each of the %d allocation(s) after %s failed in turn\n", k - 1, where);
}

static void sweep(int (*step)(int k), const char* where) { sweepAtLeast(step, where, 1); }

/* A step of the poll sweeps: a fresh parent and its child, written late; the k-th allocation
 * fails in the parent's poll once NCCL answered (the poll collects the child and starts its
 * set-up) or, where the program polls the child first, from the start of that poll (which adopts
 * the child before asking NCCL). abortParent: the program then aborts the parent (it keeps only
 * the child), which must not take with it a child whose set-up could not start yet. */
static int pollStep(int k, int pollParent, int abortParent) {
  ncclComm_t parent = readyParent();
  CHECK(ncclCommSplit(parent, 0, 0, &gSlots[k], NULL) == ncclSuccess, "split failed");
  ncclComm_t child = waitForChild(&gSlots[k]);
  CHECK(child != NULL, "the stand-in never wrote the child");
  if (child == NULL) return 0;
  if (pollParent) {
    armAfterReturnOf("ncclCommGetAsyncError", k);
  } else {
    allocFaultArm(k);
  }
  ncclResult_t state = ncclInternalError;
  const ncclResult_t result = ncclCommGetAsyncError(pollParent ? parent : child, &state);
  const int fired = disarm();
  CHECK(result == ncclSuccess && (state == ncclSuccess || (!pollParent && state == ncclInProgress)),
        "allocation %d failing in the %s's poll: the program got %d, state %d (NCCL: 0, 0)", k,
        pollParent ? "parent" : "child", result, state);
  if (abortParent) {
    CHECK(ncclCommAbort(parent) == ncclSuccess, "allocation %d: abort of the parent failed", k);
    parent = NULL;  /* finishStep's destroy of NULL is NCCL's no-op */
  }
  finishStep(k, parent, child, /*mustBeKnown=*/1);
  return fired;
}

/* The k-th allocation from the entry of a destroy of a written, uncollected child fails, and NCCL
 * refuses the destroy (the child busy): the child must keep its watch (or its set-up), so that
 * its next poll sets it up (before, the destroy's clean-up dropped the watch its failed adoption
 * had left). */
static int refusedDestroyStep(int k) {
  ncclComm_t parent = readyParent();
  CHECK(ncclCommSplit(parent, 0, 0, &gSlots[k], NULL) == ncclSuccess, "split failed");
  ncclComm_t child = waitForChild(&gSlots[k]);
  CHECK(child != NULL, "the stand-in never wrote the child");
  if (child == NULL) return 0;
  fakeCommBusyFor(child, 200);
  allocFaultArm(k);
  const ncclResult_t destroyed = ncclCommDestroy(child);
  const int fired = disarm();
  CHECK(destroyed == ncclInvalidArgument, "allocation %d: the destroy of the busy child returned %d (NCCL: %d)", k,
        destroyed, ncclInvalidArgument);
  usleep(250 * 1000); /* no longer busy */
  finishStep(k, parent, child, /*mustBeKnown=*/1);
  return fired;
}

static int parentPollStep(int k) { return pollStep(k, 1, 0); }
static int childPollStep(int k) { return pollStep(k, 0, 0); }
static int parentPollThenAbortStep(int k) { return pollStep(k, 1, 1); }
static int childPollThenAbortStep(int k) { return pollStep(k, 0, 1); }

/* A failure of ours before NCCL is called must not keep NCCL from the call: a split or an
 * allreduce skipped on one rank leaves its peers waiting in theirs for ever. The k-th allocation
 * from the wrapper's entry fails. */
static int splitEntryStep(int k) {
  ncclComm_t parent = readyParent();
  allocFaultArm(k);
  const ncclResult_t result = ncclCommSplit(parent, 0, 0, &gSlots[k], NULL);
  const int fired = disarm();
  CHECK(result == ncclSuccess, "allocation %d from the split's entry failing: the program got %d (NCCL: 0)", k, result);
  ncclComm_t child = waitForChild(&gSlots[k]);
  CHECK(child != NULL, "allocation %d from the split's entry failing: NCCL never saw the split", k);
  if (child == NULL) return 0;
  finishStep(k, parent, child, /*mustBeKnown=*/0);
  return fired;
}

/* The same for an allreduce on a non-blocking communicator whose set-up may be pending (the
 * wrapper then hands NCCL's call to the set-up's wait): NCCL gets the call exactly once. */
static int pendingAllReduceEntryStep(int k) {
  ncclComm_t comm = initNonBlocking();
  const int before = atomic_load(&fakeCounters.allReduceCalls);
  float x = 1.0f;
  allocFaultArm(k);
  (void)ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL);
  const int fired = disarm();
  const int calls = atomic_load(&fakeCounters.allReduceCalls) - before;
  CHECK(calls == 1, "allocation %d from the allreduce's entry failing: NCCL got the call %d times", k, calls);
  CHECK(pollReady(comm) == ncclSuccess, "allocation %d: the communicator never became ready", k);
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "allocation %d: destroy failed", k);
  return fired;
}

/* What the split wrapper does after NCCL answered (note the child's slot, its CTA cap). A child
 * whose slot could not be noted stays on NCCL on this rank, with a WARN: not required known. */
static int splitStep(int k) {
  ncclComm_t parent = readyParent();
  armAfterReturnOf("ncclCommSplit", k);
  const ncclResult_t result = ncclCommSplit(parent, 0, 0, &gSlots[k], NULL);
  const int fired = disarm();
  CHECK(result == ncclSuccess, "allocation %d failing after NCCL answered the split: the program got %d (NCCL: 0)", k,
        result);
  ncclComm_t child = waitForChild(&gSlots[k]);
  CHECK(child != NULL, "the stand-in never wrote the child");
  if (child == NULL) return 0;
  CHECK(pollReady(parent) == ncclSuccess, "allocation %d failing: the parent never became ready", k);
  finishStep(k, parent, child, /*mustBeKnown=*/0);
  return fired;
}

/* Steps of the init sweeps (our set-up runs after NCCL answered): the init's answer must reach
 * the program as NCCL gave it, and the communicator must work on (on NCCL, where our set-up could
 * not run). Finalize, destroy, abort and an allreduce NCCL takes allocate nothing of ours after
 * NCCL's answer (tried: no sweep step). */
static ncclComm_t initArmed(int k, int blocking) {
  armAfterReturnOf("ncclCommInitRankConfig", k);
  ncclResult_t result;
  ncclComm_t comm = initWithBlocking(blocking, &result);
  CHECK(result == (blocking ? ncclSuccess : ncclInProgress), "allocation %d failing after NCCL answered a %s init: the program got %d",
        k, blocking ? "blocking" : "non-blocking", result);
  return comm;
}

static void useAndDestroy(int k, ncclComm_t comm) {
  CHECK(pollReady(comm) == ncclSuccess, "allocation %d failing: the communicator never became ready", k);
  float x = 1.0f;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allocation %d: allreduce failed", k);
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "allocation %d: destroy failed", k);
}

static int blockingInitStep(int k) {
  ncclComm_t comm = initArmed(k, 1);
  const int fired = disarm();
  useAndDestroy(k, comm);
  return fired;
}

static int nonBlockingInitStep(int k) {
  ncclComm_t comm = initArmed(k, 0);
  const int fired = disarm();
  useAndDestroy(k, comm);
  return fired;
}

/* ncclCommInitAll: NCCL created the communicators; the answer must stand (a program told it
 * failed would leak them, or destroy them twice). */
static int initAllStep(int k) {
  ncclComm_t comms[2] = {NULL, NULL};
  armAfterReturnOf("ncclCommInitAll", k);
  const ncclResult_t result = ncclCommInitAll(comms, 2, NULL);
  const int fired = disarm();
  CHECK(result == ncclSuccess, "allocation %d failing after NCCL answered ncclCommInitAll: the program got %d", k, result);
  for (int i = 0; i < 2; ++i) {
    if (comms[i] != NULL) useAndDestroy(k, comms[i]);
  }
  return fired;
}

/* A group with a blocking init and a blocking split: a failure in our work at its end must not
 * leave its communicators queued for the thread's next, unrelated group end (their set-up
 * exchange would run there, where no peer takes part). */
static ncclComm_t gGroupParent;
static int groupedSplitStep(int k) {
  CHECK(ncclGroupStart() == ncclSuccess, "group start failed");
  ncclResult_t result;
  ncclComm_t comm = initWithBlocking(1, &result);
  CHECK(ncclCommSplit(gGroupParent, 0, 0, &gSlots[k], NULL) == ncclSuccess, "grouped split failed");
  armAfterReturnOf("ncclGroupEnd", k);
  const ncclResult_t ended = ncclGroupEnd();
  const int fired = disarm();
  CHECK(ended == ncclSuccess, "allocation %d failing after NCCL answered the group end: the program got %d", k, ended);
  const int knownAfterItsGroup = infoOf(comm).known;
  CHECK(ncclGroupStart() == ncclSuccess && ncclGroupEnd() == ncclSuccess, "an empty group failed");
  CHECK(infoOf(comm).known == knownAfterItsGroup,
        "allocation %d failing at a group's end: its init was set up at the thread's next, unrelated group end", k);
  useAndDestroy(k, comm);
  ncclComm_t child = __atomic_load_n(&gSlots[k], __ATOMIC_ACQUIRE);
  if (child != NULL) useAndDestroy(k, child);
  return fired;
}

static int groupedInitStep(int k) {
  CHECK(ncclGroupStart() == ncclSuccess, "group start failed");
  ncclResult_t result;
  ncclComm_t comm = initWithBlocking(1, &result);
  armAfterReturnOf("ncclGroupEnd", k);
  const ncclResult_t ended = ncclGroupEnd();
  const int fired = disarm();
  CHECK(ended == ncclSuccess, "allocation %d failing after NCCL answered the group end: the program got %d", k, ended);
  useAndDestroy(k, comm);
  return fired;
}

/* The set-up thread's sweeps: the k-th C++ allocation of the next thread to start allocating (the
 * helper thread that sets up a non-blocking batch, plugin/comm/deferred_setup.cc) fails. For
 * every k: the program's poll ends (ready within pollReady's 10 s, never in progress for ever),
 * the set-up took part in both of its exchange rounds or in none (a rank that stops between them
 * leaves its peers in round 2, which has no deadline, for ever; one that never began is a peer
 * gone, which their round 1 gives up on after NCCL_LAMPORT_TIMEOUT_MS), every communicator has
 * an entry, its allreduce is answered where the entry routes it, and its destroy leaves nothing. */
enum { kExchangeRounds = 2 };
static int gStepsWithoutRounds; /* steps whose set-up failed before its first round */

/* An allreduce answered, and routed as the plugin says it routes it: NCCL gets it exactly where
 * the path is NCCL's, and the communicator's counters agree. */
static void allReduceAsRouted(int k, ncclComm_t comm) {
  ncclResult_t (*pathOf)(ncclComm_t, size_t, ncclDataType_t, ncclRedOp_t, ncclLamportPath_t*) =
      (ncclResult_t(*)(ncclComm_t, size_t, ncclDataType_t, ncclRedOp_t, ncclLamportPath_t*))dlsym(
          RTLD_DEFAULT, "ncclLamportGetAllReducePath");
  ncclLamportPath_t path = ncclLamportPathNccl;
  CHECK(pathOf != NULL && pathOf(comm, 1, ncclFloat32, ncclSum, &path) == ncclSuccess, "allocation %d: no path", k);
  const ncclLamportCommInfo_t before = infoOf(comm);
  const int ncclBefore = atomic_load(&fakeCounters.allReduceCalls);
  float x = 1.0f;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allocation %d: allreduce failed", k);
  const ncclLamportCommInfo_t after = infoOf(comm);
  const int toNccl = atomic_load(&fakeCounters.allReduceCalls) - ncclBefore;
  CHECK(before.eligible || path == ncclLamportPathNccl, "allocation %d: a communicator not eligible routes to path %d", k,
        (int)path);
  CHECK(toNccl == (path == ncclLamportPathNccl), "allocation %d: NCCL got %d call(s) of an allreduce on path %d", k,
        toNccl, (int)path);
  CHECK(after.ncclCalls - before.ncclCalls == (uint64_t)toNccl && after.lamportCalls - before.lamportCalls == (uint64_t)!toNccl,
        "allocation %d: the entry counted %llu NCCL and %llu Lamport call(s), NCCL got %d", k,
        (unsigned long long)(after.ncclCalls - before.ncclCalls),
        (unsigned long long)(after.lamportCalls - before.lamportCalls), toNccl);
}

/* The end of a set-up-thread step for the n communicators of one batch (and the parent of a split
 * child, destroyed last): returns whether the armed allocation was reached. */
static int endSetUpThreadStep(int k, ncclComm_t* comms, int n, int roundsBefore, ncclComm_t parent) {
  for (int i = 0; i < n; ++i) {
    CHECK(pollReady(comms[i]) == ncclSuccess, "allocation %d of the set-up thread failing: communicator %d never ready",
          k, i);
  }
  const int threads = allocFaultThreadsStarted();
  CHECK(threads == 1, "allocation %d: %d thread(s) started allocating (the set-up thread alone, armed, expected)", k,
        threads);
  const int rounds = atomic_load(&fakeCounters.helperGroupEnds) - roundsBefore;
  CHECK(rounds == 0 || rounds == kExchangeRounds,
        "allocation %d of the set-up thread failing: it took part in %d exchange round(s) of %d (its peers wait in the "
        "next for ever)", k, rounds, kExchangeRounds);
  if (rounds == 0) ++gStepsWithoutRounds;
  for (int i = 0; i < n; ++i) {
    CHECK(infoOf(comms[i]).known == 1, "allocation %d of the set-up thread failing: communicator %d has no entry", k, i);
    allReduceAsRouted(k, comms[i]);
  }
  for (int i = 0; i < n; ++i) {
    CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "allocation %d: destroy of communicator %d failed", k, i);
    CHECK(infoOf(comms[i]).known == 0, "allocation %d: communicator %d's entry outlived its destroy", k, i);
  }
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "allocation %d: destroy of the parent failed", k);
  const int fired = allocFaultFired(); /* the set-up has ended: the destroys joined it */
  allocFaultArmNextThread(0);
  return fired;
}

/* (a) A non-blocking init: its set-up thread starts in the init's wrapper. */
static int setUpThreadOfInitStep(int k) {
  const int roundsBefore = atomic_load(&fakeCounters.helperGroupEnds);
  allocFaultArmNextThread(k);
  ncclComm_t comm = initNonBlocking();
  return endSetUpThreadStep(k, &comm, 1, roundsBefore, NULL);
}

/* (b) A non-blocking split's child, written late and collected by the parent's poll, which starts
 * its set-up thread. */
static int setUpThreadOfChildStep(int k) {
  ncclComm_t parent = readyParent();
  CHECK(ncclCommSplit(parent, 0, 0, &gSlots[k], NULL) == ncclSuccess, "split failed");
  ncclComm_t child = waitForChild(&gSlots[k]);
  CHECK(child != NULL, "the stand-in never wrote the child");
  if (child == NULL) return 0;
  const int roundsBefore = atomic_load(&fakeCounters.helperGroupEnds);
  allocFaultArmNextThread(k);
  ncclResult_t state = ncclInternalError;
  CHECK(ncclCommGetAsyncError(parent, &state) == ncclSuccess && state == ncclSuccess,
        "allocation %d: the parent's poll got state %d", k, state);
  CHECK(infoOf(child).known == 1, "allocation %d: the parent's poll did not collect the child", k);
  return endSetUpThreadStep(k, &child, 1, roundsBefore, parent);
}

/* (c) Two non-blocking inits in one group: one set-up thread for both, started at the group's end. */
static int setUpThreadOfGroupStep(int k) {
  const int roundsBefore = atomic_load(&fakeCounters.helperGroupEnds);
  allocFaultArmNextThread(k);
  ncclComm_t comms[2];
  CHECK(ncclGroupStart() == ncclSuccess, "group start failed");
  for (int i = 0; i < 2; ++i) {
    ncclResult_t result;
    comms[i] = initWithBlocking(0, &result);
    CHECK(result == ncclInProgress, "grouped non-blocking init returned %d", result);
  }
  const ncclResult_t ended = ncclGroupEnd();
  CHECK(ended == ncclSuccess || ended == ncclInProgress, "the group end of two non-blocking inits returned %d", ended);
  return endSetUpThreadStep(k, comms, 2, roundsBefore, NULL);
}

static void allocFailsAfterParentPoll(void) { sweep(parentPollStep, "NCCL's answer to the parent's poll"); }
static void allocFailsInChildPoll(void) { sweep(childPollStep, "the start of the child's first poll"); }
static void allocFailsAfterSplit(void) { sweep(splitStep, "NCCL's answer to the split"); }
static void allocFailsAfterParentPollThenParentAbort(void) {
  sweep(parentPollThenAbortStep, "NCCL's answer to the parent's poll, then the parent's abort");
}
static void allocFailsInChildPollThenParentAbort(void) {
  sweep(childPollThenAbortStep, "the start of the child's first poll, then the parent's abort");
}
static void allocFailsAtSplitEntry(void) { sweepAtLeast(splitEntryStep, "the split's entry", 0); }
static void allocFailsAtPendingAllReduceEntry(void) {
  sweepAtLeast(pendingAllReduceEntryStep, "the entry of an allreduce on a pending communicator", 0);
}
static void allocFailsInRefusedDestroyOfChild(void) { sweep(refusedDestroyStep, "the entry of a refused destroy of a child"); }
static void allocFailsAfterInitAll(void) { sweep(initAllStep, "NCCL's answer to ncclCommInitAll"); }
static void allocFailsAfterGroupedSplit(void) {
  ncclResult_t result;
  gGroupParent = initWithBlocking(1, &result);
  sweep(groupedSplitStep, "NCCL's answer to the group end of an init and a split");
  CHECK(ncclCommDestroy(gGroupParent) == ncclSuccess, "destroy of the grouped split's parent failed");
}
static void allocFailsAfterBlockingInit(void) { sweep(blockingInitStep, "NCCL's answer to a blocking init"); }
static void allocFailsAfterNonBlockingInit(void) { sweep(nonBlockingInitStep, "NCCL's answer to a non-blocking init"); }
static void allocFailsAfterGroupedInit(void) { sweep(groupedInitStep, "NCCL's answer to the group end of an init"); }
static void sweepSetUpThread(int (*step)(int k), const char* where) {
  sweep(step, where);
  printf("%d of them before the set-up's first exchange round\n", gStepsWithoutRounds);
}
static void allocFailsInSetUpThreadOfInit(void) {
  sweepSetUpThread(setUpThreadOfInitStep, "the start of a non-blocking init's set-up thread");
}
static void allocFailsInSetUpThreadOfChild(void) {
  sweepSetUpThread(setUpThreadOfChildStep, "the start of the set-up thread of a split child collected at its parent's poll");
}
static void allocFailsInSetUpThreadOfGroup(void) {
  sweepSetUpThread(setUpThreadOfGroupStep, "the start of the set-up thread of a group of two non-blocking inits");
}

int main(int argc, char** argv) {
  gMainThread = pthread_self();
  if (!allocFaultsAvailable()) {
    printf("SKIPPED: this build's allocator cannot be replaced (a sanitizer's runtime owns operator new)\n");
    return kSkipped;
  }
  atomic_store(&fakeReturnHook, armOnReturn);
  static const struct LifecycleScenario scenarios[] = {
      {"alloc-fails-after-parent-poll", allocFailsAfterParentPoll},
      {"alloc-fails-in-child-poll", allocFailsInChildPoll},
      {"alloc-fails-after-split", allocFailsAfterSplit},
      {"alloc-fails-after-parent-poll-then-parent-abort", allocFailsAfterParentPollThenParentAbort},
      {"alloc-fails-in-child-poll-then-parent-abort", allocFailsInChildPollThenParentAbort},
      {"alloc-fails-at-split-entry", allocFailsAtSplitEntry},
      {"alloc-fails-at-pending-allreduce-entry", allocFailsAtPendingAllReduceEntry},
      {"alloc-fails-after-initall", allocFailsAfterInitAll},
      {"alloc-fails-in-refused-destroy-of-child", allocFailsInRefusedDestroyOfChild},
      {"alloc-fails-after-grouped-split", allocFailsAfterGroupedSplit},
      {"alloc-fails-after-blocking-init", allocFailsAfterBlockingInit},
      {"alloc-fails-after-nonblocking-init", allocFailsAfterNonBlockingInit},
      {"alloc-fails-after-grouped-init", allocFailsAfterGroupedInit},
      {"alloc-fails-in-setup-thread-of-nonblocking-init", allocFailsInSetUpThreadOfInit},
      {"alloc-fails-in-setup-thread-of-split-child", allocFailsInSetUpThreadOfChild},
      {"alloc-fails-in-setup-thread-of-grouped-init", allocFailsInSetUpThreadOfGroup},
  };
  return runLifecycleScenario(argc, argv, scenarios, sizeof(scenarios) / sizeof(scenarios[0]));
}
