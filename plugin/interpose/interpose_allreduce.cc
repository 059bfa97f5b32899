// The hot path: ncclAllReduce (docs/design.md, "Routing" and "Streams").
//
// The decision depends only on values identical on every rank (count, datatype, op, the
// communicator's agreed state and routing table), never on pointers, streams, capture state or
// timing, so ranks cannot diverge. Invalid arguments go to NCCL, so users see NCCL's own errors.
// Inside ncclGroupStart/End a call we take is launched at the outermost ncclGroupEnd, as NCCL
// launches its own share of a group, but before that share: on every stream the group's Lamport
// kernels come first, in call order, on every rank (docs/design.md, "Groups"). A group ended by
// ncclGroupSimulateEnd launches nothing: its calls are handed to NCCL's simulation instead.
#include <cuda_runtime_api.h>

#include <strings.h>

#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "include/nccl_lamport.h"
#include "kernels/lamport_allreduce.h"
#include "plugin/interpose/allreduce_nvtx.h"
#include "plugin/abi/entry_guard.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cuda_guards.h"
#include "plugin/comm/deferred_setup.h"
#include "plugin/comm/nccl_settings.h"
#include "plugin/comm/pending_children.h"
#include "plugin/abi/export.h"
#include "plugin/hooks/tuner_activation.h"
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

/** The capture id of stream (0 when it is not capturing), or false if CUDA cannot tell. */
bool captureIdOf(cudaStream_t stream, unsigned long long* id) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  *id = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, id) != cudaSuccess) return false;
  if (status == cudaStreamCaptureStatusNone) *id = 0;
  return status != cudaStreamCaptureStatusInvalidated;
}

/**
 * Under lc.orderMutex, before the launch on `stream` (capture id `captureId`): orders it after the
 * communicator's previous Lamport call when that one went to another stream. Uncaptured: a wait
 * on doneEvent, recorded after that call (the old stream handle is never touched: the user may
 * have destroyed it). Both in one capture (same id): an event recorded on the old stream, which
 * that capture keeps alive. Anything else (two different captures, or a capture and an
 * uncaptured call) cannot be ordered without invalidating the user's capture: left as it is,
 * said once, and tear-down then waits for the device. Costs nothing while the stream stays the same.
 */
void orderAfterPreviousCall(LamportComm& lc, cudaStream_t stream, unsigned long long captureId) {
  // A null stream is the legacy default stream, a real stream: only "no call yet" skips this.
  if (!lc.hasLastStream || lc.doneEvent == nullptr ||
      sameStreamAsLastCall(lc.lastStream, lc.lastThread, stream, std::this_thread::get_id())) {
    return;
  }
  cudaError_t err = cudaErrorNotSupported;
  if (captureId == 0 && lc.lastCaptureId == 0) {
    err = cudaStreamWaitEvent(stream, lc.doneEvent, 0);
  } else if (captureId == lc.lastCaptureId) {
    err = cudaEventRecord(lc.orderEvent, lc.lastStream);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(stream, lc.orderEvent, 0);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky; keep it from surfacing in the user's next check
    lc.untrackedCalls.store(true, std::memory_order_relaxed);
    if (!lc.streamWarned.exchange(true)) {
      LAMPORT_INFO(kSubsysColl,
                   "comm %p rank %d: allreduce calls alternate between streams that cannot be ordered "
                   "(%s); order them yourself (events) or use one stream per communicator",
                   static_cast<void*>(lc.comm), lc.reportedRank(),
                   err == cudaErrorNotSupported ? "different stream captures" : cudaGetErrorString(err));
    }
  }
}

/** The real ncclCommGetAsyncError says ncclSuccess for comm (a couple of atomic loads in NCCL). */
bool ncclReportsReady(ncclComm_t comm) {
  const auto getAsyncError = REAL_NCCL(ncclCommGetAsyncError);  // cached by REAL_NCCL, no guard
  ncclResult_t state = ncclSuccess;
  return getAsyncError == nullptr || (getAsyncError(comm, &state) == ncclSuccess && state == ncclSuccess);
}

/** Runs one allreduce on the Lamport kernel of `path` (one-shot or two-shot) of lc, on lc's
 *  device, leaving the caller's current device as it was. */
