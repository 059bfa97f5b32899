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
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cuda_guards.h"
#include "plugin/comm/deferred_setup.h"
#include "plugin/abi/export.h"
#include "plugin/interpose/interpose_state.h"
#include "common/log.h"
#include "plugin/loader/real_nccl.h"
#include "tuner/routing.h"

namespace nccl_lamport {

namespace {

// Only called for datatypes routeAllReduce accepted, which lamportDataTypeOf maps.
LamportDataType toLamportType(ncclDataType_t datatype) {
  LamportDataType type = LamportDataType::kFloat32;
  lamportDataTypeOf(datatype, &type);
  return type;
}

/**
 * Orders this call after the communicator's previous Lamport call when that one went to another
 * stream: NCCL serialises a communicator's operations whatever their streams, and two Lamport
 * rounds of one communicator must never overlap (they share the rotation state). Costs nothing
 * while the stream stays the same. Both streams must be capturing into one graph, or neither.
 */
void orderAfterPreviousStream(LamportComm& lc, cudaStream_t stream) {
  const bool first = !lc.hasLastStream;
  cudaStream_t last = lc.lastStream;
  lc.lastStream = stream;
  lc.hasLastStream = true;
  // A null stream is the legacy default stream, a real stream: only "no call yet" skips this.
  if (first || last == stream || lc.orderEvent == nullptr) return;
  cudaStreamCaptureStatus lastStatus = cudaStreamCaptureStatusNone;
  cudaStreamCaptureStatus newStatus = cudaStreamCaptureStatusNone;
  const bool queried = cudaStreamIsCapturing(last, &lastStatus) == cudaSuccess &&
                       cudaStreamIsCapturing(stream, &newStatus) == cudaSuccess;
  cudaError_t err = cudaErrorNotSupported;
  if (queried && (lastStatus == cudaStreamCaptureStatusNone) == (newStatus == cudaStreamCaptureStatusNone)) {
    err = cudaEventRecord(lc.orderEvent, last);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(stream, lc.orderEvent, 0);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky; keep it from surfacing in the user's next check
    if (!lc.streamWarned.exchange(true)) {
      LAMPORT_INFO(kSubsysColl,
                   "comm %p rank %d: allreduce calls alternate between streams that cannot be ordered "
                   "(%s); order them yourself (events) or use one stream per communicator",
                   static_cast<void*>(lc.comm), lc.rank, queried ? cudaGetErrorString(err) : "capture state unknown");
    }
  }
}

/** Runs one allreduce on the Lamport kernel of `path` (one-shot or two-shot) of lc, on lc's
 *  device, leaving the caller's current device as it was. */
ncclResult_t launchLamport(LamportComm& lc, AllReducePath path, const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, cudaStream_t stream) {
  ncclResult_t asyncError = lamportAsyncError(lc);
  if (asyncError != ncclSuccess) return asyncError;

  LamportOneShotArgs args = lc.launchTemplate;
  args.sendbuff = sendbuff;
  args.recvbuff = recvbuff;
  args.count = count;
  args.datatype = toLamportType(datatype);
  args.op = op == ncclAvg ? LamportReduceOp::kAvg : LamportReduceOp::kSum;
  // One-shot: the template's kernel (kFast, or kBaseline with NCCL_LAMPORT_BASELINE_KERNEL=1).
  if (path == AllReducePath::kLamportTwoShot) args.variant = LamportKernelVariant::kTwoShot;

  cudaError_t err;
  {
    ScopedDevice onCommDevice(lc.cudaDev);
    orderAfterPreviousStream(lc, stream);
    err = launchLamportOneShot(args, stream);
  }
  if (err != cudaSuccess) {
    LAMPORT_WARN("comm %p rank %d: Lamport kernel launch failed: %s", static_cast<void*>(lc.comm), lc.rank,
                 cudaGetErrorString(err));
    return ncclUnhandledCudaError;
  }
  lc.lamportCalls.fetch_add(1, std::memory_order_relaxed);
  // Like NCCL's own per-collective line: INFO, subsystem COLL (NCCL_DEBUG_SUBSYS=COLL shows it).
  LAMPORT_INFO(kSubsysColl, "AllReduce comm %p rank %d count %zu datatype %d op %d stream %p: Lamport %s",
               static_cast<void*>(lc.comm), lc.rank, count, static_cast<int>(datatype), static_cast<int>(op),
               static_cast<void*>(stream), path == AllReducePath::kLamportTwoShot ? "two-shot" : "one-shot");
  return ncclSuccess;
}

}  // namespace

AllReducePath pathFor(const LamportComm* lc, size_t count, ncclDataType_t datatype, ncclRedOp_t op) {
  if (lc == nullptr || !interposerEnabled()) return AllReducePath::kNccl;
  // After ncclCommFinalize (collective, so every rank is past the same call) NCCL answers.
  if (lc->finalized.load(std::memory_order_relaxed)) return AllReducePath::kNccl;
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
  std::shared_ptr<LamportComm> lc =
      interposerEnabled() && comm != nullptr ? CommRegistry::instance().find(comm) : nullptr;
  // A non-blocking split's child used before anything told us about it (plugin/comm/deferred_setup.h).
  if (lc == nullptr && comm != nullptr && interposerEnabled() && adoptPendingChild(comm)) {
    lc = CommRegistry::instance().find(comm);
  }
  if (lc != nullptr && lc->setupPending.load(std::memory_order_acquire)) {
    // Used before our ncclCommGetAsyncError reported it ready. Not ready for NCCL either: NCCL's
    // answer. Ready for NCCL: our set-up thread may be using the communicator, so wait for it;
    // every rank then routes this call the same way.
    ncclResult_t result = ncclSuccess;
    if (waitForDeferredSetup(comm, [&] { return real(sendbuff, recvbuff, count, datatype, op, comm, stream); },
                             &result) == PendingCall::kAnswered) {
      return result;
    }
    lc = CommRegistry::instance().find(comm);
  }
  if (lc == nullptr) return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  // Null buffers are invalid arguments: NCCL reports them with its own code and message.
  const AllReducePath path = pathFor(lc.get(), count, datatype, op);
  if (path == AllReducePath::kNccl || sendbuff == nullptr || recvbuff == nullptr) {
    lc->ncclCalls.fetch_add(1, std::memory_order_relaxed);
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  return launchLamport(*lc, path, sendbuff, recvbuff, count, datatype, op, stream);
}
