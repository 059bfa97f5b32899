/* A stand-in NCCL for tests/unit/test_allreduce_dispatch.cc: the few functions the interposer's
 * allreduce, group and revoke wrappers call, each counting what reaches it. Like the real library
 * it defines pncclX with a weak ncclX alias, so the wrappers linked into the test find the pncclX
 * they forward to. Where a test depends on NCCL's answer, it answers as NCCL 2.28 does. */
#include <nccl.h>
#include <stdatomic.h>

#include "tests/unit/dispatch_stand_in_nccl.h"

#define STAND_IN(ret, name, ...)                                  \
  ret p##name(__VA_ARGS__);                                       \
  ret name(__VA_ARGS__) __attribute__((weak, alias("p" #name))); \
  ret p##name(__VA_ARGS__)

static atomic_int gAllReduceCalls;
static atomic_int gGroupDepth;
static atomic_int gGroupEnds;
static atomic_int gSimulatedGroupEnds;
static atomic_int gRevokesTaken;
static atomic_int gAsyncState; /* what ncclCommGetAsyncError reports; ncclSuccess by default */

int standInAllReduceCalls(void) { return atomic_load(&gAllReduceCalls); }
int standInGroupDepth(void) { return atomic_load(&gGroupDepth); }
int standInGroupEnds(void) { return atomic_load(&gGroupEnds); }
int standInSimulatedGroupEnds(void) { return atomic_load(&gSimulatedGroupEnds); }
int standInRevokesTaken(void) { return atomic_load(&gRevokesTaken); }
void standInSetAsyncState(ncclResult_t state) { atomic_store(&gAsyncState, (int)state); }

STAND_IN(ncclResult_t, ncclGetVersion, int* version) {
  *version = 22809;
  return ncclSuccess;
}
STAND_IN(const char*, ncclGetErrorString, ncclResult_t result) {
  return result == ncclSuccess ? "no error" : "stand-in error";
}
STAND_IN(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)comm, (void)stream;
  atomic_fetch_add(&gAllReduceCalls, 1);
  return ncclSuccess;
}
STAND_IN(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == NULL || asyncError == NULL) return ncclInvalidArgument;
  *asyncError = (ncclResult_t)atomic_load(&gAsyncState);
  return ncclSuccess;
}
STAND_IN(ncclResult_t, ncclGroupStart, void) {
  atomic_fetch_add(&gGroupDepth, 1);
  return ncclSuccess;
}
STAND_IN(ncclResult_t, ncclGroupEnd, void) {
  if (atomic_fetch_sub(&gGroupDepth, 1) == 1) atomic_fetch_add(&gGroupEnds, 1);
  return ncclSuccess;
}
/* NCCL 2.28 src/group.cc: a simulated group's tasks are estimated, none is launched. */
STAND_IN(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  (void)simInfo;
  if (atomic_fetch_sub(&gGroupDepth, 1) == 1) atomic_fetch_add(&gSimulatedGroupEnds, 1);
  return ncclSuccess;
}
/* NCCL 2.28 src/init.cc: flags other than NCCL_REVOKE_DEFAULT are refused before anything changes. */
STAND_IN(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  if (comm == NULL) return ncclSuccess;
  if (revokeFlags != NCCL_REVOKE_DEFAULT) return ncclInvalidArgument;
  atomic_fetch_add(&gRevokesTaken, 1);
  return ncclSuccess;
}
STAND_IN(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  (void)comm;
  return ncclSuccess;
}
