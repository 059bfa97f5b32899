/* Non-blocking communicators and the blocking rule, on the CPU: a program linked against a
 * stand-in NCCL (tests/shim/lifecycle_fake_nccl.c) with libnccl-lamport.so preloaded. One
 * scenario per run (argv[1]); exit status 0 only if every check passed. Several threads at once,
 * and splits inside a group: tests/shim/lifecycle_concurrency_scenarios.c.
 *
 * No GPU here, so the set-up never makes a communicator eligible; what is checked is what the
 * interposer does around NCCL: which NCCL answer the program gets, whether the set-up's exchange
 * runs (on every rank, else the peers' exchange has no partner), and that nothing of ours calls
 * NCCL on a communicator that is gone or at the same time as another thread. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tests/shim/lifecycle_scenario_support.h"

/* Ready, then set up: the exchange runs on the set-up thread; the reference for the others. */
static void readyThenDestroy(void) {
  ncclComm_t comm = initNonBlocking();
  CHECK(pollReady(comm) == ncclSuccess, "never ready");
  CHECK(atomic_load(&fakeCounters.helperGroupEnds) > 0, "the set-up exchange did not run");
  CHECK(infoOf(comm).known == 1, "the communicator is not registered");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed");
  CHECK(infoOf(comm).known == 0, "still registered after destroy");
}

/* NCCL refuses to destroy a communicator still in progress: ours must not change either, and the
 * set-up must still run once NCCL is ready (the peers run theirs). */
static void destroyWhileInProgress(void) {
  ncclComm_t comm = initNonBlocking();
  CHECK(ncclCommDestroy(comm) == ncclInvalidArgument, "destroy of a communicator in progress did not get NCCL's answer");
  CHECK(infoOf(comm).known == 1, "our entry was dropped although NCCL kept the communicator");
  CHECK(pollReady(comm) == ncclSuccess, "never ready after the refused destroy");
  CHECK(atomic_load(&fakeCounters.helperGroupEnds) > 0, "the set-up exchange did not run after the refused destroy");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy of the ready communicator failed");
}

/* An allreduce before NCCL is ready gets NCCL's own answer: the call reaches NCCL (serialised
 * with our set-up thread), which records the error as it documents. */
static void allReduceWhileInProgress(void) {
  ncclComm_t comm = initNonBlocking();
  float x = 1.0f;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidArgument,
        "allreduce on a communicator in progress did not get ncclInvalidArgument");
  CHECK(atomic_load(&fakeCounters.allReduceCalls) == 1, "the call did not reach NCCL (%d calls)",
        atomic_load(&fakeCounters.allReduceCalls));
  CHECK(pollReady(comm) == ncclSuccess, "never ready");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed");
}

static ncclComm_t gAbortTarget;
static void* abortLater(void* unused) {
  (void)unused;
  usleep(100 * 1000);
  ncclCommAbort(gAbortTarget);
  return NULL;
}

/* NCCL is ready, our set-up is slow (FAKE_HELPER_DESCRIBE_MS): an allreduce waits for it, and
 * another thread aborts the communicator meanwhile. The waiting call must not reach NCCL. */
static void abortWhileCallWaits(void) {
  gAbortTarget = initNonBlocking();
  usleep(80 * 1000); /* NCCL ready after 30 ms; our set-up then sleeps in its first call */
  pthread_t aborter;
  pthread_create(&aborter, NULL, abortLater, NULL);
  float x = 1.0f;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  const ncclResult_t result = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, gAbortTarget, NULL);
  const double waited = secondsSince(&start);
  pthread_join(aborter, NULL);
  CHECK(result == ncclInvalidArgument, "allreduce on a communicator aborted while it waited returned %d", result);
  CHECK(atomic_load(&fakeCounters.allReduceCalls) == 0, "the waiting allreduce reached NCCL after the abort");
  CHECK(waited < 10.0, "the allreduce waited %.1f s", waited);
}

/* Two non-blocking communicators created in one group share one set-up; aborting one while NCCL
 * still has them in progress stops the set-up for that one only: the other is set up with its
 * peers (their exchange includes it) and settles with its own verdict, not pending forever.
 * No GPU here: that verdict is OFF, for a reason of its own. */