ncclResult_t launchLamport(LamportComm& lc, AllReducePath path, const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, cudaStream_t stream) {
  ncclResult_t asyncError = lamportAsyncError(lc);
  if (asyncError != ncclSuccess) return asyncError;
  unsigned long long captureId = 0;
  if (!captureIdOf(stream, &captureId)) {
    cudaGetLastError();
    return ncclUnhandledCudaError;
  }

  LamportAllReduceArgs args = lc.launchTemplate;
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
    std::lock_guard<std::mutex> ordering(lc.orderMutex);
    orderAfterPreviousCall(lc, stream, captureId);
    err = launchLamportAllReduce(args, stream);
    if (err == cudaSuccess) {
      lc.lastStream = stream;
      lc.lastThread = std::this_thread::get_id();
      lc.hasLastStream = true;
      lc.lastCaptureId = captureId;
      // Uncaptured: the completion mark tear-down and the next call on another stream wait on.
      // Captured: a graph replays anywhere, any time; tear-down falls back to the device.
      if (captureId != 0 || cudaEventRecord(lc.doneEvent, stream) != cudaSuccess) {
        cudaGetLastError();
        lc.untrackedCalls.store(true, std::memory_order_relaxed);
      }
    }
  }
  if (err != cudaSuccess) {
    LAMPORT_WARN("comm %p rank %d: Lamport kernel launch failed: %s", static_cast<void*>(lc.comm), lc.reportedRank(),
                 cudaGetErrorString(err));
    return ncclUnhandledCudaError;
  }
  lc.lamportCalls.fetch_add(1, std::memory_order_relaxed);
  // Like NCCL's own per-collective line: INFO, subsystem COLL (NCCL_DEBUG_SUBSYS=COLL shows it).
  LAMPORT_INFO(kSubsysColl, "AllReduce comm %p rank %d count %zu datatype %d op %d stream %p: Lamport %s",
               static_cast<void*>(lc.comm), lc.reportedRank(), count, static_cast<int>(datatype), static_cast<int>(op),
               static_cast<void*>(stream), path == AllReducePath::kLamportTwoShot ? "two-shot" : "one-shot");
  return ncclSuccess;
}

/** A Lamport allreduce taken inside ncclGroupStart/End: launched at the outermost ncclGroupEnd. */
struct GroupedAllReduce {
  std::shared_ptr<LamportComm> lc;
  AllReducePath path;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t datatype;
  ncclRedOp_t op;
  cudaStream_t stream;
};

// NCCL's group state is per thread (ncclGroupDepth is thread-local), so is this list.
thread_local std::vector<GroupedAllReduce> tGroupedAllReduces;

/** False when NCCL, with pointer checks on, would refuse ptr for lc (NCCL 2.28
 *  src/misc/argcheck.cc, CudaPtrCheck): no device address, or device memory of another GPU. */
bool pointerPassesNcclCheck(const LamportComm& lc, const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // not sticky; keep it from surfacing in the user's next check
    return false;
  }
  if (attr.devicePointer == nullptr) return false;
  return attr.type != cudaMemoryTypeDevice || attr.device == lc.cudaDev;
}

}  // namespace

bool ncclChecksPointers(const char* checkPointers, const char* checkMode) {
  // NCCL_CHECK_POINTERS is an integer parameter that counts only as 1; NCCL_CHECK_MODE
  // (NCCL 2.29+) DEBUG_LOCAL and DEBUG_GLOBAL check pointers too.
  long long check = 0;
  if (ncclIntegerParameter(checkPointers, &check) && check == 1) return true;
  return checkMode != nullptr && (strcasecmp(checkMode, "DEBUG_LOCAL") == 0 || strcasecmp(checkMode, "DEBUG_GLOBAL") == 0);
}

bool sameStreamAsLastCall(cudaStream_t lastStream, std::thread::id lastThread, cudaStream_t stream,
                          std::thread::id thread) {
  if (stream != lastStream) return false;
  return stream != cudaStreamPerThread || thread == lastThread;
}

