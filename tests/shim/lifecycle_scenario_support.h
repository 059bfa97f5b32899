/* What the lifecycle scenario programs (tests/shim/lifecycle_scenarios.c,
 * tests/shim/lifecycle_concurrency_scenarios.c) share: NCCL calls made the way a program makes
 * them, the plugin's view of a communicator, the checks that every scenario ends with, and main's
 * dispatch by scenario name. Each program runs one scenario per process (argv[1]). */
#ifndef NCCL_LAMPORT_LIFECYCLE_SCENARIO_SUPPORT_H_
#define NCCL_LAMPORT_LIFECYCLE_SCENARIO_SUPPORT_H_

#include <dlfcn.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/nccl_lamport.h"
#include "tests/shim/lifecycle_fake_nccl.h"
#include "tests/shim/shim_check.h"

static ncclResult_t (*getCommInfo)(ncclComm_t, ncclLamportCommInfo_t*);

static inline ncclLamportCommInfo_t infoOf(ncclComm_t comm) {
  ncclLamportCommInfo_t info;
  memset(&info, 0, sizeof(info));
  getCommInfo(comm, &info);
  return info;
}

static inline double secondsSince(const struct timespec* start) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) + 1e-9 * (double)(now.tv_nsec - start->tv_nsec);
}

/** Polls as NCCL asks programs to, for at most 10 s; the last state. */
static inline ncclResult_t pollReady(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 10000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) usleep(1000);
  }
  return state;
}

static inline ncclComm_t initWithBlocking(int blocking, ncclResult_t* result) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclComm_t comm = NULL;
  *result = ncclCommInitRankConfig(&comm, 2, id, 0, &config);
  return comm;
}

static inline ncclComm_t initNonBlocking(void) {
  ncclResult_t result;
  ncclComm_t comm = initWithBlocking(0, &result);
  CHECK(result == ncclInProgress, "non-blocking init returned %d", result);
  return comm;
}

static inline void checkNothingWrong(void) {
  CHECK(atomic_load(&fakeCounters.callsOnDeadComm) == 0, "%d NCCL call(s) on a destroyed or aborted communicator",
        atomic_load(&fakeCounters.callsOnDeadComm));
  CHECK(atomic_load(&fakeCounters.concurrentCalls) == 0, "%d time(s) two threads were inside NCCL on one communicator",
        atomic_load(&fakeCounters.concurrentCalls));
  CHECK(atomic_load(&fakeCounters.helperCallsAfterFinalize) == 0,
        "%d NCCL call(s) of our set-up thread on a finalized communicator",
        atomic_load(&fakeCounters.helperCallsAfterFinalize));
}

/* The child NCCL writes into *slot from its own thread, waited for up to 5 s (NULL: never). */
static inline ncclComm_t waitForChild(ncclComm_t* slot) {
  ncclComm_t child = NULL;
  for (int i = 0; i < 5000 && child == NULL; ++i) {
    child = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (child == NULL) usleep(1000);
  }
  return child;
}

static inline int lamportActive(void) {
  int (*isActive)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "ncclLamportIsActive");
  return isActive != NULL && isActive();
}

/* One scenario of a program: its name on the command line and its body. */
struct LifecycleScenario {
  const char* name;
  void (*run)(void);
};

/** main of a scenario program: runs the scenario argv[1] names, then the checks every scenario
 *  ends with. Exit status 0 if every check passed, 1 if one failed, 2 for a bad command line or a
 *  missing plugin (not preloaded). */
static inline int runLifecycleScenario(int argc, char** argv, const struct LifecycleScenario* scenarios, size_t count) {
  getCommInfo = (ncclResult_t(*)(ncclComm_t, ncclLamportCommInfo_t*))dlsym(RTLD_DEFAULT, "ncclLamportGetCommInfo");
  if (getCommInfo == NULL || argc < 2) {
    fprintf(stderr, "usage: LD_PRELOAD=libnccl-lamport.so %s SCENARIO\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(argv[1], scenarios[i].name) != 0) continue;
    scenarios[i].run();
    checkNothingWrong();
    return shimCheckResult(argv[1]);
  }
  fprintf(stderr, "unknown scenario %s\n", argv[1]);
  return 2;
}

#endif /* NCCL_LAMPORT_LIFECYCLE_SCENARIO_SUPPORT_H_ */