static void abortOneOfABatch(void) {
  ncclGroupStart();
  ncclComm_t aborted = initNonBlocking();
  ncclComm_t sibling = initNonBlocking();
  ncclGroupEnd();
  CHECK(ncclCommAbort(aborted) == ncclSuccess, "abort failed");
  CHECK(pollReady(sibling) == ncclSuccess, "the sibling never became ready");
  usleep(50 * 1000);
  const ncclLamportCommInfo_t info = infoOf(sibling);
  CHECK(info.known == 1 && info.eligible == 0, "sibling: known %d eligible %d", info.known, info.eligible);
  CHECK(strstr(info.reason, "aborted") == NULL && strstr(info.reason, "stopped") == NULL &&
            strstr(info.reason, "cancelled") == NULL && info.reason[0] != '\0',
        "the sibling's set-up did not run to its own verdict: \"%s\"", info.reason);
  CHECK(infoOf(aborted).known == 0, "the aborted communicator is still registered");
  CHECK(ncclCommDestroy(sibling) == ncclSuccess, "destroy of the sibling failed");
}

/* NCCL_COMM_BLOCKING=0/1 overrides config.blocking (NCCL 2.28); the test sets it to the opposite
 * of `configBlocking`. Blocking: ready at once and set up on the caller's thread, never "in
 * progress" in our answer. Non-blocking: the set-up waits for NCCL on its own thread instead of
 * running inside init on a communicator still in progress. */
static void environmentOverridesConfig(int configBlocking) {
  const int blocking = !configBlocking;
  ncclResult_t result;
  ncclComm_t comm = initWithBlocking(configBlocking, &result);
  CHECK(result == (blocking ? ncclSuccess : ncclInProgress), "init returned %d", result);
  ncclResult_t state = ncclInternalError;
  CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == (blocking ? ncclSuccess : ncclInProgress),
        "state %d right after init", state);
  CHECK(pollReady(comm) == ncclSuccess, "never ready");
  usleep(50 * 1000);
  if (blocking) {
    CHECK(atomic_load(&fakeCounters.helperCalls) == 0, "a set-up thread called NCCL %d time(s) for a blocking comm",
          atomic_load(&fakeCounters.helperCalls));
  } else {
    CHECK(atomic_load(&fakeCounters.helperGroupEnds) > 0, "the set-up exchange did not run on the set-up thread");
  }
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed");
}

/* What NCCL applies can differ from what the environment says now (NCCL keeps its first reading of
 * NCCL_COMM_BLOCKING, and an environment plugin may supply it): run with NCCL_COMM_BLOCKING=1 that
 * the stand-in ignores (FAKE_IGNORE_COMM_BLOCKING=1). An init NCCL answers with ncclInProgress is
 * non-blocking whatever the environment says: its set-up waits for NCCL on the set-up thread. Before,
 * it ran inside init on a communicator still in progress. */
static void inProgressMeansNonBlocking(void) {
  ncclResult_t result;
  ncclComm_t comm = initWithBlocking(0, &result);
  CHECK(result == ncclInProgress, "init returned %d; the stand-in must answer in progress", result);
  CHECK(pollReady(comm) == ncclSuccess, "never ready");
  usleep(50 * 1000);
  CHECK(atomic_load(&fakeCounters.helperGroupEnds) > 0, "the set-up exchange did not run on the set-up thread");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed");
}

static void environmentMakesBlocking(void) { environmentOverridesConfig(0); }
static void environmentMakesNonBlocking(void) { environmentOverridesConfig(1); }

/* Children of a non-blocking parent: without a config they copy the parent's mode; with a config
 * that leaves `blocking` undefined they are blocking (NCCL 2.28). */
