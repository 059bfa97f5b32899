#include "plugin/comm/tuner_setup.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/abi/entry_guard.h"
#include "plugin/comm/host_rendezvous.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cta_cap.h"
#include "plugin/comm/setup_verdict.h"
#include "plugin/comm/comm_teardown.h"
#include "common/config.h"
#include "common/readable_memory.h"
#include "plugin/transport/cuda_driver.h"
#include "common/log.h"
#include "plugin/loader/real_nccl.h"
#include "plugin/comm/workspace_setup.h"
#include "tuner/tuner_impl.h"

namespace nccl_lamport {

namespace {

// Both rounds of the set-up over the host rendezvous of this communicator's key.
class RendezvousExchange : public SetupExchange {
 public:
  RendezvousExchange(uint64_t commId, uint32_t nRanks, uint64_t timeoutMs)
      : commId_(commId), nRanks_(nRanks), timeoutMs_(timeoutMs) {}
  bool allGather(const void* mine, size_t bytes, std::vector<uint8_t>* all, int* index, std::string* why) override {
    RendezvousJoin join;
    join.commId = commId_;
    join.nRanks = nRanks_;
    const auto* p = static_cast<const uint8_t*>(mine);
    join.payload.assign(p, p + bytes);
    const RendezvousResult r = hostRendezvous(join, timeoutMs_);
    if (!r.ok) {
      *why = "host rendezvous of the communicator's ranks: " + r.reason;
      return false;
    }
    all->clear();
    for (const auto& payload : r.payloads) all->insert(all->end(), payload.begin(), payload.end());
    *index = r.index;
    return true;
  }

 private:
  uint64_t commId_;
  uint32_t nRanks_;
  uint64_t timeoutMs_;
};

struct Pending {
  std::unique_ptr<LamportComm> lc;  // eligible or not, with its reason and NCCL's commId
};

std::mutex gMutex;
// Keyed by the context slot's address, so the nearest one above a handle is one lookup.
// Never destroyed; made on first use, not when the object is loaded: a copy that is loaded and
// unloaded again (dlclose) unused must not leave it behind.
std::map<uintptr_t, Pending>& pending() {
  static auto* map = new std::map<uintptr_t, Pending>();
  return *map;
}

void record(const void* slot, std::unique_ptr<LamportComm> lc) {
  std::unique_ptr<LamportComm> replaced;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    Pending& p = pending()[reinterpret_cast<uintptr_t>(slot)];
    replaced = std::move(p.lc);  // a communicator freed without finalize at this address
    p.lc = std::move(lc);
  }
  if (replaced != nullptr) releaseCommEntry(std::shared_ptr<LamportComm>(std::move(replaced)), /*aborting=*/true);
}

/** Puts the set-up's result in place of the entry recorded under slot before it ran
 *  (`placeholder`): no allocation, the map's node exists. If that entry is gone (forgotten
 *  meanwhile), the result is released. */
void replacePlaceholder(const void* slot, const LamportComm* placeholder, std::unique_ptr<LamportComm> lc) noexcept {
  std::unique_ptr<LamportComm> dropped;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = pending().find(reinterpret_cast<uintptr_t>(slot));
    if (it != pending().end() && it->second.lc.get() == placeholder) {
      dropped = std::move(it->second.lc);  // nothing of it to release: it never held resources
      it->second.lc = std::move(lc);
      return;
    }
  }
  try {
    releaseCommEntry(std::shared_ptr<LamportComm>(std::move(lc)), /*aborting=*/false);
  } catch (...) {
  }
}

// offsetof(struct ncclComm, tunerContext) in the NCCL that loaded us: the distance from a
// handle to the context slot NCCL passes to the tuner's init for it. One value per process (one
// hooked NCCL), unknown (0) until a bind has proved it (slotInsideComm); from then on a handle
// is bound to the set-up recorded exactly there, or to none.
std::atomic<uintptr_t> gSlotOffset{0};

/** What the handle's memory says about a candidate set-up at `slot` (above the handle). */
enum class HandleCheck { kUnreadable, kNoMagic, kSlotOfAnother, kSlotInside };

/**
 * Reads the handle's struct from its first word up to `slot` (or its first word alone when
 * checkRange is false) without faulting: a destroyed handle's memory may be unmapped. The slot
 * lies inside the struct ncclComm that starts at `handle` when no NCCL magic lies between the
 * handle's startMagic and the slot: NCCL keeps endMagic as the struct's last field (comm.h
 * static_asserts it), and every other communicator's struct starts with startMagic, so a slot of
 * a neighbouring communicator always has one of the two in between.
 */
