// How a workspace set-up that runs off the user's thread (non-blocking communicators) can be
// stopped by ncclCommAbort / ncclCommDestroy without ever touching a freed communicator.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

namespace nccl_lamport {

class RoundDevice;

/**
 * Shared between a deferred set-up and the wrappers that may end it. Every NCCL call the set-up
 * makes on its communicators holds ncclMutex and first checks `cancelled`; a wrapper that is
 * about to abort or destroy one of them sets `cancelled` under the same mutex. So once the
 * wrapper holds the mutex, the set-up never calls NCCL on those communicators again.
 */
struct SetupControl {
  std::mutex ncclMutex;
  std::atomic<bool> cancelled{false};
};

/** What setupWorkspaces needs to know beyond the communicators. */
struct SetupOptions {
  /** The communicators are non-blocking: a grouped call may return ncclInProgress, and the
   *  set-up then polls ncclCommGetAsyncError before it relies on the stream. */
  bool nonBlocking = false;
  /** Null for set-ups on the user's thread (blocking communicators): nothing can cancel them. */
  SetupControl* control = nullptr;
  /** The device side of the exchange rounds (plugin/comm/exchange_rounds.h); null: CUDA. */
  RoundDevice* device = nullptr;
};

/**
 * Which of the set-up's two exchange rounds a wait belongs to, and so how long it may last.
 * Round 1 (the records) may give up after NCCL_LAMPORT_TIMEOUT_MS: a peer is gone, so this rank
 * skips round 2 (it would queue behind round 1's stuck all-gather) and reports the communicator
 * failed (plugin/comm/exchange_rounds.h); a rank that only failed locally still takes part in
 * round 2 and says "not ok" there, so every rank reaches the same verdict.
 * Round 2 (the ok words) has no later round that could reconcile a rank-local give-up, and
 * round 1 has proved every peer alive: it waits until it completes or the set-up is cancelled.
 */
enum class ExchangeRound { kFirst, kSecond };

/**
 * After a grouped call on non-blocking communicators returned ncclInProgress: polls the real
 * ncclCommGetAsyncError of each until none is in progress. Returns the first error, ncclSuccess,
 * ncclInvalidUsage if the set-up was cancelled meanwhile, or ncclRemoteError once round 1's
 * deadline has passed (a peer that died after init keeps NCCL's enqueue waiting). `control` may
 * be null (then round 2 waits without bound).
 */
ncclResult_t waitUntilEnqueued(const std::vector<ncclComm_t>& comms, SetupControl* control, ExchangeRound round);

/** Polls `query` (cudaStreamQuery of a set-up stream) until it returns anything but
 *  cudaErrorNotReady, with backoff; cudaErrorNotReady once `control` is cancelled or, in round 1,
 *  after NCCL_LAMPORT_TIMEOUT_MS. */
cudaError_t waitForQuery(const std::function<cudaError_t()>& query, SetupControl* control, ExchangeRound round);

/** waitForQuery on cudaStreamQuery(stream); with no control, cudaStreamSynchronize. */
cudaError_t waitStream(cudaStream_t stream, SetupControl* control, ExchangeRound round);

}  // namespace nccl_lamport