static void splitChildModes(void) {
  ncclComm_t parent = initNonBlocking();
  CHECK(pollReady(parent) == ncclSuccess, "parent never ready");
  ncclComm_t inherited = NULL, configured = NULL;
  CHECK(ncclCommSplit(parent, 0, 0, &inherited, NULL) == ncclInProgress, "split without config: not in progress");
  ncclResult_t state = ncclInternalError;
  ncclCommGetAsyncError(inherited, &state);
  CHECK(state == ncclInProgress, "the config-less child reported %d right after the split (not non-blocking)", state);
  CHECK(pollReady(inherited) == ncclSuccess, "config-less child never ready");

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;  // blocking left undefined
  CHECK(ncclCommSplit(parent, 0, 0, &configured, &config) == ncclSuccess, "split with a config: not ready at once");
  state = ncclInternalError;
  ncclCommGetAsyncError(configured, &state);
  CHECK(state == ncclSuccess, "the child with a config reported %d right after the split (not blocking)", state);
  CHECK(infoOf(configured).known == 1, "the blocking child is not registered");
  ncclCommDestroy(configured);
  ncclCommDestroy(inherited);
  ncclCommDestroy(parent);
}

/* Aborts a ready non-blocking communicator whose set-up has finished; inside the abort the
 * stand-in hands its address to a newcomer that another thread creates (FAKE_ABORT_REUSES_HANDLE).
 * The newcomer (`what`) must keep its own entry and get its own set-up exchange. */
static void abortAndCheckTheNewcomer(const char* what) {
  ncclComm_t comm = initNonBlocking();
  CHECK(pollReady(comm) == ncclSuccess, "never ready");
  usleep(50 * 1000); /* its set-up has finished */
  const int exchangesBefore = atomic_load(&fakeCounters.helperGroupEnds);
  CHECK(ncclCommAbort(comm) == ncclSuccess, "abort failed");
  ncclComm_t reused = (ncclComm_t)atomic_load(&fakeCounters.reusedComm);
  CHECK(reused == comm, "the %s did not get the aborted handle (%p, %p)", what, (void*)reused, (void*)comm);
  if (reused == NULL) return;
  CHECK(infoOf(reused).known == 1, "the %s has no entry: the abort dropped it, or its set-up was skipped", what);
  CHECK(pollReady(reused) == ncclSuccess, "the %s never became ready", what);
  usleep(50 * 1000);
  CHECK(atomic_load(&fakeCounters.helperGroupEnds) > exchangesBefore, "the %s's set-up exchange did not run", what);
  CHECK(infoOf(reused).known == 1, "the %s is not registered after its set-up", what);
  CHECK(ncclCommDestroy(reused) == ncclSuccess, "destroy of the %s failed", what);
}

/* NCCL frees an aborted communicator's handle, and another thread's new communicator may get the
 * same address before our abort wrapper returns (FAKE_ABORT_REUSES_HANDLE=1 makes the fake do
 * that): the abort must not drop the newcomer's entry or set-up, looked up by that handle. */
static void abortThenHandleReused(void) { abortAndCheckTheNewcomer("communicator created during the abort"); }

/* As abort-then-handle-reused, for a non-blocking split's child that NCCL writes late at the freed
 * address and another thread's poll of its parent collects, all before our abort wrapper has taken
 * out the aborted communicator's entry (FAKE_ABORT_REUSES_HANDLE=split): that entry, still under
 * the handle, must not pass for the child's own (before, the child was never set up). */
static void abortThenSplitChildReusesHandle(void) {
  ncclComm_t parent = initNonBlocking();
  CHECK(pollReady(parent) == ncclSuccess, "parent never ready");
  atomic_store(&fakeSplitParentDuringAbort, parent);
  abortAndCheckTheNewcomer("split child collected during the abort");
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "destroy of the parent failed");
}

/* As abort-then-handle-reused, and the newcomer's pending set-up must survive too: a destroy
 * while it is still in progress (FAKE_READY_MS long) gets NCCL's refusal and keeps our entry,
 * which it cannot if the abort detached the newcomer's set-up by handle. */
static void abortThenHandleReusedKeepsSetup(void) {
  ncclComm_t comm = initNonBlocking();
  CHECK(pollReady(comm) == ncclSuccess, "never ready");
  CHECK(ncclCommAbort(comm) == ncclSuccess, "abort failed");
  ncclComm_t reused = (ncclComm_t)atomic_load(&fakeCounters.reusedComm);
  CHECK(reused == comm, "no reuse");
  if (reused == NULL) return;
  CHECK(ncclCommDestroy(reused) == ncclInvalidArgument, "destroy of the in-progress newcomer not refused");
  CHECK(infoOf(reused).known == 1, "the newcomer lost its entry on a refused destroy: its set-up was detached");
  CHECK(pollReady(reused) == ncclSuccess, "newcomer never ready");
  CHECK(ncclCommDestroy(reused) == ncclSuccess, "destroy failed");
}