HandleCheck checkHandle(uintptr_t handle, uintptr_t slot, bool checkRange) {
  uint64_t first = 0;
  if (!copyIfReadable(reinterpret_cast<const void*>(handle), &first, sizeof(first))) return HandleCheck::kUnreadable;
  if (first != kNcclCommMagic) return HandleCheck::kNoMagic;
  if (!checkRange || slot <= handle + sizeof(uint64_t)) return HandleCheck::kSlotInside;
  std::vector<uint64_t> words((slot - handle) / sizeof(uint64_t) - 1);
  if (!copyIfReadable(reinterpret_cast<const void*>(handle + sizeof(uint64_t)), words.data(),
                      words.size() * sizeof(uint64_t))) {
    return HandleCheck::kUnreadable;
  }
  return std::find(words.begin(), words.end(), kNcclCommMagic) == words.end() ? HandleCheck::kSlotInside
                                                                               : HandleCheck::kSlotOfAnother;
}

/** The pending entry for handle, under gMutex: exactly at the learnt offset once it is known;
 *  before, the nearest one above within kMaxCommBytes (to be checked with checkHandle). */
std::map<uintptr_t, Pending>::iterator candidateFor(uintptr_t handle) {
  const uintptr_t offset = gSlotOffset.load(std::memory_order_relaxed);
  if (offset != 0) return pending().find(handle + offset);
  auto it = pending().upper_bound(handle);
  return it != pending().end() && it->first - handle <= kMaxCommBytes ? it : pending().end();
}

}  // namespace

void setUpAtTunerInit(const TunerCommInfo& comm, const void* contextSlot) {
  if (!comm.hasCommId || contextSlot == nullptr) return;
  // An entry of its own (OFF) is recorded before the set-up runs, so that whatever happens in it
  // this communicator's handle finds its own entry, never none (nor a stale one left at this
  // address by a communicator freed without finalize).
  const LamportComm* placeholder = nullptr;
  try {
    auto off = std::make_unique<LamportComm>();
    off->nRanks = static_cast<int>(comm.nRanks);
    off->commId = comm.commId;
    off->reason = "its set-up in the tuner's init did not finish";
    placeholder = off.get();
    record(contextSlot, std::move(off));
  } catch (...) {
    // No memory even for that: nothing recorded; the exact bind leaves the handle on NCCL, and
    // the peers' rendezvous ends without this rank.
    resultOfException("tuner activation: recording a set-up");
    return;
  }
  try {
    std::unique_ptr<LamportComm> lc;
    // The ranks meet over a host-local rendezvous: a communicator that spans hosts would only
    // time out there. In the shared-GPU test mode NCCL reports one node per rank (each has its
    // own NCCL_HOSTID) while every rank is on this host.
    if (comm.nNodes > 1 && !globalConfig().testSharedGpu) {
      lc = std::make_unique<LamportComm>();
      lc->nRanks = static_cast<int>(comm.nRanks);
      lc->reason = "NCCL reports " + std::to_string(comm.nNodes) +
                   " nodes: tuner activation leaves multi-node communicators to NCCL";
    } else {
      // NCCL's init thread has the communicator's device current: ask the driver which context
      // is current (NCCL's own CUDA runtime made it so; ours may not know yet).
      int device = -1;
      CUdevice current = 0;
      const DriverApi* api = driverApi();
      if (api != nullptr && api->ctxGetDevice(&current) == CUDA_SUCCESS) {
        device = static_cast<int>(current);
      } else if (cudaGetDevice(&device) != cudaSuccess) {
        device = -1;
      }
      RendezvousExchange exchange(comm.commId, static_cast<uint32_t>(comm.nRanks), globalConfig().rendezvousTimeoutMs);
      lc = setupWorkspaceOverExchange(static_cast<int>(comm.nRanks), device, exchange);
    }
    // The handle is not known here (NCCL has not returned it yet): this line names the
    // communicator by NCCL's commId, and the verdict line naming the handle comes at bind time.
    // The Lamport slot (the place in the rendezvous order; NCCL's rank is not known yet) and
    // cudaDev only where the set-up learnt them.
    // A failure to log must not lose the verdict the peers share: the line is best effort.
    try {
      std::string where;
      if (lc->lamportRank >= 0) where += " Lamport slot " + std::to_string(lc->lamportRank);
      where += " nRanks " + std::to_string(comm.nRanks);
      if (lc->cudaDev >= 0) where += " cudaDev " + std::to_string(lc->cudaDev);
      LAMPORT_INFO(kSubsysInit, "tuner activation: commId 0x%016llx%s: %s%s; its handle is named at its first call",
                   static_cast<unsigned long long>(comm.commId), where.c_str(),
                   lc->eligible ? "workspace ready, " : "not accelerated: ", lc->reason.c_str());
    } catch (...) {
    }
    lc->commId = comm.commId;
    replacePlaceholder(contextSlot, placeholder, std::move(lc));
  } catch (...) {
    // The placeholder stays: this communicator is OFF on this rank (its peers' exchange ends
    // without it, at its bound, and they are OFF too).
    resultOfException("tuner activation: workspace set-up");
  }
}

