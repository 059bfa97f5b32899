#include "plugin/comm/deferred_setup.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "plugin/abi/entry_guard.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/comm_teardown.h"
#include "plugin/comm/cta_cap.h"
#include "common/config.h"
#include "plugin/comm/cuda_guards.h"
#include "common/log.h"
#include "plugin/loader/real_nccl.h"
#include "plugin/comm/setup_control.h"
#include "plugin/comm/workspace_setup.h"

namespace nccl_lamport {

/** One batch of non-blocking communicators set up together, and its helper's progress. */
struct DeferredBatch {
  explicit DeferredBatch(const std::vector<ncclComm_t>& created) : comms(created), control(created) {}
  const std::vector<ncclComm_t> comms;
  std::vector<std::shared_ptr<LamportComm>> placeholders;  // registry entries until published, as comms
  SetupControl control;
  std::atomic<bool> ncclReady{false};  // NCCL reported every comm of the batch ready
  std::mutex doneMutex;
  std::condition_variable doneCv;
  bool done = false;
  std::vector<ncclComm_t> gone;  // aborted or destroyed while pending (under doneMutex)
};

namespace {

std::mutex gBatchesMutex;
std::unordered_map<ncclComm_t, std::shared_ptr<DeferredBatch>>& batches() {
  // Leaked on purpose, like the registry: wrappers may run from static destructors at exit.
  static auto* map = new std::unordered_map<ncclComm_t, std::shared_ptr<DeferredBatch>>();
  return *map;
}

std::shared_ptr<DeferredBatch> findBatch(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(gBatchesMutex);
  auto it = batches().find(comm);
  return it == batches().end() ? nullptr : it->second;
}

void finishBatch(DeferredBatch& batch) {
  for (const auto& placeholder : batch.placeholders) {
    placeholder->setupPending.store(false, std::memory_order_release);
  }
  std::lock_guard<std::mutex> lock(batch.doneMutex);
  batch.done = true;
  batch.doneCv.notify_all();
}

/**
 * Replaces the placeholders the set-up did not publish (NCCL never made the batch ready, a
 * communicator was revoked during it, or the set-up failed) with final "stays on NCCL" entries
 * (new objects: callers may still hold a placeholder; no NCCL call: the communicator may be
 * stopped). Skips communicators aborted meanwhile: their handles may already be reused.
 */
void publishOnNccl(DeferredBatch& batch, const std::string& why) {
  std::lock_guard<std::mutex> lock(batch.doneMutex);
  for (const auto& placeholder : batch.placeholders) {
    bool gone = false;
    for (ncclComm_t c : batch.gone) gone = gone || c == placeholder->comm;
    // Only where the placeholder is still the entry: a published workspace (a cancel that came
    // after set-up) is released by its own tear-down, never dropped here.
    if (gone || CommRegistry::instance().find(placeholder->comm) != placeholder) continue;
    auto lc = std::make_unique<LamportComm>();
    lc->comm = placeholder->comm;
    lc->nonBlocking = true;
    lc->maxCtas = placeholder->maxCtas;  // its children without a config still inherit it
    lc->reason = why;
    lc->routesToNccl.store(placeholder->routesToNccl.load());
    lc->revoked.store(placeholder->revoked.load());
    LAMPORT_INFO(kSubsysInit, "comm %p: Lamport OFF, every call goes to NCCL: %s", static_cast<void*>(lc->comm),
                 why.c_str());
    CommRegistry::instance().insert(std::move(lc));
  }
}

void runBatch(const std::shared_ptr<DeferredBatch>& batch) noexcept try {
  ScopedRelaxedCapture relaxed;
  // No deadline: NCCL's own init is what is in progress (stock NCCL would be too), and a rank
  // that gave up here would leave its peers' round 1 without a partner. An abort cancels it.
  const ncclResult_t ready = waitUntilNcclReady(batch->comms, &batch->control);
  if (ready == ncclSuccess) {
    batch->ncclReady.store(true, std::memory_order_release);
    setupWorkspaces(batch->comms, SetupOptions{/*nonBlocking=*/true, &batch->control});
  }
  if (batch->control.cancelled.load()) {
    publishOnNccl(*batch, "the set-up was cancelled");
  } else if (ready != ncclSuccess) {
    publishOnNccl(*batch, std::string("NCCL did not make the communicator ready: ") + ncclErrorText(ready));
  } else {
    // Only communicators revoked (or shrunk with NCCL_SHRINK_ABORT) during their set-up are
    // left: the others of the batch were published by it, or aborted (nothing under the handle).
    publishOnNccl(*batch, "set-up stopped: the communicator was revoked during it");
  }
  finishBatch(*batch);
} catch (...) {
  // On a thread of ours, so nothing may escape (std::terminate); the set-up's own steps already
  // took part in every exchange round (guardedStep), so what is left is to stop waiting callers.
  resultOfException("deferred workspace set-up");
  batch->control.cancelled.store(true);
  try {
    publishOnNccl(*batch, "the set-up failed");
  } catch (...) {
  }
  finishBatch(*batch);
}

/** Registers the batch's placeholders and the batch under every comm, or, where that throws
 *  (host memory), takes out what it had registered and rethrows: a placeholder left without its
 *  batch would report its communicator in progress for ever. */
void publishBatch(const std::shared_ptr<DeferredBatch>& batch) {
  try {
    for (const auto& placeholder : batch->placeholders) CommRegistry::instance().insert(placeholder);
    std::lock_guard<std::mutex> lock(gBatchesMutex);
    for (ncclComm_t comm : batch->comms) batches()[comm] = batch;
  } catch (...) {
    for (const auto& placeholder : batch->placeholders) {
      CommRegistry::instance().removeIfSame(placeholder->comm, placeholder);
    }
    std::lock_guard<std::mutex> lock(gBatchesMutex);
    for (ncclComm_t comm : batch->comms) {
      auto it = batches().find(comm);
      if (it != batches().end() && it->second == batch) batches().erase(it);
    }
    throw;
  }
}

}  // namespace

void startDeferredSetup(const std::vector<ncclComm_t>& created) {
  std::vector<ncclComm_t> comms;
  for (ncclComm_t comm : created) {
    if (comm != nullptr) comms.push_back(comm);
  }
  auto batch = std::make_shared<DeferredBatch>(comms);
  for (ncclComm_t comm : comms) {
    auto placeholder = std::make_unique<LamportComm>();
    placeholder->comm = comm;
    placeholder->nonBlocking = true;
    // What a split without a config inherits while the set-up is pending (the set-up takes the note).
    placeholder->maxCtas = effectiveCtaCap(peekCtaCap(comm));
    placeholder->reason = "non-blocking communicator: set-up waits for NCCL to report it ready";
    placeholder->setupPending.store(true, std::memory_order_relaxed);
    batch->placeholders.push_back(std::shared_ptr<LamportComm>(std::move(placeholder)));
  }
  if (batch->comms.empty()) return;
  publishBatch(batch);
  LAMPORT_INFO(kSubsysInit, "%zu non-blocking communicator(s): workspace set-up deferred until NCCL reports them ready",
               batch->comms.size());
  try {
    std::thread([batch] { runBatch(batch); }).detach();
  } catch (const std::exception& e) {
    LAMPORT_WARN("cannot start the set-up thread (%s): non-blocking communicators stay on NCCL", e.what());
    batch->control.cancelled.store(true);
    try {
      publishOnNccl(*batch, "the set-up thread could not start");
    } catch (...) {  // the placeholders stay: no longer pending once finishBatch ran, and on NCCL
    }
    finishBatch(*batch);
  }
}

namespace {

bool isGone(DeferredBatch& batch, ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(batch.doneMutex);
  for (ncclComm_t c : batch.gone) {
    if (c == comm) return true;
  }
  return false;
}

void markGone(DeferredBatch& batch, ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(batch.doneMutex);
  if (std::find(batch.gone.begin(), batch.gone.end(), comm) == batch.gone.end()) batch.gone.push_back(comm);
}

/** Under batch.control.ncclMutex: stops the set-up for comm alone (the batch's other
 *  communicators finish theirs with their peers, whose exchange includes them), and records comm
 *  as gone if it is. A communicator handed to NCCL is no longer "in progress" for us: the program
 *  gets NCCL's state for it at once, not after its siblings' set-up. */
void cancelLocked(DeferredBatch& batch, ncclComm_t comm, CancelReason why) {
  batch.control.stop(comm);
  if (why == CancelReason::kCommGoingAway) {
    markGone(batch, comm);
  } else {
    for (const auto& placeholder : batch.placeholders) {
      if (placeholder->comm == comm) placeholder->setupPending.store(false, std::memory_order_release);
    }
  }
  // Calls and joins waiting on comm stop waiting (their predicate reads the stop): taking the
  // mutex between the store and the notification keeps a waiter from missing it.
  { std::lock_guard<std::mutex> lock(batch.doneMutex); }
  batch.doneCv.notify_all();
}

}  // namespace

PendingCall waitForDeferredSetup(ncclComm_t comm, absl::FunctionRef<ncclResult_t()> callNccl, ncclResult_t* result,
                                 bool destroysComm) {
  const std::shared_ptr<DeferredBatch> batch = findBatch(comm);
  if (batch == nullptr) return PendingCall::kProceed;
  if (!batch->ncclReady.load(std::memory_order_acquire)) {
    // Ask NCCL ourselves (the set-up thread may not have looked yet), serialised with it: NCCL's
    // ncclCommGetAsyncError also completes the init job, which two threads must not do at once.
    std::lock_guard<std::mutex> lock(batch->control.ncclMutex);
    if (isGone(*batch, comm)) {  // an abort has begun (it waits for this mutex): NCCL must not see this call
      *result = ncclInvalidArgument;
      return PendingCall::kAnswered;
    }
    ncclResult_t state = ncclInProgress;
    // Again under the mutex: the set-up thread may have seen NCCL ready (and started the exchange
    // on this communicator) between the check above and this lock; NCCL must then not get the call.
    if (!batch->ncclReady.load(std::memory_order_acquire) && !batch->control.stopped(comm) &&
        (REAL_NCCL(ncclCommGetAsyncError)(comm, &state) != ncclSuccess || state == ncclInProgress)) {
      *result = callNccl();
      if (destroysComm && *result == ncclSuccess) cancelLocked(*batch, comm, CancelReason::kCommGoingAway);
      return PendingCall::kAnswered;
    }
  }
  {
    // Bounded like a Lamport kernel's wait for its peers (and ncclCommAbort's for the set-up): a
    // set-up whose round 2 waits for a peer that died between the rounds never ends by itself.
    // NCCL_LAMPORT_TIMEOUT_MS is at most 30 days (common/knobs.h): no overflow in milliseconds.
    const uint64_t boundMs = teardownWaitMs(/*aborting=*/false);
    std::unique_lock<std::mutex> lock(batch->doneMutex);
    // Also ends when comm alone was stopped: the set-up never touches it again.
    if (!batch->doneCv.wait_for(lock, std::chrono::milliseconds(boundMs),
                                [&] { return batch->done || batch->control.stopped(comm); })) {
      lock.unlock();
      LAMPORT_WARN("comm %p: the workspace set-up did not finish within %llu ms (a peer gone or stuck in its "
                   "exchange); the call is answered ncclInvalidArgument, as NCCL answers a communicator still in "
                   "progress: abort it",
                   static_cast<void*>(comm), static_cast<unsigned long long>(boundMs));
      *result = ncclInvalidArgument;
      return PendingCall::kAnswered;
    }
  }
  if (isGone(*batch, comm)) {
    LAMPORT_WARN("comm %p: the communicator was aborted by another thread while this call waited for it",
                 static_cast<void*>(comm));
    *result = ncclInvalidArgument;
    return PendingCall::kAnswered;
  }
  return PendingCall::kProceed;
}

void cancelDeferredSetup(ncclComm_t comm, CancelReason why) {
  const std::shared_ptr<DeferredBatch> batch = findBatch(comm);
  if (batch == nullptr) return;
  // Gone before we wait for ncclMutex, which the set-up holds while it asks NCCL about its
  // communicators: a call waiting for the set-up that wakes up once the abort has begun returns
  // ncclInvalidArgument instead of reaching NCCL during the abort.
  if (why == CancelReason::kCommGoingAway) markGone(*batch, comm);
  std::lock_guard<std::mutex> lock(batch->control.ncclMutex);
  cancelLocked(*batch, comm, why);
}

DetachedSetup findDeferredSetup(ncclComm_t comm) { return findBatch(comm); }

void forgetDeferredSetupIfSame(ncclComm_t comm, const DetachedSetup& setup) {
  if (setup == nullptr) return;
  std::lock_guard<std::mutex> lock(gBatchesMutex);
  auto it = batches().find(comm);
  if (it != batches().end() && it->second == setup) batches().erase(it);
}

bool joinDeferredSetup(ncclComm_t comm, uint64_t timeoutMs) {
  DetachedSetup batch;
  {
    std::lock_guard<std::mutex> lock(gBatchesMutex);
    auto it = batches().find(comm);
    if (it == batches().end()) return true;
    batch = std::move(it->second);
    batches().erase(it);
  }
  return joinDetachedSetup(batch, comm, timeoutMs);
}

bool joinDetachedSetup(const DetachedSetup& batch, ncclComm_t comm, uint64_t timeoutMs) {
  if (batch == nullptr) return true;
  std::unique_lock<std::mutex> lock(batch->doneMutex);
  // A stopped comm is let go of at once (no NCCL call on it again; the set-up frees what it
  // allocated for it when it ends, with its siblings).
  if (batch->doneCv.wait_for(lock, std::chrono::milliseconds(timeoutMs),
                             [&] { return batch->done || batch->control.stopped(comm); })) {
    return true;
  }
  LAMPORT_WARN("comm %p: the deferred workspace set-up did not stop within %llu ms; it ends on its own",
               static_cast<void*>(comm), static_cast<unsigned long long>(timeoutMs));
  return false;
}

}  // namespace nccl_lamport