/* NCCL 2.28's destroy checks readiness itself: if the init job ends between our check (not ready)
 * and NCCL's, NCCL destroys the communicator inside waitForDeferredSetup's kAnswered branch and
 * may hand its address to another thread's new communicator before our wrapper returns. */
static void destroyRacesReadyThenHandleReused(void) {
  ncclComm_t comm = initNonBlocking();
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy (NCCL saw it ready) failed");
  ncclComm_t reused = (ncclComm_t)atomic_load(&fakeCounters.reusedComm);
  CHECK(reused == comm, "no reuse (%p, %p)", (void*)reused, (void*)comm);
  if (reused == NULL) return;
  CHECK(infoOf(reused).known == 1, "the communicator created during the destroy lost its entry");
  CHECK(pollReady(reused) == ncclSuccess, "newcomer never ready");
  CHECK(infoOf(reused).known == 1, "newcomer not registered after its set-up");
  CHECK(ncclCommDestroy(reused) == ncclSuccess, "destroy of the newcomer failed");
}

/* A ready non-blocking parent in *parent and the child of its split that NCCL wrote late
 * (FAKE_SPLIT_WRITES_CHILD_MS) into *slot, which nothing of ours has collected yet; NULL if the
 * stand-in never wrote it. */
static ncclComm_t uncollectedChild(ncclComm_t* parent, ncclComm_t* slot) {
  *parent = initNonBlocking();
  CHECK(pollReady(*parent) == ncclSuccess, "parent never ready");
  CHECK(ncclCommSplit(*parent, 0, 0, slot, NULL) == ncclSuccess, "split failed (NCCL answers a non-blocking split ncclSuccess)");
  ncclComm_t child = waitForChild(slot);
  CHECK(child != NULL, "the fake never wrote the child");
  return child;
}

/* The uncollected child aborted, or destroyed (NCCL's own readiness check inside the destroy polls
 * it): no set-up may start for it then or at a later poll of its parent (checkNothingWrong sees
 * any NCCL call on the freed communicator; before the fix, the destroyed child's set-up made 7). */
static ncclComm_t gLateChild; /* written by the fake's thread */
static void tearDownUncollectedChild(ncclResult_t (*tearDown)(ncclComm_t), const char* how) {
  ncclComm_t parent;
  ncclComm_t child = uncollectedChild(&parent, &gLateChild);
  if (child == NULL) return;
  CHECK(tearDown(child) == ncclSuccess, "%s of the uncollected child failed", how);
  ncclResult_t state = ncclInProgress;
  CHECK(ncclCommGetAsyncError(parent, &state) == ncclSuccess && state == ncclSuccess, "parent state %d", state);
  usleep(100 * 1000); /* a set-up wrongly started for the freed child would call NCCL by now */
  CHECK(infoOf(child).known == 0, "the child has an entry after its %s", how);
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "destroy of the parent failed");
}

static void abortUncollectedChild(void) { tearDownUncollectedChild(ncclCommAbort, "abort"); }
static void destroyUncollectedChild(void) { tearDownUncollectedChild(ncclCommDestroy, "destroy"); }

/* The uncollected child finalized: its set-up must run first, as for any communicator with a
 * set-up pending (before, it started later, from NCCL's own readiness check inside the finalize,
 * and our set-up thread called NCCL on the finalized communicator: checkNothingWrong counts such
 * calls). */
static ncclComm_t gFinalizedChild; /* written by the fake's thread */
static void finalizeUncollectedChild(void) {
  ncclComm_t parent;
  ncclComm_t child = uncollectedChild(&parent, &gFinalizedChild);
  if (child == NULL) return;
  const ncclResult_t finalized = ncclCommFinalize(child);
  CHECK(finalized == ncclSuccess, "finalize of the uncollected child returned %d, NCCL alone gives 0", finalized);
  usleep(100 * 1000); /* a set-up started after the finalize would call NCCL by now */
  CHECK(infoOf(child).known == lamportActive(), "the finalized child has no entry");
  CHECK(ncclCommDestroy(child) == ncclSuccess, "destroy of the child failed");
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "destroy of the parent failed");
}

