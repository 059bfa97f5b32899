/* A stand-in NCCL 2.28 for the CPU lifecycle tests of non-blocking communicators
 * (tests/shim/lifecycle_scenarios.c). Like the real library it defines pnccl* functions with weak
 * ncclX aliases, and it asks its own public ncclCommGetAsyncError (through the PLT, so through
 * the preloaded wrapper) whether a communicator is ready before it uses one.
 *
 * What real NCCL does and this imitates (NCCL 2.28 src/init.cc): NCCL_COMM_BLOCKING=0/1
 * overrides config.blocking, undefined means blocking, a split without a config copies its
 * parent's; a non-blocking communicator is "in progress" until its init job ends
 * (FAKE_READY_MS, default 30 ms), and the first ncclCommGetAsyncError that sees it ready
 * completes the job, which two threads must not do at once; ncclCommDestroy and every call that
 * needs the communicator answer ncclInvalidArgument while it is in progress.
 *
 * FAKE_THROW_IN=name makes that function throw a C++ exception, as a failure inside our set-up.
 *
 * What it records for the tests: calls on a destroyed or aborted communicator, two threads inside
 * NCCL on one communicator, the calls made from threads other than the main one (our set-up
 * thread) and the exchange rounds (ncclGroupEnd) among them, and the allreduces NCCL received.
 *
 * Every communicator it creates stays in one list for the life of the process: a destroyed one is
 * never freed, so that later calls on it are counted rather than crash, and a set-up thread may
 * still be inside a call when the program exits. The list keeps them reachable (LeakSanitizer). */
#define _GNU_SOURCE
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/shim/lifecycle_fake_nccl.h"