void forgetTunerSetUp(const void* contextSlot) {
  std::unique_ptr<LamportComm> lc;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = pending().find(reinterpret_cast<uintptr_t>(contextSlot));
    if (it == pending().end()) return;
    lc = std::move(it->second.lc);
    pending().erase(it);
  }
  if (lc != nullptr) releaseCommEntry(std::shared_ptr<LamportComm>(std::move(lc)), /*aborting=*/false);
}

bool tunerSetUpRecordedFor(ncclComm_t comm) {
  if (comm == nullptr) return false;
  std::lock_guard<std::mutex> lock(gMutex);
  return candidateFor(reinterpret_cast<uintptr_t>(comm)) != pending().end();
}

bool bindCommToTunerSetUp(ncclComm_t comm, bool registerIfNone) {
  if (comm == nullptr) return false;
  const auto handle = reinterpret_cast<uintptr_t>(comm);
  std::unique_ptr<LamportComm> lc;
  std::string why;
  bool unreadable = false;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = candidateFor(handle);
    const bool learnt = gSlotOffset.load(std::memory_order_relaxed) != 0;
    const HandleCheck check =
        it == pending().end() ? HandleCheck::kNoMagic : checkHandle(handle, it->first, /*checkRange=*/!learnt);
    if (it == pending().end()) {
      why = "no set-up was recorded for it in the tuner's init";
    } else if (check == HandleCheck::kUnreadable) {
      unreadable = true;
      why = "its memory cannot be read (a destroyed communicator)";
    } else if (check == HandleCheck::kNoMagic) {
      why = "the handle does not start with NCCL's communicator magic";
    } else if (check == HandleCheck::kSlotOfAnother) {
      // The nearest set-up above is another communicator's (this one's was never recorded).
      why = "no set-up was recorded for it in the tuner's init (the nearest one belongs to another communicator)";
    } else {
      if (!learnt) gSlotOffset.store(it->first - handle, std::memory_order_relaxed);
      lc = std::move(it->second.lc);
      pending().erase(it);
    }
  }
  if (lc == nullptr) {
    // A query is answered "unknown" instead: what it asked about may be no live communicator,
    // and registering one asks NCCL about the handle.
    if (!registerIfNone || unreadable) return false;
    registerIneligible(comm, ("reached through tuner activation's entry hooks, but " + why).c_str());
    return true;
  }
  int nRanks = 0, device = -1;
  const bool described = REAL_NCCL(ncclCommCount)(comm, &nRanks) == ncclSuccess &&
                         REAL_NCCL(ncclCommCuDevice)(comm, &device) == ncclSuccess;
  if (!described || nRanks != lc->nRanks || (lc->eligible && device != lc->cudaDev)) {
    // Not the communicator this set-up was made for: nothing of it may run on this handle.
    releaseCommEntry(std::shared_ptr<LamportComm>(std::move(lc)), /*aborting=*/false);
    registerIneligible(comm, "reached through tuner activation's entry hooks, but its nRanks or device differ "
                             "from the set-up found above its handle");
    return true;
  }
  lc->comm = comm;
  // The slot is the rendezvous order; users know the communicator by NCCL's rank.
  if (REAL_NCCL(ncclCommUserRank)(comm, &lc->ncclRank) != ncclSuccess) lc->ncclRank = -1;
  if (lc->lamportRank < 0) lc->lamportRank = lc->ncclRank;
  if (lc->cudaDev < 0) lc->cudaDev = device;  // a set-up that never got a device (multi-node)
  // The init's config.maxCTAs, noted under the handle by its hooked wrapper (plugin/comm/cta_cap.h),
  // combined with the variables as at any set-up (which saw the variables alone): it caps the
  // grid only, since the crossover was agreed inside the tuner's init, which cannot see the config.
  if (const int configCap = takeCtaCap(comm); configCap > 0) {
    const int cap = effectiveCtaCap(configCap);
    if (cap != lc->maxCtas) {
      lc->maxCtas = cap;
      if (lc->eligible) {
        lc->launchTemplate.maxBlocks = cap;
        lc->reason = eligibleReason(*lc);
      }
    }
  }
  logCommVerdict(*lc);  // the first line that can name the handle
  CommRegistry::instance().insert(std::move(lc));
  return true;
}

}  // namespace nccl_lamport