/* The set-up throws (FAKE_THROW_IN=ncclCommUserRank: the first NCCL call of every set-up): the
 * exception must stay inside libnccl-lamport.so (else std::terminate ends this process), init
 * returns NCCL's answer and the communicator works on NCCL. */
static void throwInBlockingSetup(void) {
  ncclResult_t result;
  ncclComm_t comm = initWithBlocking(1, &result);
  CHECK(result == ncclSuccess, "blocking init returned %d, NCCL said ncclSuccess", result);
  float x = 1.0f;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce failed");
  CHECK(atomic_load(&fakeCounters.allReduceCalls) == 1, "the allreduce did not reach NCCL");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed");
}

/* The same on the set-up thread of a non-blocking communicator: it becomes ready, on NCCL. */
static void throwInDeferredSetup(void) {
  ncclComm_t comm = initNonBlocking();
  CHECK(pollReady(comm) == ncclSuccess, "never ready after the set-up threw");
  CHECK(infoOf(comm).eligible == 0, "eligible after a failed set-up");
  float x = 1.0f;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce failed");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed");
}

/* Defect 6 of issue 10 (plugin/comm/deferred_setup.cc, waitForDeferredSetup): a call that found
 * the set-up not yet past NCCL's readiness, but takes the set-up's mutex only after the set-up
 * thread saw NCCL ready and began its exchange, must wait for the set-up and be routed after it,
 * not be handed to NCCL inside the wait: NCCL then answers "in progress" because of our exchange,
 * not because of its init. The stand-in's hook makes that order certain, on the set-up thread: in
 * its readiness poll (holding the mutex) it waits until the main thread is blocked on that mutex
 * inside ncclAllReduce and parks the main thread in a signal handler; then NCCL reports ready, and
 * at the exchange's first ncclGroupEnd the hook makes the communicator busy (until the allreduce
 * has returned) and lets the main thread go on, which can only take the mutex after that. */
static ncclComm_t _Atomic gRaceComm;
static atomic_int gRacePhase; /* 0 armed, 1 caller parked and NCCL ready, 2 exchange begun */
static atomic_int gHelperInside, gCallerCalling, gCallerParked, gResumeCaller;
static pid_t gCallerTid;
static pthread_t gCaller;
static const char* _Atomic gRaceTrouble;

static int waitFlag(atomic_int* flag, int seconds) {
  const struct timespec tick = {0, 1000 * 1000};
  for (int i = 0; i < seconds * 1000 && !atomic_load(flag); ++i) nanosleep(&tick, NULL);
  return atomic_load(flag);
}

/* The signal handler that parks the main thread (nanosleep is async-signal-safe). */
static void parkCaller(int sig) {
  (void)sig;
  atomic_store(&gCallerParked, 1);
  waitFlag(&gResumeCaller, 20);
}

/* The main thread's scheduler state: 'S' while it waits for a lock (or sleeps). */
static char callerState(void) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)gCallerTid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return '?';
  const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close = strrchr(buf, ')');
  return close != NULL && close[1] == ' ' ? close[2] : '?';
}

/* Blocked for 20 ms in a row: inside the allreduce it can only be waiting for the set-up's mutex,
 * which this thread holds (no other lock on that path is contended). */
static int callerBlocked(void) {
  const struct timespec tick = {0, 1000 * 1000};
  for (int run = 0, i = 0; i < 10000; ++i) {
    run = callerState() == 'S' ? run + 1 : 0;
    if (run >= 20) return 1;
    nanosleep(&tick, NULL);
  }
  return 0;
}

