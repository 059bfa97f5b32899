/* A stand-in libnccl.so.2 (that SONAME and file name) built into a directory that only the
 * DT_RUNPATH / DT_RPATH of tests/shim/runpath_check.c names, as pip PyTorch's libtorch_cuda.so
 * names nvidia/nccl/lib. It has the profiling aliases, so libnccl-lamport.so takes it for a
 * current NCCL and looks its functions up as pnccl*. */
#include <nccl.h>

#include "runpath_fake_nccl.h"

ncclResult_t pncclGetVersion(int* version) {
  *version = RUNPATH_FAKE_NCCL_VERSION;
  return ncclSuccess;
}
ncclResult_t ncclGetVersion(int* version) { return pncclGetVersion(version); }

const char* pncclGetErrorString(ncclResult_t result) {
  (void)result;
  return "runpath fake NCCL";
}
const char* ncclGetErrorString(ncclResult_t result) { return pncclGetErrorString(result); }

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)comm, (void)stream;
  return ncclInternalError;
}
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}
