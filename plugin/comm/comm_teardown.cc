// Tear-down of accelerated communicators: abort requests, finalize, hand-over to NCCL, and the
// release of a workspace once no kernel of ours can still use it.
#include "plugin/comm/comm_teardown.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "common/config.h"
#include "plugin/comm/cuda_guards.h"
#include "common/log.h"

namespace nccl_lamport {

uint64_t teardownWaitMs(bool aborting) { return aborting ? kAbortWaitMs : globalConfig().timeoutMs + kTimeoutSlackMs; }

void releaseResources(LamportComm& lc) {
  for (cudaEvent_t* event : {&lc.orderEvent, &lc.doneEvent}) {
    if (*event != nullptr) cudaEventDestroy(*event);
    *event = nullptr;
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
  if (lc != nullptr) lc->routesToNccl.store(true, std::memory_order_relaxed);
}

void handOverToNccl(ncclComm_t comm) {
  const std::shared_ptr<LamportComm> lc = CommRegistry::instance().find(comm);
  if (lc == nullptr) return;
  lc->revoked.store(true);
  lc->routesToNccl.store(true);
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
  try {
    std::thread([cudaDev, done] {
      ScopedRelaxedCapture relaxed;
      cudaSetDevice(cudaDev);
      cudaDeviceSynchronize();
      done->store(true, std::memory_order_release);
    }).detach();
  } catch (const std::exception& e) {  // no thread: keep the workspace rather than free it under a kernel
    LAMPORT_WARN("cannot start a thread to wait for cudaDev %d: %s", cudaDev, e.what());
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (!done->load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

/**
 * Waits up to timeoutMs for lc's own Lamport kernels to finish: none ran, nothing to wait for;
 * every launch was uncaptured and ordered after the previous one, the last launch's doneEvent
 * (polled here, no helper thread); otherwise (a graph holds one of them, or two streams could
 * not be ordered) the whole device, as the only thing that covers them. False on timeout.
 */
bool waitForOwnWork(const LamportComm& lc, uint64_t timeoutMs) {
  if (lc.lamportCalls.load() == 0) return true;
  if (lc.untrackedCalls.load() || lc.doneEvent == nullptr) return waitForDevice(lc.cudaDev, timeoutMs);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    const cudaError_t state = cudaEventQuery(lc.doneEvent);
    if (state != cudaErrorNotReady) {
      if (state != cudaSuccess) cudaGetLastError();  // a sticky error is the user's to see, not ours
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Workspaces whose kernels may still run: never unmapped, so a late kernel cannot fault.
std::mutex gLeakedMutex;
std::vector<std::shared_ptr<LamportComm>> gLeaked;

}  // namespace

void releaseComm(ncclComm_t comm, bool aborting) { releaseCommEntry(CommRegistry::instance().remove(comm), aborting); }

void releaseCommEntry(std::shared_ptr<LamportComm> lc, bool aborting) {
  if (lc == nullptr) return;
  const ncclComm_t comm = lc->comm;
  char name[96];  // by its handle; before its first call under tuner activation, by NCCL's commId
  if (comm != nullptr) {
    snprintf(name, sizeof(name), "comm %p rank %d", static_cast<void*>(comm), lc->reportedRank());
  } else {
    snprintf(name, sizeof(name), "commId 0x%016llx Lamport slot %d (never called)",
             static_cast<unsigned long long>(lc->commId), lc->lamportRank);
  }
  LAMPORT_INFO(kSubsysInit, "%s: %llu allreduce calls ran on Lamport kernels, %llu went to NCCL", name,
               static_cast<unsigned long long>(lc->lamportCalls.load()), static_cast<unsigned long long>(lc->ncclCalls.load()));
  if (!lc->eligible && !lc->setupFailed) return;
  // An abort must return promptly (our kernels stop within microseconds once the flag is set);
  // a destroy waits as long as one of our kernels may legitimately wait for its peers. Only this
  // communicator's own kernels count: another one stuck on a dead peer, or a long kernel of the
  // user, must neither hold this tear-down nor make it leak the workspace. A failed set-up's
  // own work is the exchange all-gather NCCL ran on the device, which only the device covers.
  const uint64_t waitMs = teardownWaitMs(aborting);
  const bool idle = lc->setupFailed ? waitForDevice(lc->cudaDev, waitMs) : waitForOwnWork(*lc, waitMs);
  if (!idle) {
    LAMPORT_WARN("%s: its Lamport kernels on cudaDev %d still run after %llu ms; keeping its workspace (%zu bytes) "
                 "mapped rather than freeing memory a kernel may still use",
                 name, lc->cudaDev, static_cast<unsigned long long>(waitMs), lc->local.size());
    std::lock_guard<std::mutex> lock(gLeakedMutex);
    gLeaked.push_back(std::move(lc));
    return;
  }
  ScopedRelaxedCapture relaxed;
  ScopedDevice onCommDevice(lc->cudaDev);
  releaseResources(*lc);
}

}  // namespace nccl_lamport
