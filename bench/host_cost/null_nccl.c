/* A stand-in NCCL that does nothing, for nccl-lamport-host-cost: every call returns at once, so the
 * time measured around ncclAllReduce is ours (the lifecycle tests' stand-in,
 * tests/shim/lifecycle_fake_nccl.c, checks readiness and threads on every call and costs ~100 us).
 * Each entry point is pnccl* with ncclX a weak alias of it, as NCCL exports them. Communicators
 * are plain host objects; collectives touch no memory. */
#include <nccl.h>
#include <stdlib.h>

#define NULL_API(ret, name, ...)                                  \
  ret p##name(__VA_ARGS__);                                       \
  ret name(__VA_ARGS__) __attribute__((weak, alias("p" #name))); \
  ret p##name(__VA_ARGS__)

struct ncclComm {
  int rank, nRanks;
};

NULL_API(ncclResult_t, ncclGetVersion, int* version) {
  *version = 22809;
  return ncclSuccess;
}

NULL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  (void)result;
  return "stand-in NCCL";
}

NULL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nRanks, ncclUniqueId id, int rank) {
  (void)id;
  *comm = calloc(1, sizeof(struct ncclComm));
  (*comm)->rank = rank;
  (*comm)->nRanks = nRanks;
  return ncclSuccess;
}

NULL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  free(comm);
  return ncclSuccess;
}

NULL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  *count = comm->nRanks;
  return ncclSuccess;
}

NULL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

NULL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  (void)comm;
  *device = 0;
  return ncclSuccess;
}

NULL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  (void)comm;
  *asyncError = ncclSuccess;
  return ncclSuccess;
}

NULL_API(ncclResult_t, ncclGroupStart, void) { return ncclSuccess; }
NULL_API(ncclResult_t, ncclGroupEnd, void) { return ncclSuccess; }

NULL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)comm, (void)stream;
  return ncclSuccess;
}

NULL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)comm, (void)stream;
  return ncclSuccess;
}
