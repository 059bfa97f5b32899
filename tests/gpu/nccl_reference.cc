// NCCL's own allreduce result, the suite's reference (SPEC 7: compare against NCCL itself).
#include "tests/gpu/activation_mode.h"
#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {
namespace {

/** On a non-blocking communicator a call may return ncclInProgress; the next call on it waits
 *  until NCCL reports the state settled (bounded: a stuck comm is then the reduce's error). */
ncclResult_t settle(ncclResult_t rc, ncclComm_t comm) { return rc == ncclInProgress ? pollAsyncError(comm, 120) : rc; }

}  // namespace

ncclResult_t ncclOwnAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, ReferencePart part) {
  if (!tunerActivation()) {
    // Linked / LD_PRELOAD: the interposer wraps ncclAllReduce only; the profiling alias is NCCL's.
    return pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  // Tuner activation: pncclAllReduce is the hooked function itself. Reduce to root 0, then
  // broadcast from root 0: collectives the plugin never takes, on the same stream (so ordered);
  // NCCL's arithmetic, with its own rounding, judged by the suite's NCCL tolerance.
  ncclResult_t rc = ncclSuccess;
  if (part != ReferencePart::kBroadcast) {
    rc = ncclReduce(sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
    if (part == ReferencePart::kReduce) return rc;
    rc = settle(rc, comm);
    if (rc != ncclSuccess) return rc;
  }
  return ncclBroadcast(recvbuff, recvbuff, count, datatype, 0, comm, stream);
}

}  // namespace gputest
}  // namespace nccl_lamport
