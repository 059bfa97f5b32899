// How a workspace set-up that runs off the user's thread (non-blocking communicators) can be
// stopped by ncclCommAbort / ncclCommDestroy without ever touching a freed communicator.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace nccl_lamport {

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
};

/**
 * After a grouped call on non-blocking communicators returned ncclInProgress: polls the real
 * ncclCommGetAsyncError of each until none is in progress. Returns the first error, ncclSuccess,
 * or ncclInvalidUsage if the set-up was cancelled meanwhile. `control` may be null.
 */
ncclResult_t waitUntilEnqueued(const std::vector<ncclComm_t>& comms, SetupControl* control);

/** cudaStreamSynchronize that gives up (cudaErrorNotReady) once `control` is cancelled. */
cudaError_t waitStream(cudaStream_t stream, SetupControl* control);

}  // namespace nccl_lamport