static void raceHook(const char* function, ncclComm_t comm) {
  ncclComm_t target = atomic_load(&gRaceComm);
  if (target == NULL) return;
  if (atomic_load(&gRacePhase) == 0 && comm == target && strcmp(function, "ncclCommGetAsyncError") == 0) {
    /* The set-up's readiness poll, under its mutex. */
    atomic_store(&gHelperInside, 1);
    if (!waitFlag(&gCallerCalling, 10) || !callerBlocked()) {
      atomic_store(&gRaceTrouble, "the main thread never blocked on the set-up's mutex");
      atomic_store(&gRacePhase, 3);
      return;
    }
    pthread_kill(gCaller, SIGUSR1);
    if (!waitFlag(&gCallerParked, 10)) {
      atomic_store(&gRaceTrouble, "the main thread could not be parked");
      atomic_store(&gRacePhase, 3);
      atomic_store(&gResumeCaller, 1);
      return;
    }
    fakeCommMakeReady(target); /* this very poll sees NCCL ready */
    atomic_store(&gRacePhase, 1);
  } else if (atomic_load(&gRacePhase) == 1 && comm == NULL && strcmp(function, "ncclGroupEnd") == 0) {
    /* The set-up's exchange is being enqueued on the communicator (the mutex is still held). */
    fakeCommBusyFor(target, 3600 * 1000);
    atomic_store(&gRacePhase, 2);
    atomic_store(&gResumeCaller, 1);
  }
}

static void callRacesExchangeStart(void) {
  struct sigaction park;
  memset(&park, 0, sizeof(park));
  park.sa_handler = parkCaller;
  park.sa_flags = SA_RESTART;
  sigemptyset(&park.sa_mask);
  sigaction(SIGUSR1, &park, NULL);
  gCaller = pthread_self();
  gCallerTid = (pid_t)syscall(SYS_gettid);
  ncclComm_t comm = initNonBlocking(); /* FAKE_READY_MS: never ready on its own */
  atomic_store(&fakeHelperCallHook, raceHook);
  atomic_store(&gRaceComm, comm);
  /* The set-up thread holds its mutex from now on, so the allreduce blocks on it. */
  CHECK(waitFlag(&gHelperInside, 10), "the set-up never polled NCCL's readiness");
  atomic_store(&gCallerCalling, 1);
  float x = 1.0f;
  ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL); /* NCCL's answer: busy, so ncclInvalidArgument */
  atomic_store(&fakeHelperCallHook, NULL);
  fakeCommBusyFor(comm, 0);
  const char* trouble = atomic_load(&gRaceTrouble);
  CHECK(trouble == NULL, "%s", trouble);
  CHECK(atomic_load(&gRacePhase) == 2, "the set-up never began its exchange (phase %d)", atomic_load(&gRacePhase));
  CHECK(atomic_load(&fakeCounters.allReduceCalls) == 1, "%d allreduce(s) reached NCCL, not 1",
        atomic_load(&fakeCounters.allReduceCalls));
  /* Routed after the set-up: counted in our entry. Handed to NCCL inside the wait: not counted. */
  CHECK(infoOf(comm).ncclCalls == 1,
        "the allreduce was handed to NCCL while it waited for the set-up, after the set-up had begun its exchange");
  CHECK(pollReady(comm) == ncclSuccess, "never ready");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed");
}

/* ---- Tear-down that NCCL refuses, or of a null communicator: what of ours must survive. ---- */
/* NCCL refuses to destroy a ready non-blocking communicator that still has an operation in
 * progress (ncclInvalidArgument, as for one whose init is in progress): the communicator lives
 * on, so our entry must too (the same promise destroy-in-progress checks for the init case). */
static void destroyRefusedWhileBusy(void) {
  ncclComm_t comm = initNonBlocking();
  CHECK(pollReady(comm) == ncclSuccess, "never ready");
  usleep(50 * 1000); /* our set-up has finished */
  const int knownBefore = infoOf(comm).known;
  CHECK(knownBefore == lamportActive(), "known %d before the destroy", knownBefore);
  fakeCommBusyFor(comm, 300); /* a non-blocking operation NCCL still has in progress */
  const ncclResult_t refused = ncclCommDestroy(comm);
  CHECK(refused == ncclInvalidArgument, "destroy of a busy communicator returned %d, NCCL says %d", refused,
        ncclInvalidArgument);
  CHECK(infoOf(comm).known == knownBefore,
        "NCCL refused the destroy and kept the communicator, but our entry was dropped (known %d -> %d)", knownBefore,
        infoOf(comm).known);
  CHECK(pollReady(comm) == ncclSuccess, "never ready after the refused destroy");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "the second destroy failed");
}

/* A ready non-blocking parent and a non-blocking split of it whose child NCCL writes into *slot
 * later, from its own thread (FAKE_SPLIT_WRITES_CHILD_MS); the parent. */
