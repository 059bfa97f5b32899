#include "plugin/comm/pending_children.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "plugin/abi/entry_guard.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cta_cap.h"
#include "plugin/comm/deferred_setup.h"

namespace nccl_lamport {

namespace {

/** WatchedChild::epoch of a child watched in a group that has not ended: above every poll's.
 *  Children whose parent is gone are watched under a null parent until their first call. */
constexpr uint64_t kInOpenGroup = UINT64_MAX;

std::mutex gChildrenMutex;
// One more for every watched child; written under gChildrenMutex, read without it (every poll of a
// communicator reads it: a watchdog's too).
std::atomic<uint64_t> gEpoch{0};

std::unordered_map<ncclComm_t, std::vector<WatchedChild>>& pendingChildren() {
  static auto* map = new std::unordered_map<ncclComm_t, std::vector<WatchedChild>>();
  return *map;
}

ncclComm_t writtenChild(const WatchedChild& watched) { return __atomic_load_n(watched.slot, __ATOMIC_ACQUIRE); }

/** comm's own entry: null where there is none, or where the entry under that address is a
 *  communicator's whose handle NCCL is freeing (comm is a newcomer at the same address). */
std::shared_ptr<LamportComm> ownEntry(ncclComm_t comm) {
  std::shared_ptr<LamportComm> lc = CommRegistry::instance().find(comm);
  return lc != nullptr && lc->handleFreeing.load(std::memory_order_acquire) ? nullptr : lc;
}

/** Under gChildrenMutex, so that a caller that did not find the child among the watched ones
 *  finds it registered (its first poll must not get NCCL's "ready" before our set-up). False,
 *  with a WARN and nothing of the set-up left, where it could not start (host memory): the child
 *  stays watched, and a later poll of its parent, or its own first call, tries again. */
bool startSetUpLocked(const WatchedChild& watched, ncclComm_t child) noexcept {
  try {
    moveCtaCap(watched.slot, child);  // the CTA cap noted at the split (plugin/comm/cta_cap.h)
    if (watched.onWritten == OnChildWritten::kSetUp && ownEntry(child) == nullptr) startDeferredSetup({child});
    return true;
  } catch (...) {
    resultOfException("set-up of a non-blocking split child (tried again at its next poll)");
    return false;
  }
}

}  // namespace

uint64_t pendingChildrenEpoch() { return gEpoch.load(std::memory_order_acquire); }

void watchPendingChild(ncclComm_t parent, ncclComm_t* newcomm, bool inOpenGroup, OnChildWritten onWritten) {
  std::lock_guard<std::mutex> lock(gChildrenMutex);
  const uint64_t epoch = gEpoch.fetch_add(1, std::memory_order_acq_rel) + 1;
  pendingChildren()[parent].push_back(WatchedChild{newcomm, inOpenGroup ? kInOpenGroup : epoch, onWritten});
}

void stampGroupedChildren(const std::vector<ncclComm_t*>& slots) {
  if (slots.empty()) return;
  std::lock_guard<std::mutex> lock(gChildrenMutex);
  const uint64_t epoch = gEpoch.fetch_add(1, std::memory_order_acq_rel) + 1;
  for (auto& [parent, watched] : pendingChildren()) {
    for (WatchedChild& w : watched) {
      if (w.epoch == kInOpenGroup && std::find(slots.begin(), slots.end(), w.slot) != slots.end()) w.epoch = epoch;
    }
  }
}

void collectPendingChildren(ncclComm_t parent, bool parentDone, uint64_t epochBeforePoll) {
  if (parent == nullptr) return;  // the key of children whose parent is gone
  std::lock_guard<std::mutex> lock(gChildrenMutex);
  auto it = pendingChildren().find(parent);
  if (it == pendingChildren().end()) return;
  std::vector<WatchedChild>& watched = it->second;
  for (size_t i = 0; i < watched.size();) {
    // NCCL writes the child when its job ends; a slot still null once the parent is done stays
    // null (the split failed, or this rank passed NCCL_SPLIT_NOCOLOR), unless its split came
    // after the poll that found the parent done (another thread's, a watchdog's).
    ncclComm_t child = writtenChild(watched[i]);
    if (child != nullptr) {
      if (!startSetUpLocked(watched[i], child)) {
        ++i;
        continue;
      }
    } else if (!(parentDone && watched[i].epoch <= epochBeforePoll)) {
      ++i;
      continue;
    } else {
      takeCtaCap(watched[i].slot);  // no child on this rank
    }
    watched.erase(watched.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (watched.empty()) pendingChildren().erase(it);
}

bool adoptPendingChild(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(gChildrenMutex);
  // No iterator is advanced past an erase: the loop ends at the first match.
  for (auto it = pendingChildren().begin(); it != pendingChildren().end(); ++it) {
    std::vector<WatchedChild>& watched = it->second;
    for (size_t i = 0; i < watched.size(); ++i) {
      if (writtenChild(watched[i]) != comm) continue;
      if (!startSetUpLocked(watched[i], comm)) return false;
      watched.erase(watched.begin() + static_cast<std::ptrdiff_t>(i));
      if (watched.empty()) pendingChildren().erase(it);
      return true;
    }
  }
  return false;
}

std::shared_ptr<LamportComm> findOrAdoptChild(ncclComm_t comm) noexcept {
  if (comm == nullptr) return nullptr;
  try {
    std::shared_ptr<LamportComm> lc = ownEntry(comm);
    if (lc != nullptr) return lc;
    adoptPendingChild(comm);
    return ownEntry(comm);  // also one another thread's poll just collected; never a leftover
  } catch (...) {  // a lock, or the watch's first use: the call goes on as for an unknown comm
    resultOfException("looking up a communicator");
    return nullptr;
  }
}

DetachedChildren detachPendingChildren(ncclComm_t comm) noexcept {
  DetachedChildren detached;
  try {
    std::lock_guard<std::mutex> lock(gChildrenMutex);
    auto own = pendingChildren().find(comm);
    if (own != pendingChildren().end()) {
      std::vector<WatchedChild>& watched = own->second;
      for (size_t i = 0; i < watched.size();) {
        const ncclComm_t child = writtenChild(watched[i]);
        if (child != nullptr && startSetUpLocked(watched[i], child)) {
          watched.erase(watched.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      detached.children = std::move(watched);  // a move: nothing allocated
      pendingChildren().erase(own);
    }
    // A communicator is written into one slot: the search ends at the first match (no iterator
    // is used after its erase).
    for (auto it = pendingChildren().begin(); it != pendingChildren().end() && !detached.watchedAsChild;) {
      std::vector<WatchedChild>& watched = it->second;
      for (size_t i = 0; i < watched.size(); ++i) {
        if (writtenChild(watched[i]) != comm) continue;
        detached.watchedAsChild = true;
        detached.parentOfComm = it->first;
        detached.watchAsChild = watched[i];
        watched.erase(watched.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      it = detached.watchedAsChild && watched.empty() ? pendingChildren().erase(it) : std::next(it);
    }
  } catch (...) {  // the map's first use, or a lock: the watch stays as it was
    resultOfException("detaching the split children of a communicator being torn down");
  }
  return detached;
}

void reattachPendingChildren(ncclComm_t comm, DetachedChildren detached) noexcept {
  try {
    std::lock_guard<std::mutex> lock(gChildrenMutex);
    if (!detached.children.empty()) {
      std::vector<WatchedChild>& watched = pendingChildren()[comm];
      watched.insert(watched.end(), detached.children.begin(), detached.children.end());
    }
    if (detached.watchedAsChild) pendingChildren()[detached.parentOfComm].push_back(detached.watchAsChild);
  } catch (...) {
    resultOfException("putting back the split children of a communicator NCCL did not destroy (they stay on NCCL)");
  }
}

void settleDetachedChildren(DetachedChildren detached) noexcept {
  if (detached.watchedAsChild) takeCtaCap(detached.watchAsChild.slot);
  if (detached.children.empty()) return;
  std::lock_guard<std::mutex> lock(gChildrenMutex);
  for (const WatchedChild& w : detached.children) {
    const ncclComm_t child = writtenChild(w);
    if (child == nullptr) {
      takeCtaCap(w.slot);  // the parent's job is over: NCCL writes nothing there any more
    } else if (!startSetUpLocked(w, child)) {
      try {
        pendingChildren()[nullptr].push_back(w);  // adopted at its first call
      } catch (...) {
        resultOfException("keeping a split child whose parent is gone (it stays on NCCL)");
      }
    }
  }
}

}  // namespace nccl_lamport