ncclResult_t launchGroupedAllReduces() noexcept try {
  std::vector<GroupedAllReduce> calls;
  calls.swap(tGroupedAllReduces);
  ncclResult_t first = ncclSuccess;
  for (const GroupedAllReduce& c : calls) {
    ncclResult_t result;
    if (CommRegistry::instance().find(c.lc->comm) != c.lc) {
      // Destroyed or aborted inside its own group: its workspace may be unmapped already.
      LAMPORT_WARN("ncclGroupEnd: comm %p rank %d was destroyed inside the group of its allreduce; that call "
                   "is not run", static_cast<void*>(c.lc->comm), c.lc->reportedRank());
      result = ncclInvalidArgument;
    } else {
      result = launchLamport(*c.lc, c.path, c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, c.stream);
    }
    if (first == ncclSuccess) first = result;  // the others still launch: each has its own peers
  }
  return first;
} catch (...) {
  return resultOfException("ncclGroupEnd");
}

ncclResult_t simulateGroupedAllReduces() noexcept try {
  const auto real = REAL_NCCL(ncclAllReduce);  // cached by REAL_NCCL (no static guard held across the resolution)
  std::vector<GroupedAllReduce> calls;
  calls.swap(tGroupedAllReduces);
  ncclResult_t first = ncclSuccess;
  for (const GroupedAllReduce& c : calls) {
    // NCCL's group is still open: the call joins it, and ncclGroupSimulateEnd estimates it.
    const ncclResult_t result = real == nullptr ? ncclSystemError
                                                : real(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op,
                                                       c.lc->comm, c.stream);
    if (first == ncclSuccess) first = result;
  }
  return first;
} catch (...) {
  return resultOfException("ncclGroupSimulateEnd");
}

AllReducePath pathFor(const LamportComm* lc, size_t count, ncclDataType_t datatype, ncclRedOp_t op) {
  if (lc == nullptr || !interposerEnabled()) return AllReducePath::kNccl;
  // After ncclCommFinalize (collective, so every rank is past the same call) NCCL answers.
  if (lc->routesToNccl.load(std::memory_order_relaxed)) return AllReducePath::kNccl;
  return routeAllReduce(lc->table, lc->eligible, lc->nRanks, datatype, op, count);
}

}  // namespace nccl_lamport

using namespace nccl_lamport;

NCCL_LAMPORT_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                               cudaStream_t stream) try {
  const auto real = REAL_NCCL(ncclAllReduce);  // cached by REAL_NCCL (no static guard held across the resolution)
  if (real == nullptr) return realNcclMissing("ncclAllReduce");
  // A non-blocking split's child used before anything told us about it is adopted here
  // (plugin/comm/pending_children.h).
  std::shared_ptr<LamportComm> lc = interposerEnabled() ? findOrAdoptChild(comm) : nullptr;
  // Tuner activation: a communicator seen for the first time is bound here.
  if (lc == nullptr && comm != nullptr && interposerEnabled() && tunerHooksInstalled()) {
    bindHookedComm(comm);
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
  // Null buffers are invalid arguments: NCCL reports them with its own code and message. So is a
  // communicator NCCL has marked failed (or has an operation in progress on): NCCL answers every
  // collective with that state first (ncclCommEnsureReady), so it gets the call.
  // With NCCL's pointer checks on (read once, as NCCL reads them at init), a buffer NCCL would
  // refuse goes to NCCL for its error instead of faulting in our kernel; this rank-local test
  // can only differ between ranks for a call that is invalid anyway.
  static const bool checkPointers = ncclChecksPointers(getenv("NCCL_CHECK_POINTERS"), getenv("NCCL_CHECK_MODE"));
  const AllReducePath path = pathFor(lc.get(), count, datatype, op);
  if (path == AllReducePath::kNccl || sendbuff == nullptr || recvbuff == nullptr || !ncclReportsReady(comm) ||
      (checkPointers && !(pointerPassesNcclCheck(*lc, sendbuff) && pointerPassesNcclCheck(*lc, recvbuff)))) {
    lc->ncclCalls.fetch_add(1, std::memory_order_relaxed);
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  const AllReduceNvtxRange range;  // NCCL's own range, which a call we take never reaches
  if (groupDepth() > 0) {
    // An error the launch would report now, NCCL would report at ncclGroupEnd; ours is reported
    // at once, as before the group.
    const ncclResult_t asyncError = lamportAsyncError(*lc);
    if (asyncError != ncclSuccess) return asyncError;
    tGroupedAllReduces.push_back(GroupedAllReduce{lc, path, sendbuff, recvbuff, count, datatype, op, stream});
    return ncclSuccess;
  }
  return launchLamport(*lc, path, sendbuff, recvbuff, count, datatype, op, stream);
} catch (...) {
  return resultOfException("ncclAllReduce");
}