static ncclComm_t readyParentWithLateSplit(ncclComm_t* slot) {
  ncclComm_t parent = initNonBlocking();
  CHECK(pollReady(parent) == ncclSuccess, "parent never ready");
  usleep(50 * 1000); /* our set-up of the parent has finished */
  CHECK(ncclCommSplit(parent, 0, 0, slot, NULL) == ncclSuccess, "split failed (NCCL answers a non-blocking split ncclSuccess)");
  return parent;
}

/* The same refusal while a non-blocking split's job keeps the parent in progress: the child NCCL
 * writes afterwards must still be set up on this rank (its peers set it up), i.e. the refused
 * destroy must not drop the parent's pending child. FAKE_SPLIT_WRITES_CHILD_MS=100. */
static ncclComm_t gSplitChild; /* written by the fake's thread */
static void destroyRefusedKeepsPendingChild(void) {
  ncclComm_t parent = readyParentWithLateSplit(&gSplitChild);
  fakeCommBusyFor(parent, 100); /* NCCL has the parent in progress until the split job ends */
  const ncclResult_t refused = ncclCommDestroy(parent);
  CHECK(refused == ncclInvalidArgument, "destroy of the parent during its split returned %d", refused);
  ncclComm_t child = waitForChild(&gSplitChild);
  CHECK(pollReady(parent) == ncclSuccess, "parent never ready after the split");
  CHECK(child != NULL, "NCCL never wrote the child");
  if (child == NULL) return;
  CHECK(pollReady(child) == ncclSuccess, "child never ready");
  usleep(50 * 1000);
  CHECK(infoOf(child).known == lamportActive(),
        "the child was never set up on this rank (known %d): the refused destroy of its parent dropped it",
        infoOf(child).known);
  CHECK(ncclCommDestroy(child) == ncclSuccess, "destroy of the child failed");
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "destroy of the parent failed");
}

/* ncclCommDestroy(NULL) / ncclCommAbort(NULL) are no-ops in NCCL (ncclSuccess; cleanup code calls
 * them for a NCCL_SPLIT_NOCOLOR child, which is NULL). Made while another communicator's
 * non-blocking split child is pending, they must not drop that child (its slot still holds NULL).
 * FAKE_SPLIT_WRITES_CHILD_MS=100. how: 0 destroy(NULL), 1 abort(NULL), 2 neither (the control). */
static ncclComm_t gNullCaseChild;
static void nullTeardownKeepsPendingChild(int how) {
  ncclComm_t parent = readyParentWithLateSplit(&gNullCaseChild);
  const ncclResult_t r = how == 2 ? ncclSuccess : how == 1 ? ncclCommAbort(NULL) : ncclCommDestroy(NULL);
  CHECK(r == ncclSuccess, "%s(NULL) returned %d", how == 1 ? "ncclCommAbort" : "ncclCommDestroy", r);
  ncclComm_t child = waitForChild(&gNullCaseChild);
  CHECK(child != NULL, "NCCL never wrote the child");
  if (child == NULL) return;
  CHECK(pollReady(parent) == ncclSuccess, "parent state after the split");
  CHECK(pollReady(child) == ncclSuccess, "child never ready");
  usleep(50 * 1000);
  CHECK(infoOf(child).known == lamportActive(),
        "the split's child was never set up on this rank (known %d) after %s", infoOf(child).known,
        how == 2 ? "no null tear-down" : how == 1 ? "ncclCommAbort(NULL)" : "ncclCommDestroy(NULL)");
  CHECK(ncclCommDestroy(child) == ncclSuccess, "destroy of the child failed");
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "destroy of the parent failed");
}
static void destroyNullKeepsPendingChild(void) { nullTeardownKeepsPendingChild(0); }
static void abortNullKeepsPendingChild(void) { nullTeardownKeepsPendingChild(1); }
/* The control: the same without a null tear-down (it passed on the code before the fix too). */
static void lateChildControl(void) { nullTeardownKeepsPendingChild(2); }

/* A non-blocking split's child that NCCL writes late (FAKE_SPLIT_WRITES_CHILD_MS), polled directly
 * as NCCL documents (not through its parent): our wrapper adopts it from the parent's watch list.
 * The only watched child: adopting it empties the parent's list, which adoptPendingChild erased and
 * then advanced the erased iterator over (a read of freed memory: ASan and TSan report it). */
