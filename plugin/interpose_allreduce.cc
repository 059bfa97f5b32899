// The hot path: ncclAllReduce (SPEC 4.6 - 4.8).
//
// The decision depends only on values identical on every rank (count, datatype, op, the
// communicator's agreed state and routing table), never on pointers, streams, capture state or
// timing, so ranks cannot diverge. Invalid arguments go to NCCL, so users see NCCL's own errors.
// Inside ncclGroupStart/End our kernel is launched at call time, i.e. before the NCCL work of the
// same group on that stream; this order is the same on every rank (README, "Groups").
#include <cuda_runtime_api.h>

#include "include/nccl_lamport.h"
#include "kernels/lamport_allreduce.h"
#include "plugin/comm_registry.h"
#include "plugin/export.h"
#include "plugin/interpose_state.h"
#include "plugin/log.h"
#include "plugin/real_nccl.h"
#include "tuner/routing.h"

namespace nccl_lamport {

namespace {

LamportDataType toLamportType(ncclDataType_t datatype) {
  switch (datatype) {
    case ncclFloat16: return LamportDataType::kFloat16;
    case ncclBfloat16: return LamportDataType::kBFloat16;
    default: return LamportDataType::kFloat32;
  }
}

/** Runs one allreduce on the Lamport kernel of lc, on lc's device, leaving the caller's current
 *  device as it was. */
ncclResult_t launchOneShot(LamportComm& lc, const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, cudaStream_t stream) {
  ncclResult_t asyncError = lamportAsyncError(lc);
  if (asyncError != ncclSuccess) return asyncError;

  LamportOneShotArgs args = lc.launchTemplate;
  args.sendbuff = sendbuff;
  args.recvbuff = recvbuff;
  args.count = count;
  args.datatype = toLamportType(datatype);
  args.op = op == ncclAvg ? LamportReduceOp::kAvg : LamportReduceOp::kSum;

  int callerDev = -1;
  cudaGetDevice(&callerDev);
  if (callerDev != lc.cudaDev) cudaSetDevice(lc.cudaDev);
  cudaError_t err = launchLamportOneShot(args, stream);
  if (callerDev != lc.cudaDev && callerDev >= 0) cudaSetDevice(callerDev);
  if (err != cudaSuccess) {
    LAMPORT_WARN("comm %p rank %d: Lamport kernel launch failed: %s", static_cast<void*>(lc.comm), lc.rank,
                 cudaGetErrorString(err));
    return ncclUnhandledCudaError;
  }
  lc.lamportCalls.fetch_add(1, std::memory_order_relaxed);
  // Like NCCL's own per-collective line: INFO, subsystem COLL (NCCL_DEBUG_SUBSYS=COLL shows it).
  LAMPORT_INFO(kSubsysColl, "AllReduce comm %p rank %d count %zu datatype %d op %d stream %p: Lamport one-shot",
                static_cast<void*>(lc.comm), lc.rank, count, static_cast<int>(datatype), static_cast<int>(op),
                static_cast<void*>(stream));
  return ncclSuccess;
}

}  // namespace

AllReducePath pathFor(const LamportComm* lc, size_t count, ncclDataType_t datatype, ncclRedOp_t op) {
  if (lc == nullptr || !interposerEnabled()) return AllReducePath::kNccl;
  return routeAllReduce(lc->table, lc->eligible, lc->nRanks, datatype, op, count);
}

}  // namespace nccl_lamport

using namespace nccl_lamport;

NCCL_LAMPORT_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                               cudaStream_t stream) {
  static const auto real = REAL_NCCL(ncclAllReduce);
  if (real == nullptr) {
    LAMPORT_WARN("ncclAllReduce: the real NCCL function was not found (is libnccl loaded?)");
    return ncclSystemError;
  }
  LamportComm* lc = interposerEnabled() && comm != nullptr ? CommRegistry::instance().find(comm) : nullptr;
  if (lc == nullptr) return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  // Null buffers are invalid arguments: NCCL reports them with its own code and message.
  if (pathFor(lc, count, datatype, op) != AllReducePath::kLamportOneShot || sendbuff == nullptr ||
      recvbuff == nullptr) {
    lc->ncclCalls.fetch_add(1, std::memory_order_relaxed);
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  return launchOneShot(*lc, sendbuff, recvbuff, count, datatype, op, stream);
}