#define FAKE_API(ret, name, ...)                                  \
  ret p##name(__VA_ARGS__);                                       \
  ret name(__VA_ARGS__) __attribute__((weak, alias("p" #name))); \
  ret p##name(__VA_ARGS__)

struct ncclComm {
  int blocking, rank, nRanks;
  long long _Atomic readyAtNs;
  long long _Atomic busyUntilNs; /* an operation the set-up enqueued keeps it in progress */
  atomic_int dead, inside, jobPending, finalized;
  struct ncclComm* next; /* gAllComms */
};

struct FakeCounters fakeCounters;
void (*_Atomic fakeHelperCallHook)(const char* function, ncclComm_t comm);
void (*_Atomic fakeReturnHook)(const char* function, ncclComm_t comm);

static void callReturnHook(const char* function, ncclComm_t comm) {
  void (*hook)(const char*, ncclComm_t) = atomic_load(&fakeReturnHook);
  if (hook != NULL) hook(function, comm);
}
/* Every communicator ever created, newest first (see the top of this file). */
static struct ncclComm* _Atomic gAllComms;
static pthread_t gMainThread;

__attribute__((constructor)) static void rememberMainThread(void) { gMainThread = pthread_self(); }

static long long nowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int onMainThread(void) { return pthread_equal(pthread_self(), gMainThread); }

void fakeThrow(const char* where); /* tests/shim/fake_throw.cc */

static int busy(ncclComm_t comm) { return nowNs() < atomic_load(&comm->busyUntilNs); }

static void callHelperHook(const char* function, ncclComm_t comm) {
  void (*hook)(const char*, ncclComm_t) = atomic_load(&fakeHelperCallHook);
  if (hook != NULL) hook(function, comm);
}

static void noteCall(const char* function, ncclComm_t comm) {
  /* FAKE_THROW_IN=name: that function throws a C++ exception (into the interposer's set-up). */
  const char* throwIn = getenv("FAKE_THROW_IN");
  if (throwIn != NULL && strcmp(throwIn, function) == 0) fakeThrow(function);
  if (comm != NULL && atomic_load(&comm->dead)) {
    fprintf(stderr, "fake NCCL: %s on a destroyed or aborted communicator %p\n", function, (void*)comm);
    atomic_fetch_add(&fakeCounters.callsOnDeadComm, 1);
  }
  if (!onMainThread()) {
    /* What our set-up calls (a describing call, the exchange), not what a program's own worker
     * thread may still do after a finalize (poll, destroy, abort). */
    const int teardownOrPoll = strcmp(function, "ncclCommDestroy") == 0 || strcmp(function, "ncclCommAbort") == 0 ||
                               strcmp(function, "ncclCommFinalize") == 0 ||
                               strcmp(function, "ncclCommGetAsyncError") == 0;
    if (comm != NULL && atomic_load(&comm->finalized) && !teardownOrPoll) {
      fprintf(stderr, "fake NCCL: %s from our set-up thread on finalized communicator %p\n", function, (void*)comm);
      atomic_fetch_add(&fakeCounters.helperCallsAfterFinalize, 1);
    }
    atomic_fetch_add(&fakeCounters.helperCalls, 1);
    callHelperHook(function, comm);
  }
  /* The set-up thread's first calls after readiness can be slowed down, to widen the window in
   * which the program calls while our set-up is still running. */
  const char* slow = getenv("FAKE_HELPER_DESCRIBE_MS");
  if (!onMainThread() && slow != NULL && strcmp(function, "ncclCommUserRank") == 0) usleep(1000 * atoi(slow));
}

/* FAKE_IGNORE_COMM_BLOCKING=1: NCCL_COMM_BLOCKING is not applied, as where NCCL read it earlier
 * (it keeps its first reading) or got it from its environment plugin. */
static int blockingFor(const ncclConfig_t* config, int whenNoConfig) {
  const char* env = getenv("NCCL_COMM_BLOCKING");
  const char* ignore = getenv("FAKE_IGNORE_COMM_BLOCKING");
  if (ignore != NULL && strcmp(ignore, "1") == 0) env = NULL;
  if (env != NULL && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0)) return atoi(env);
  if (config == NULL) return whenNoConfig;
  return config->blocking == NCCL_CONFIG_UNDEF_INT ? 1 : config->blocking;
}

/* A communicator freed by an abort, handed to the next one created (as malloc may do at once). */
static ncclComm_t _Atomic gRecycled;

/* FAKE_REUSE_FREED=1: every destroyed or aborted communicator goes onto this list and the next
 * one created, on any thread, takes the most recent (as malloc may hand a freed block to the next
 * caller): what the interposer keeps under a handle must follow the communicator, not the address. */
static pthread_mutex_t gFreedMutex = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t gFreed[64];
static int gFreedCount;

static int reuseFreed(void) {
  const char* reuse = getenv("FAKE_REUSE_FREED");
  return reuse != NULL && strcmp(reuse, "1") == 0;
}

static void freeComm(ncclComm_t comm) {
  if (!reuseFreed()) return;
  pthread_mutex_lock(&gFreedMutex);
  if (gFreedCount < (int)(sizeof(gFreed) / sizeof(gFreed[0]))) gFreed[gFreedCount++] = comm;
  pthread_mutex_unlock(&gFreedMutex);
}

static ncclComm_t takeFreed(void) {
  ncclComm_t comm = NULL;
  pthread_mutex_lock(&gFreedMutex);
  if (gFreedCount > 0) comm = gFreed[--gFreedCount];
  pthread_mutex_unlock(&gFreedMutex);
  return comm;
}

static ncclComm_t newComm(int blocking, int rank, int nRanks) {
  ncclComm_t comm = atomic_exchange(&gRecycled, NULL);
  if (comm == NULL && reuseFreed() && (comm = takeFreed()) != NULL) {
    /* Field by field: a late call on the freed communicator is the interposer's bug to report
     * (as a call on a communicator it does not own), not a race inside the stand-in. */
    atomic_store(&comm->busyUntilNs, 0);
    atomic_store(&comm->dead, 0);
    atomic_store(&comm->finalized, 0);
    atomic_store(&comm->inside, 0);
  } else if (comm != NULL) {
    struct ncclComm* next = comm->next; /* already in gAllComms */
    memset(comm, 0, sizeof(*comm));
    comm->next = next;
  } else {
    comm = calloc(1, sizeof(*comm));
    comm->next = atomic_load(&gAllComms);
    while (!atomic_compare_exchange_weak(&gAllComms, &comm->next, comm)) {
    }
  }
  comm->blocking = blocking;
  comm->rank = rank;
  comm->nRanks = nRanks;
  const char* readyMs = getenv("FAKE_READY_MS");
  comm->readyAtNs = blocking ? 0 : nowNs() + (readyMs ? atoll(readyMs) : 30) * 1000000LL;
  atomic_store(&comm->jobPending, !blocking);
  return comm;
}

static ncclResult_t created(ncclComm_t comm) { return comm->blocking ? ncclSuccess : ncclInProgress; }

/* Like ncclCommEnsureReady: through the public name, so through the interposer's wrapper. */
static ncclResult_t ensureReady(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  ncclCommGetAsyncError(comm, &state);
  return state == ncclInProgress ? ncclInvalidArgument : state;
}

FAKE_API(ncclResult_t, ncclGetVersion, int* version) {
  *version = 22809;
  return ncclSuccess;
}

FAKE_API(const char*, ncclGetErrorString, ncclResult_t result) { return result == ncclSuccess ? "no error" : "fake error"; }

FAKE_API(const char*, ncclGetLastError, ncclComm_t comm) {
  (void)comm;
  return "";
}

FAKE_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nRanks, ncclUniqueId id, int rank) {
  (void)id;
  *comm = newComm(blockingFor(NULL, 1), rank, nRanks);
  return created(*comm);
}

FAKE_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nRanks, ncclUniqueId id, int rank,
         ncclConfig_t* config) {
  (void)id;
  *comm = newComm(blockingFor(config, 1), rank, nRanks);
  callReturnHook("ncclCommInitRankConfig", *comm);
  return created(*comm);
}

