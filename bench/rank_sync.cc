#include "bench/rank_sync.h"

#include <errno.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "bench/cuda_util.h"

namespace nccl_lamport::bench {

namespace {

// Polling: spin this long before sleeping between polls (keeps the barrier's wake-up skew small).
constexpr std::chrono::microseconds kSpinBeforeSleep{2000};
constexpr std::chrono::microseconds kPollSleep{50};

}  // namespace

RankSync::RankSync(RankContext& ctx, double deadlineSeconds)
    : ctx_(ctx),
      deadline_(std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(deadlineSeconds))) {}

void RankSync::attach(ncclComm_t comm, cudaStream_t stream, float* barrierBuffer) {
  comm_ = comm;
  stream_ = stream;
  barrierBuffer_ = barrierBuffer;
}

RankSlot& RankSync::mySlot() const { return *static_cast<RankSlot*>(ctx_.myResults()); }

const RankSlot& RankSync::slotOf(int rank) const {
  return *static_cast<const RankSlot*>(ctx_.resultsOf(rank));
}

void RankSync::setContext(const std::string& context) { context_ = context; }

void RankSync::setPhase(const std::string& phase) {
  phase_ = context_.empty() ? phase : context_ + ": " + phase;
  RankHeader& h = mySlot().header;
  const size_t n = std::min(phase_.size(), sizeof(h.phase) - 1);
  std::memcpy(h.phase, phase_.data(), n);
  h.phase[n] = '\0';
}

void RankSync::checkPeers() const {
  for (int r = 0; r < ctx_.nRanks; ++r) {
    if (r == ctx_.rank) continue;
    const RankHeader& h = slotOf(r).header;
    if (__atomic_load_n(&h.failed, __ATOMIC_ACQUIRE) != 0) {
      throw PeerFailure("stopped because rank " + std::to_string(r) + " failed");
    }
    const int32_t pid = __atomic_load_n(&h.pid, __ATOMIC_ACQUIRE);
    const int32_t finished = __atomic_load_n(&h.finished, __ATOMIC_ACQUIRE);
    // A rank that crashed never sets failed; once the launcher reaps it, its pid is gone.
    if (pid > 0 && finished == 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      throw PeerFailure("stopped because rank " + std::to_string(r) + " died");
    }
  }
}

void RankSync::checkAsyncError() const {
  if (comm_ == nullptr) return;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t res = ncclCommGetAsyncError(comm_, &async);
  if (res != ncclSuccess) checkNccl(res, "ncclCommGetAsyncError");
  if (async != ncclSuccess && async != ncclInProgress) {
    throw BenchError(std::string("communicator reports an asynchronous error: ") +
                     ncclGetErrorString(async));
  }
}

void RankSync::waitStream(cudaStream_t stream) {
  const auto start = std::chrono::steady_clock::now();
  for (unsigned poll = 0;; ++poll) {
    const cudaError_t err = cudaStreamQuery(stream);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) checkCuda(err, "cudaStreamQuery");
    const auto now = std::chrono::steady_clock::now();
    if (poll % 256 == 255 || now - start > kSpinBeforeSleep) {
      checkPeers();
      checkAsyncError();
      if (now > deadline_) {
        throw BenchError("the GPU did not finish before the rank's deadline (--timeout); a peer "
                         "may be stuck");
      }
    }
    if (now - start > kSpinBeforeSleep) std::this_thread::sleep_for(kPollSleep);
  }
}

void RankSync::barrier() {
  BENCH_NCCL(pncclAllReduce(barrierBuffer_, barrierBuffer_, 1, ncclFloat32, ncclSum, comm_, stream_));
  waitStream(stream_);
}

}  // namespace nccl_lamport::bench
