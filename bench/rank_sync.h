// nccl-lamport-bench: how a rank waits. Every wait for the GPU polls the stream and, while it
// waits, watches its peers (a failed or vanished rank makes the others stop with a clear message
// instead of spinning until the launcher's timeout), NCCL's asynchronous error of the
// communicator, and the rank's deadline.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>

#include "bench/rank_launcher.h"
#include "bench/rank_results.h"

namespace nccl_lamport::bench {

class RankSync {
 public:
  /** deadlineSeconds: from now; a wait still unfinished then throws. */
  RankSync(RankContext& ctx, double deadlineSeconds);

  /** The communicator and stream the barrier uses; barrierBuffer holds one float on the device. */
  void attach(ncclComm_t comm, cudaStream_t stream, float* barrierBuffer);

  /** Prefix of the phases that follow ("size 4096 B"), until the next call. */
  void setContext(const std::string& context);
  /** Records what the rank does now, for failure messages ("size 4096 B: graph capture"). */
  void setPhase(const std::string& phase);
  [[nodiscard]] const std::string& phase() const { return phase_; }

  /**
   * Waits until the stream is idle. Throws BenchError on a CUDA error, an NCCL async error or
   * the deadline, PeerFailure when a peer failed or died.
   */
  void waitStream(cudaStream_t stream);

  /**
   * Ranks start together: a one-float stock-NCCL allreduce (pncclAllReduce, never the plugin)
   * on the attached stream, then waitStream.
   */
  void barrier();

  /** Throws PeerFailure if a peer set its failed flag or its process is gone. */
  void checkPeers() const;

  RankSlot& mySlot() const;
  const RankSlot& slotOf(int rank) const;

 private:
  void checkAsyncError() const;

  RankContext& ctx_;
  std::chrono::steady_clock::time_point deadline_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* barrierBuffer_ = nullptr;
  std::string context_;
  std::string phase_;
};

}  // namespace nccl_lamport::bench
