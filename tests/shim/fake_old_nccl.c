/* A stand-in for an NCCL older than 2.16.2: the plain API names only, no pnccl* profiling
 * aliases. tests/shim/test_real_nccl.cc points NCCL_LAMPORT_NCCL_PATH at it to check that such a
 * library is used by handle and reported as having no profiling API. */
#include <nccl.h>

#define FAKE_OLD_VERSION 21500 /* 2.15.0 */

ncclResult_t ncclGetVersion(int* version) {
  *version = FAKE_OLD_VERSION;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  (void)result;
  return "fake old NCCL";
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)comm, (void)stream;
  return ncclInternalError;
}
