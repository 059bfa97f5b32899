#include "plugin/comm/tuner_setup.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "plugin/comm/host_rendezvous.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/comm_teardown.h"
#include "common/config.h"
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

}  // namespace

void setUpAtTunerInit(const TunerCommInfo& comm, const void* contextSlot) {
  try {
    std::unique_ptr<LamportComm> lc;
    if (!comm.hasCommId || contextSlot == nullptr) return;
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
    std::string where;
    if (lc->rank >= 0) where += " Lamport slot " + std::to_string(lc->rank);
    where += " nRanks " + std::to_string(comm.nRanks);
    if (lc->cudaDev >= 0) where += " cudaDev " + std::to_string(lc->cudaDev);
    LAMPORT_INFO(kSubsysInit, "tuner activation: commId 0x%016llx%s: %s%s; its handle is named at its first call",
                 static_cast<unsigned long long>(comm.commId), where.c_str(),
                 lc->eligible ? "workspace ready, " : "not accelerated: ", lc->reason.c_str());
    lc->commId = comm.commId;
    record(contextSlot, std::move(lc));
  } catch (...) {
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
  const auto handle = reinterpret_cast<uintptr_t>(comm);
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = pending().upper_bound(handle);
  return it != pending().end() && it->first - handle <= kMaxCommBytes;
}

bool bindCommToTunerSetUp(ncclComm_t comm) {
  if (comm == nullptr) return false;
  const auto handle = reinterpret_cast<uintptr_t>(comm);
  std::unique_ptr<LamportComm> lc;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = pending().upper_bound(handle);
    if (it == pending().end() || it->first - handle > kMaxCommBytes) {
      why = "no set-up was recorded for it in the tuner's init";
    } else if (*reinterpret_cast<const uint64_t*>(comm) != kNcclCommMagic) {
      why = "the handle does not start with NCCL's communicator magic";
    } else {
      lc = std::move(it->second.lc);
      pending().erase(it);
    }
  }
  if (lc == nullptr) {
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
  if (lc->rank < 0) lc->rank = lc->ncclRank;
  if (lc->cudaDev < 0) lc->cudaDev = device;  // a set-up that never got a device (multi-node)
  logCommVerdict(*lc);  // the first line that can name the handle
  CommRegistry::instance().insert(std::move(lc));
  return true;
}

}  // namespace nccl_lamport
