/* A stand-in NCCL 2.28 that loads its tuner the way NCCL does (src/plugin/tuner.cc, research/
 * tuner-activation.md 1): once per process under a mutex, dlopen(NCCL_TUNER_PLUGIN, RTLD_NOW |
 * RTLD_LOCAL), ncclTunerPlugin_v6 then _v5, init with &comm->tunerContext (a field near the end
 * of a 1.2 MB calloc'ed communicator, startMagic first, endMagic last, as in NCCL) on the init's thread, finalize at destroy
 * and dlclose when the last communicator that holds it dies. Built with -fcf-protection=full, so
 * every entry starts with endbr64, as CET builds do. Each ncclX also exists as pnccl X (the
 * profiling aliases of NCCL >= 2.16.2). No GPU: ncclAllReduce only counts. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#define EXPORT __attribute__((visibility("default")))
#define ALIAS(name) extern __typeof(name) p##name __attribute__((alias(#name), visibility("default")));

enum { kStartMagic = 0x0280028002800280ull };

struct FakeComm {
  uint64_t startMagic;
  int nRanks, rank, cudaDev;
  char body[1191552 - 24];  /* NCCL 2.30.7's offset of tunerContext */
  void* tunerContext;
  char tail[8168];
  uint64_t endMagic; /* NCCL's last field, the same value as startMagic (src/include/comm.h) */
};

typedef ncclResult_t (*InitFn)(void**, uint64_t, size_t, size_t, void*, void*, void*);
typedef ncclResult_t (*FinalizeFn)(void*);
struct TunerHead { const char* name; InitFn init; void* getCollInfo; FinalizeFn finalize; };

static pthread_mutex_t tunerLock = PTHREAD_MUTEX_INITIALIZER;
static void* tunerHandle;
static const struct TunerHead* tuner;
static int tunerRefs;
EXPORT atomic_long standinAllReduceCalls;
EXPORT atomic_long standinGroupCalls;
EXPORT atomic_int standinTunerLoads;

static const struct TunerHead* loadTuner(void) {
  pthread_mutex_lock(&tunerLock);
  if (tuner == NULL) {
    const char* path = getenv("NCCL_TUNER_PLUGIN");
    tunerHandle = path != NULL ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (tunerHandle != NULL) {
      tuner = dlsym(tunerHandle, "ncclTunerPlugin_v6");
      if (tuner == NULL) tuner = dlsym(tunerHandle, "ncclTunerPlugin_v5");
      atomic_fetch_add(&standinTunerLoads, 1);
    } else if (path != NULL) {
      fprintf(stderr, "stand-in NCCL: tuner %s does not load: %s\n", path, dlerror());
    }
  }
  if (tuner != NULL) ++tunerRefs;
  const struct TunerHead* t = tuner;
  pthread_mutex_unlock(&tunerLock);
  return t;
}

static void unloadTuner(void) {
  pthread_mutex_lock(&tunerLock);
  if (tuner != NULL && --tunerRefs == 0) {
    dlclose(tunerHandle);
    tunerHandle = NULL;
    tuner = NULL;
  }
  pthread_mutex_unlock(&tunerLock);
}

EXPORT ncclResult_t ncclGetVersion(int* version) {
  if (version == NULL) return ncclInvalidArgument;
  *version = 22809;
  return ncclSuccess;
}
ALIAS(ncclGetVersion)

EXPORT const char* ncclGetErrorString(ncclResult_t result) { return result == ncclSuccess ? "no error" : "error"; }
ALIAS(ncclGetErrorString)

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  if (out == NULL || nranks < 1) return ncclInvalidArgument;
  struct FakeComm* comm = calloc(1, sizeof(struct FakeComm));
  if (comm == NULL) return ncclSystemError;
  comm->startMagic = comm->endMagic = kStartMagic;
  comm->nRanks = nranks;
  comm->rank = rank;
  uint64_t commHash = 0;
  memcpy(&commHash, id.internal, sizeof(commHash));
  const struct TunerHead* t = loadTuner();
  if (t != NULL && t->init(&comm->tunerContext, commHash, (size_t)nranks, 1, NULL, NULL, NULL) != ncclSuccess) {
    free(comm);
    return ncclInternalError;
  }
  *out = (ncclComm_t)comm;
  return ncclSuccess;
}
ALIAS(ncclCommInitRank)

static ncclResult_t freeComm(ncclComm_t handle) {
  struct FakeComm* comm = (struct FakeComm*)handle;
  if (comm == NULL || comm->startMagic != kStartMagic) return ncclInvalidArgument;
  pthread_mutex_lock(&tunerLock);
  const struct TunerHead* t = tuner;
  pthread_mutex_unlock(&tunerLock);
  if (t != NULL) {
    t->finalize(comm->tunerContext);
    unloadTuner();
  }
  comm->startMagic = comm->endMagic = 0;
  free(comm);
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) { return freeComm(comm); }
ALIAS(ncclCommDestroy)
EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return freeComm(comm); }
ALIAS(ncclCommAbort)

EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return comm != NULL && ((struct FakeComm*)comm)->startMagic == kStartMagic ? ncclSuccess : ncclInvalidArgument;
}
ALIAS(ncclCommFinalize)

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == NULL || asyncError == NULL) return ncclInvalidArgument;
  *asyncError = ncclSuccess;
  return ncclSuccess;
}
ALIAS(ncclCommGetAsyncError)

#define QUERY(fname, field)                                               \
  EXPORT ncclResult_t fname(const ncclComm_t comm, int* value) {          \
    if (comm == NULL || value == NULL) return ncclInvalidArgument;        \
    *value = ((const struct FakeComm*)comm)->field;                      \
    return ncclSuccess;                                                   \
  }                                                                       \
  ALIAS(fname)
QUERY(ncclCommCount, nRanks)
QUERY(ncclCommUserRank, rank)
QUERY(ncclCommCuDevice, cudaDev)

EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)op; (void)stream;
  if (comm == NULL) return ncclInvalidArgument;
  atomic_fetch_add(&standinAllReduceCalls, 1);
  return ncclSuccess;
}
ALIAS(ncclAllReduce)

EXPORT ncclResult_t ncclGroupStart(void) {
  atomic_fetch_add(&standinGroupCalls, 1);
  return ncclSuccess;
}
ALIAS(ncclGroupStart)

EXPORT ncclResult_t ncclGroupEnd(void) {
  atomic_fetch_add(&standinGroupCalls, 1);
  return ncclSuccess;
}
ALIAS(ncclGroupEnd)