/* Like NCCL's (src/init.cc): ndev and devlist are checked before any of comms is written. */
FAKE_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == NULL || ndev < 0) return ncclInvalidArgument;
  for (int i = 0; devlist != NULL && i < ndev; ++i) {
    if (devlist[i] < 0) return ncclInvalidArgument;
  }
  for (int i = 0; i < ndev; ++i) comms[i] = newComm(blockingFor(NULL, 1), i, ndev);
  callReturnHook("ncclCommInitAll", ndev > 0 ? comms[0] : NULL);
  return ndev > 0 ? created(comms[0]) : ncclSuccess;
}

struct LateChild {
  ncclComm_t* slot;
  ncclComm_t child;
  ncclComm_t busyParent; /* in progress until the child is written (FAKE_SPLIT_PARENT_BUSY), or NULL */
  int delayMs;
};

static void* writeChildLate(void* arg) {
  struct LateChild* late = arg;
  usleep(1000 * late->delayMs);
  __atomic_store_n(late->slot, late->child, __ATOMIC_RELEASE);
  if (late->busyParent != NULL) atomic_store(&late->busyParent->busyUntilNs, 0);
  free(late);
  return NULL;
}

/* The calling thread's ncclGroupStart/End depth, and the splits made inside its open group. NCCL
 * (src/init.cc, ncclCommInitChildComm) sets *newcomm to NULL at the call and writes the child only
 * when the split's job ends, which inside a group is at the outermost ncclGroupEnd. */
#define FAKE_MAX_GROUPED_SPLITS 16
static __thread int tGroupDepth;
static __thread int tGroupedSplits;
static __thread struct GroupedSplit {
  ncclComm_t* slot;
  ncclComm_t child;
} tGroupedSplit[FAKE_MAX_GROUPED_SPLITS];
/* An all-gather on a non-blocking communicator was issued inside the open group: NCCL's
 * ncclGroupEnd then returns ncclInProgress (the work is enqueued in the background). */
static __thread int tGroupNonBlockingWork;

FAKE_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)color;
  (void)key;
  noteCall("ncclCommSplit", comm);
  const ncclResult_t ready = ensureReady(comm);
  if (ready != ncclSuccess) return ready;
  ncclComm_t child = newComm(blockingFor(config, comm->blocking), comm->rank, comm->nRanks);
  if (tGroupDepth > 0 && tGroupedSplits < FAKE_MAX_GROUPED_SPLITS) {
    *newcomm = NULL;
    tGroupedSplit[tGroupedSplits].slot = newcomm;
    tGroupedSplit[tGroupedSplits].child = child;
    ++tGroupedSplits;
    return ncclSuccess;
  }
  /* FAKE_SPLIT_WRITES_CHILD_MS=N: a non-blocking split returns with *newcomm still null and
   * writes the child N ms later, as NCCL 2.28 does when its split job ends; with
   * FAKE_SPLIT_PARENT_BUSY=1 the parent stays in progress until then, as in NCCL. */
  const char* lateMs = getenv("FAKE_SPLIT_WRITES_CHILD_MS");
  if (lateMs != NULL && !child->blocking) {
    const char* parentBusy = getenv("FAKE_SPLIT_PARENT_BUSY");
    struct LateChild* late = malloc(sizeof(*late));
    late->slot = newcomm;
    late->child = child;
    late->busyParent = NULL;
    if (parentBusy != NULL && strcmp(parentBusy, "1") == 0) {
      late->busyParent = comm;
      atomic_store(&comm->busyUntilNs, LLONG_MAX); /* until writeChildLate has written the child */
    }
    late->delayMs = atoi(lateMs);
    pthread_t writer;
    if (pthread_create(&writer, NULL, writeChildLate, late) == 0) {
      pthread_detach(writer);
      callReturnHook("ncclCommSplit", comm);
      return ncclSuccess; /* as NCCL 2.28: ncclCommSplit swallows its group end's ncclInProgress */
    }
    if (late->busyParent != NULL) atomic_store(&comm->busyUntilNs, 0);
    free(late);
  }
  *newcomm = child;
  return created(child);
}

