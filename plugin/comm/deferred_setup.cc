#include "plugin/comm/deferred_setup.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
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

/** Sleeps a little longer each time, up to 5 ms: readiness takes from microseconds to seconds. */
struct Backoff {
  std::chrono::microseconds delay{50};
  void wait() {
    std::this_thread::sleep_for(delay);
    delay = std::min<std::chrono::microseconds>(delay * 2, std::chrono::milliseconds(5));
  }
};

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

/** Round 1's deadline (NCCL_LAMPORT_TIMEOUT_MS from now, saturated: a "never" value must not wrap
 *  into the past); none for round 2 (plugin/comm/setup_control.h, ExchangeRound). */
Deadline deadlineFor(ExchangeRound round) {
  if (round == ExchangeRound::kSecond) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::time_point::max() - now);
  const uint64_t ms = std::min<uint64_t>(globalConfig().timeoutMs, static_cast<uint64_t>(room.count()));
  return now + std::chrono::milliseconds(ms);
}

bool past(const Deadline& deadline) { return deadline && std::chrono::steady_clock::now() > *deadline; }

/** Polls the real ncclCommGetAsyncError of every comm until `ready(state)` holds for all of them.
 *  Returns ncclSuccess, the first state that is neither ready nor in progress, ncclInvalidUsage
 *  once cancelled, or ncclRemoteError once `deadline` has passed. */
template <typename Ready>
ncclResult_t pollComms(const std::vector<ncclComm_t>& comms, SetupControl* control, Ready ready,
                       const Deadline& deadline) {
  std::vector<bool> settled(comms.size(), false);
  Backoff backoff;
  for (;;) {
    size_t remaining = 0;
    {
      std::unique_lock<std::mutex> lock;
      if (control != nullptr) {
        lock = std::unique_lock<std::mutex>(control->ncclMutex);
        if (control->cancelled.load()) return ncclInvalidUsage;
      }
      for (size_t i = 0; i < comms.size(); ++i) {
        // A communicator stopped meanwhile (aborted, revoked) is NCCL's alone from now on.
        if (settled[i] || (control != nullptr && control->stopped(comms[i]))) continue;
        ncclResult_t state = ncclInProgress;
        ncclResult_t result = REAL_NCCL(ncclCommGetAsyncError)(comms[i], &state);
        if (result != ncclSuccess) return result;
        if (ready(state)) {
          settled[i] = true;
        } else if (state != ncclInProgress) {
          return state;
        } else {
          ++remaining;
        }
      }
    }
    if (remaining == 0) return ncclSuccess;
    if (past(deadline)) return ncclRemoteError;
    backoff.wait();
  }
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
  const ncclResult_t ready = pollComms(
      batch->comms, &batch->control, [](ncclResult_t state) { return state == ncclSuccess; }, std::nullopt);
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

std::mutex gChildrenMutex;
std::unordered_map<ncclComm_t, std::vector<ncclComm_t*>>& pendingChildren() {
  static auto* map = new std::unordered_map<ncclComm_t, std::vector<ncclComm_t*>>();
  return *map;
}

std::vector<ncclComm_t*> takePendingChildren(ncclComm_t parent) {
  std::lock_guard<std::mutex> lock(gChildrenMutex);
  auto it = pendingChildren().find(parent);
  if (it == pendingChildren().end()) return {};
  std::vector<ncclComm_t*> slots = std::move(it->second);
  pendingChildren().erase(it);
  return slots;
}

}  // namespace

void watchPendingChild(ncclComm_t parent, ncclComm_t* newcomm) {
  std::lock_guard<std::mutex> lock(gChildrenMutex);
  pendingChildren()[parent].push_back(newcomm);
}

