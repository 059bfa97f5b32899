#include "plugin/comm/pending_children.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cta_cap.h"
#include "plugin/comm/deferred_setup.h"

namespace nccl_lamport {

namespace {

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

}  // namespace nccl_lamport