static __thread int tSlowPollMs;
void fakeSlowPollsOnThisThread(int ms) { tSlowPollMs = ms; }

FAKE_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  noteCall("ncclCommGetAsyncError", comm);
  if (atomic_fetch_add(&comm->inside, 1) > 0) {
    fprintf(stderr, "fake NCCL: two threads inside NCCL on communicator %p\n", (void*)comm);
    atomic_fetch_add(&fakeCounters.concurrentCalls, 1);
  }
  *asyncError = nowNs() >= atomic_load(&comm->readyAtNs) && !busy(comm) ? ncclSuccess : ncclInProgress;
  if (*asyncError == ncclSuccess && atomic_load(&comm->jobPending)) {
    usleep(200); /* completing the init job takes a while: overlaps show */
    atomic_store(&comm->jobPending, 0);
  }
  usleep(50);
  atomic_fetch_sub(&comm->inside, 1);
  if (tSlowPollMs > 0) usleep(1000 * tSlowPollMs); /* the answer is computed; the caller gets it late */
  callReturnHook("ncclCommGetAsyncError", comm);
  return ncclSuccess;
}

FAKE_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  noteCall("ncclCommUserRank", comm);
  const ncclResult_t ready = ensureReady(comm);
  if (ready == ncclSuccess) *rank = comm->rank;
  return ready;
}

FAKE_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  noteCall("ncclCommCount", comm);
  const ncclResult_t ready = ensureReady(comm);
  if (ready == ncclSuccess) *count = comm->nRanks;
  return ready;
}

FAKE_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  noteCall("ncclCommCuDevice", comm);
  const ncclResult_t ready = ensureReady(comm);
  if (ready == ncclSuccess) *device = 0;
  return ready;
}

static void* initDuringAbort(void* unused);
static void* splitDuringTearDown(void* unused);

FAKE_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess; /* NCCL 2.28 src/init.cc: a null communicator is a no-op */
  noteCall("ncclCommDestroy", comm);
  /* FAKE_DESTROY_RACES_READY=1: NCCL's init job ends between the interposer's own readiness check
   * and NCCL's (ncclCommEnsureReady inside ncclCommDestroy), so NCCL destroys the communicator. */
  const char* race = getenv("FAKE_DESTROY_RACES_READY");
  if (race != NULL && strcmp(race, "1") == 0) {
    while (nowNs() < atomic_load(&comm->readyAtNs)) usleep(100);
  }
  const ncclResult_t ready = ensureReady(comm);
  if (ready != ncclSuccess) return ready;
  atomic_store(&comm->dead, 1); /* never freed: later calls on it are counted, not crashes */
  freeComm(comm);
  /* FAKE_DESTROY_REUSES_HANDLE=1: a new communicator, =split-unpolled: a split's child (as for
   * the abort), gets the address. */
  const char* reuse = getenv("FAKE_DESTROY_REUSES_HANDLE");
  if (reuse != NULL && (strcmp(reuse, "1") == 0 || strcmp(reuse, "split-unpolled") == 0)) {
    atomic_store(&gRecycled, comm);
    pthread_t other;
    if (pthread_create(&other, NULL, strcmp(reuse, "1") == 0 ? initDuringAbort : splitDuringTearDown, NULL) == 0) {
      pthread_join(other, NULL);
    }
  }
  return ncclSuccess;
}

/* Another thread of the program creates a non-blocking communicator; NCCL gives it the address
 * the abort has just freed. Through the public name, so through the interposer's wrapper. */
static void* initDuringAbort(void* unused) {
  (void)unused;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclComm_t comm = NULL;
  if (ncclCommInitRankConfig(&comm, 2, id, 0, &config) == ncclInProgress) atomic_store(&fakeCounters.reusedComm, comm);
  return NULL;
}

ncclComm_t _Atomic fakeSplitParentDuringAbort;

/* Another thread of the program splits fakeSplitParentDuringAbort without a config (non-blocking,
 * as the parent), NCCL writes the child late (FAKE_SPLIT_WRITES_CHILD_MS) at the address the
 * tear-down has just freed, and, where `poll`, the thread polls the parent until it is ready, as
 * NCCL asks: our poll collects the child (else the program polls later, after the tear-down).
 * Through the public names, so through the interposer's wrappers. */