static ncclComm_t gPolledChild; /* written by the fake's thread */
static void pollLateChildDirectly(void) {
  ncclComm_t parent = readyParentWithLateSplit(&gPolledChild);
  ncclComm_t child = waitForChild(&gPolledChild);
  CHECK(child != NULL, "the fake never wrote the child");
  if (child == NULL) return;
  CHECK(pollReady(child) == ncclSuccess, "child never ready");
  usleep(50 * 1000);
  CHECK(infoOf(child).known == lamportActive(), "the child polled directly was not set up (known %d)", infoOf(child).known);
  CHECK(ncclCommDestroy(child) == ncclSuccess, "destroy of the child failed");
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "destroy of the parent failed");
}

/* ncclCommInitAll that NCCL refuses (a bad devlist) with an ndev far beyond the array the
 * program passed: the wrapper read comms[0..ndev) before it looked at NCCL's answer (a fault, or
 * an overread ASan reports; here the array ends at an inaccessible page). One it accepts: both
 * communicators are ours. */
static void initAllReadsCommsOnlyWhenCreated(void) {
  const long page = sysconf(_SC_PAGESIZE);
  char* region = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(region != MAP_FAILED, "mmap");
  if (region == MAP_FAILED) return;
  CHECK(mprotect(region + page, (size_t)page, PROT_NONE) == 0, "mprotect");
  ncclComm_t* oneComm = (ncclComm_t*)(region + page - sizeof(ncclComm_t));
  const int badDevice = -1;
  CHECK(ncclCommInitAll(oneComm, 1 << 20, &badDevice) == ncclInvalidArgument, "NCCL's refusal was not returned");
  munmap(region, 2 * (size_t)page);
  ncclComm_t comms[2] = {NULL, NULL};
  CHECK(ncclCommInitAll(comms, 2, NULL) == ncclSuccess, "ncclCommInitAll failed");
  for (int i = 0; i < 2; ++i) {
    CHECK(infoOf(comms[i]).known == lamportActive(), "communicator %d of ncclCommInitAll is not ours", i);
    CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
  }
}

int main(int argc, char** argv) {
  static const struct LifecycleScenario scenarios[] = {
      {"ready-then-destroy", readyThenDestroy},
      {"destroy-in-progress", destroyWhileInProgress},
      {"allreduce-in-progress", allReduceWhileInProgress},
      {"abort-while-call-waits", abortWhileCallWaits},
      {"abort-one-of-batch", abortOneOfABatch},
      {"env-makes-blocking", environmentMakesBlocking},
      {"in-progress-means-nonblocking", inProgressMeansNonBlocking},
      {"env-makes-nonblocking", environmentMakesNonBlocking},
      {"split-child-modes", splitChildModes},
      {"abort-then-handle-reused", abortThenHandleReused},
      {"abort-then-handle-reused-keeps-setup", abortThenHandleReusedKeepsSetup},
      {"destroy-races-ready-then-handle-reused", destroyRacesReadyThenHandleReused},
      {"abort-then-split-child-reuses-handle", abortThenSplitChildReusesHandle},
      {"abort-uncollected-child", abortUncollectedChild},
      {"finalize-uncollected-child", finalizeUncollectedChild},
      {"destroy-uncollected-child", destroyUncollectedChild},
      {"throw-in-blocking-setup", throwInBlockingSetup},
      {"throw-in-deferred-setup", throwInDeferredSetup},
      {"call-races-exchange-start", callRacesExchangeStart},
      {"destroy-refused-while-busy", destroyRefusedWhileBusy},
      {"destroy-refused-keeps-pending-child", destroyRefusedKeepsPendingChild},
      {"destroy-null-keeps-pending-child", destroyNullKeepsPendingChild},
      {"abort-null-keeps-pending-child", abortNullKeepsPendingChild},
      {"late-child-control", lateChildControl},
      {"poll-late-child-directly", pollLateChildDirectly},
      {"initall-reads-comms-only-when-created", initAllReadsCommsOnlyWhenCreated},
  };
  return runLifecycleScenario(argc, argv, scenarios, sizeof(scenarios) / sizeof(scenarios[0]));
}
