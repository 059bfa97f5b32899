// Tear-down of accelerated communicators: abort requests, finalize, hand-over to NCCL, and the
// release of a workspace once no kernel of ours can still use it.
#include "plugin/comm/comm_teardown.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "common/config.h"
#include "plugin/comm/cuda_guards.h"
#include "common/log.h"

namespace nccl_lamport {

void releaseResources(LamportComm& lc) {
  if (lc.orderEvent != nullptr) {
    cudaEventDestroy(lc.orderEvent);
    lc.orderEvent = nullptr;
  }
  lc.peers.clear();
  lc.local.release();
  if (lc.hostFlags != nullptr) {
    cudaFreeHost(const_cast<LamportHostFlags*>(lc.hostFlags));
    lc.hostFlags = nullptr;
  }
}

void requestAbort(ncclComm_t comm) {
  const std::shared_ptr<LamportComm> lc = CommRegistry::instance().find(comm);
  if (lc != nullptr && lc->hostFlags != nullptr) lc->hostFlags->abort = 1;
}

void markFinalized(ncclComm_t comm) {
  const std::shared_ptr<LamportComm> lc = CommRegistry::instance().find(comm);
  if (lc != nullptr) lc->finalized.store(true, std::memory_order_relaxed);
}

void handOverToNccl(ncclComm_t comm) {
  const std::shared_ptr<LamportComm> lc = CommRegistry::instance().find(comm);
  if (lc == nullptr) return;
  lc->revoked.store(true);
  lc->finalized.store(true);
  if (lc->hostFlags != nullptr) lc->hostFlags->abort = 1;
}

namespace {

/**
 * Waits up to timeoutMs for every kernel on cudaDev to finish. Our kernels run on the user's
 * streams (and in graphs launched anywhere), so the device is the one thing we can wait on; the
 * wait runs on a helper thread so that a kernel of another communicator stuck on a dead peer
 * cannot hold an abort or a destroy forever. False on timeout (the helper thread then finishes
 * whenever the device does).
 */
bool waitForDevice(int cudaDev, uint64_t timeoutMs) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([cudaDev, done] {
    ScopedRelaxedCapture relaxed;
    cudaSetDevice(cudaDev);
    cudaDeviceSynchronize();
    done->store(true, std::memory_order_release);
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (!done->load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// Workspaces whose kernels may still run: never unmapped, so a late kernel cannot fault.
std::mutex gLeakedMutex;
std::vector<std::shared_ptr<LamportComm>> gLeaked;

}  // namespace

void releaseComm(ncclComm_t comm, bool aborting) { releaseCommEntry(CommRegistry::instance().remove(comm), aborting); }

void releaseCommEntry(std::shared_ptr<LamportComm> lc, bool aborting) {
  if (lc == nullptr) return;
  const ncclComm_t comm = lc->comm;
  LAMPORT_INFO(kSubsysInit, "comm %p rank %d: %llu allreduce calls ran on Lamport kernels, %llu went to NCCL",
               static_cast<void*>(comm), lc->rank, static_cast<unsigned long long>(lc->lamportCalls.load()),
               static_cast<unsigned long long>(lc->ncclCalls.load()));
  if (!lc->eligible) return;
  // An abort must return promptly (our kernels stop within microseconds once the flag is set);
  // a destroy waits as long as one of our kernels may legitimately wait for its peers.
  const uint64_t waitMs = aborting ? 2000 : globalConfig().timeoutMs + 1000;
  if (!waitForDevice(lc->cudaDev, waitMs)) {
    LAMPORT_WARN("comm %p rank %d: cudaDev %d still busy after %llu ms; keeping its Lamport workspace (%zu bytes) "
                 "mapped rather than freeing memory a kernel may still use",
                 static_cast<void*>(comm), lc->rank, lc->cudaDev, static_cast<unsigned long long>(waitMs),
                 lc->local.size());
    std::lock_guard<std::mutex> lock(gLeakedMutex);
    gLeaked.push_back(std::move(lc));
    return;
  }
  ScopedRelaxedCapture relaxed;
  ScopedDevice onCommDevice(lc->cudaDev);
  releaseResources(*lc);
}

}  // namespace nccl_lamport