static void splitAtFreedAddress(int poll) {
  static ncclComm_t slot; /* NCCL writes it after the split returns: must outlive this call */
  ncclComm_t parent = atomic_exchange(&fakeSplitParentDuringAbort, NULL); /* once */
  if (parent == NULL || ncclCommSplit(parent, 0, 0, &slot, NULL) != ncclSuccess) return;
  for (int i = 0; i < 5000 && __atomic_load_n(&slot, __ATOMIC_ACQUIRE) == NULL; ++i) usleep(1000);
  ncclResult_t state = ncclInProgress;
  for (int i = 0; poll && i < 5000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(parent, &state) != ncclSuccess) return;
    if (state == ncclInProgress) usleep(1000);
  }
  atomic_store(&fakeCounters.reusedComm, __atomic_load_n(&slot, __ATOMIC_ACQUIRE));
}

static void* splitDuringAbort(void* unused) {
  (void)unused;
  splitAtFreedAddress(1);
  return NULL;
}

static void* splitDuringTearDown(void* unused) {
  (void)unused;
  splitAtFreedAddress(0);
  return NULL;
}

FAKE_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess; /* NCCL 2.28 src/init.cc: a null communicator is a no-op */
  noteCall("ncclCommAbort", comm);
  atomic_store(&comm->dead, 1);
  freeComm(comm);
  /* FAKE_ABORT_REUSES_HANDLE=1: a new communicator, =split: a split's child collected by its
   * parent's poll inside the abort, =split-unpolled: one nothing polls before the abort returns,
   * gets the address. */
  const char* reuse = getenv("FAKE_ABORT_REUSES_HANDLE");
  if (reuse != NULL && (strcmp(reuse, "1") == 0 || strcmp(reuse, "split") == 0 || strcmp(reuse, "split-unpolled") == 0)) {
    atomic_store(&gRecycled, comm);
    pthread_t other;
    void* (*newcomer)(void*) = strcmp(reuse, "1") == 0       ? initDuringAbort
                               : strcmp(reuse, "split") == 0 ? splitDuringAbort
                                                             : splitDuringTearDown;
    if (pthread_create(&other, NULL, newcomer, NULL) == 0) pthread_join(other, NULL);
  }
  return ncclSuccess;
}

FAKE_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  noteCall("ncclCommFinalize", comm);
  const ncclResult_t ready = ensureReady(comm);
  if (ready == ncclSuccess) atomic_store(&comm->finalized, 1);
  return ready;
}

FAKE_API(ncclResult_t, ncclGroupStart, void) {
  ++tGroupDepth;
  return ncclSuccess;
}

FAKE_API(ncclResult_t, ncclGroupEnd, void) {
  ncclResult_t result = ncclSuccess;
  if (tGroupDepth > 0 && --tGroupDepth == 0) {
    /* The group's split jobs end: each child is written to the caller's slot. */
    for (int i = 0; i < tGroupedSplits; ++i) __atomic_store_n(tGroupedSplit[i].slot, tGroupedSplit[i].child, __ATOMIC_RELEASE);
    tGroupedSplits = 0;
    if (tGroupNonBlockingWork) result = ncclInProgress;
    tGroupNonBlockingWork = 0;
  }
  callReturnHook("ncclGroupEnd", NULL);
  if (onMainThread()) return result;
  atomic_fetch_add(&fakeCounters.helperGroupEnds, 1);
  callHelperHook("ncclGroupEnd", NULL);
  return result;
}

void fakeSetHelperCallHook(void (*hook)(const char* function, ncclComm_t comm)) {
  atomic_store(&fakeHelperCallHook, hook);
}

void fakeCommMakeReady(ncclComm_t comm) { atomic_store(&comm->readyAtNs, nowNs()); }

void fakeCommBusyFor(ncclComm_t comm, int ms) { atomic_store(&comm->busyUntilNs, nowNs() + ms * 1000000LL); }

FAKE_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)stream;
  noteCall("ncclAllGather", comm);
  const ncclResult_t ready = ensureReady(comm);
  if (ready == ncclSuccess && !comm->blocking && tGroupDepth > 0) tGroupNonBlockingWork = 1;
  return ready;
}

FAKE_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)stream;
  noteCall("ncclAllReduce", comm);
  atomic_fetch_add(&fakeCounters.allReduceCalls, 1);
  return ensureReady(comm);
}