void collectPendingChildren(ncclComm_t parent, bool parentDone) {
  std::vector<ncclComm_t> children;
  {
    std::lock_guard<std::mutex> lock(gChildrenMutex);
    auto it = pendingChildren().find(parent);
    if (it == pendingChildren().end()) return;
    std::vector<ncclComm_t*>& slots = it->second;
    for (size_t i = 0; i < slots.size();) {
      // NCCL writes the child when its job ends; a slot still null once the parent is done
      // stays null (the split failed, or this rank passed NCCL_SPLIT_NOCOLOR).
      ncclComm_t child = __atomic_load_n(slots[i], __ATOMIC_ACQUIRE);
      if (child != nullptr) {
        moveCtaCap(slots[i], child);  // the CTA cap noted at the split (plugin/comm/cta_cap.h)
        children.push_back(child);
        slots.erase(slots.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (parentDone) {
      for (ncclComm_t* slot : slots) takeCtaCap(slot);  // no child on this rank
    }
    if (parentDone || slots.empty()) pendingChildren().erase(it);
  }
  for (ncclComm_t child : children) {
    if (CommRegistry::instance().find(child) == nullptr) startDeferredSetup({child});
  }
}

bool adoptPendingChild(ncclComm_t comm) {
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(gChildrenMutex);
    // No iterator is advanced past an erase: the loop ends at the first match.
    for (auto it = pendingChildren().begin(); it != pendingChildren().end() && !found; ++it) {
      std::vector<ncclComm_t*>& slots = it->second;
      for (size_t i = 0; i < slots.size(); ++i) {
        if (__atomic_load_n(slots[i], __ATOMIC_ACQUIRE) == comm) {
          moveCtaCap(slots[i], comm);
          slots.erase(slots.begin() + static_cast<std::ptrdiff_t>(i));
          found = true;
          break;
        }
      }
      if (found) {
        if (slots.empty()) pendingChildren().erase(it);
        break;
      }
    }
  }
  if (found && CommRegistry::instance().find(comm) == nullptr) startDeferredSetup({comm});
  return found;
}

bool calledFromNccl(const void* returnAddress) {
  // NCCL's load address, cached in a constant-initialized atomic (kUnknown until the first call),
  // not a static with an initializer: that one's guard would be held across dlsym/dladdr (the
  // loader's lock), a deadlock with a library constructor calling NCCL while another thread's
  // first call resolves (plugin/loader/real_nccl.h, REAL_NCCL). Racing first calls agree.
  static const char kUnknown = 0;
  static std::atomic<const void*> cached{&kUnknown};
  const void* ncclBase = cached.load(std::memory_order_acquire);
  if (ncclBase == &kUnknown) {
    Dl_info found{};
    void* fn = resolveRealNccl("ncclCommGetAsyncError");
    ncclBase = fn != nullptr && dladdr(fn, &found) != 0 ? found.dli_fbase : nullptr;
    cached.store(ncclBase, std::memory_order_release);
  }
  Dl_info info{};
  return ncclBase != nullptr && dladdr(returnAddress, &info) != 0 && info.dli_fbase == ncclBase;
}

void forgetPendingChildren(ncclComm_t comm) {
  for (ncclComm_t* slot : takePendingChildren(comm)) takeCtaCap(slot);
  // comm may itself be a child NCCL has written but nothing has collected yet: once it is
  // destroyed or aborted its slot holds a freed handle, which a later poll of the parent must
  // not set up (nor take for a new communicator at that address).
  std::lock_guard<std::mutex> lock(gChildrenMutex);
  for (auto it = pendingChildren().begin(); it != pendingChildren().end();) {
    std::vector<ncclComm_t*>& slots = it->second;
    slots.erase(std::remove_if(slots.begin(), slots.end(),
                               [comm](ncclComm_t* slot) { return __atomic_load_n(slot, __ATOMIC_ACQUIRE) == comm; }),
                slots.end());
    it = slots.empty() ? pendingChildren().erase(it) : std::next(it);
  }
}

ncclResult_t waitUntilEnqueued(const std::vector<ncclComm_t>& comms, SetupControl* control, ExchangeRound round) {
  return pollComms(
      comms, control, [](ncclResult_t state) { return state != ncclInProgress; }, deadlineFor(round));
}

cudaError_t waitForQuery(const std::function<cudaError_t()>& query, SetupControl* control, ExchangeRound round,
                         ncclComm_t comm) {
  // Round 1 is bounded like a Lamport kernel's wait: a peer that never joins the exchange must
  // not keep this communicator "in progress" forever. Round 2 only stops when this communicator
  // is stopped (or the whole set-up cancelled): a sibling's abort does not end it.
  const Deadline deadline = deadlineFor(round);
  Backoff backoff;
  for (;;) {
    cudaError_t err = query();
    if (err != cudaErrorNotReady) return err;
    if ((control != nullptr && control->stopped(comm)) || past(deadline)) return cudaErrorNotReady;
    backoff.wait();
  }
}

cudaError_t waitStream(cudaStream_t stream, SetupControl* control, ExchangeRound round, ncclComm_t comm) {
  if (control == nullptr) return cudaStreamSynchronize(stream);
  return waitForQuery([stream] { return cudaStreamQuery(stream); }, control, round, comm);
}

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
    std::shared_ptr<LamportComm> shared(std::move(placeholder));
    batch->placeholders.push_back(shared);
    CommRegistry::instance().insert(shared);
  }
  if (batch->comms.empty()) return;
  {
    std::lock_guard<std::mutex> lock(gBatchesMutex);
    for (ncclComm_t comm : batch->comms) batches()[comm] = batch;
  }
  LAMPORT_INFO(kSubsysInit, "%zu non-blocking communicator(s): workspace set-up deferred until NCCL reports them ready",
               batch->comms.size());
  try {
    std::thread([batch] { runBatch(batch); }).detach();
  } catch (const std::exception& e) {
    LAMPORT_WARN("cannot start the set-up thread (%s): non-blocking communicators stay on NCCL", e.what());
    batch->control.cancelled.store(true);
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

PendingCall waitForDeferredSetup(ncclComm_t comm, const std::function<ncclResult_t()>& callNccl, ncclResult_t* result,
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
