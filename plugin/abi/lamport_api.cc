// The public extension API of include/nccl_lamport.h.
#include <cstdio>
#include <cstring>

#include "include/nccl_lamport.h"
#include "plugin/abi/entry_guard.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/hooks/tuner_activation.h"
#include "plugin/abi/export.h"
#include "plugin/interpose/interpose_state.h"
#include "tuner/load_mode.h"

using namespace nccl_lamport;

NCCL_LAMPORT_EXPORT ncclResult_t ncclLamportGetAllReducePath(ncclComm_t comm, size_t count, ncclDataType_t datatype,
                                                             ncclRedOp_t op, ncclLamportPath_t* path) try {
  if (path == nullptr) return ncclInvalidArgument;
  bindQueriedComm(comm);  // tuner activation: a handle not used yet is described by its set-up
  const std::shared_ptr<LamportComm> lc = comm != nullptr ? CommRegistry::instance().find(comm) : nullptr;
  switch (pathFor(lc.get(), count, datatype, op)) {
    case AllReducePath::kLamportOneShot: *path = ncclLamportPathOneShot; break;
    case AllReducePath::kLamportTwoShot: *path = ncclLamportPathTwoShot; break;
    default: *path = ncclLamportPathNccl; break;
  }
  return ncclSuccess;
} catch (...) {
  return resultOfException("ncclLamportGetAllReducePath");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclLamportGetCommInfo(ncclComm_t comm, ncclLamportCommInfo_t* info) try {
  if (info == nullptr) return ncclInvalidArgument;
  memset(info, 0, sizeof(*info));
  bindQueriedComm(comm);  // tuner activation: a handle not used yet is described by its set-up
  const std::shared_ptr<LamportComm> lc = comm != nullptr ? CommRegistry::instance().find(comm) : nullptr;
  if (lc == nullptr) return ncclSuccess;
  info->known = 1;
  info->eligible = lc->eligible ? 1 : 0;
  info->nRanks = lc->nRanks;
  info->rank = lc->reportedRank();
  info->workspaceBytes = lc->eligible ? lc->local.size() : 0;
  info->oneShotMaxBytes = lc->eligible ? lc->table.oneShotMaxBytes : 0;
  info->lamportCalls = lc->lamportCalls.load(std::memory_order_relaxed);
  info->ncclCalls = lc->ncclCalls.load(std::memory_order_relaxed);
  snprintf(info->reason, sizeof(info->reason), "%s", lc->reason.c_str());
  return ncclSuccess;
} catch (...) {
  return resultOfException("ncclLamportGetCommInfo");
}

// Active: our wrappers are in NCCL's call path (preloaded, loaded as NCCL, or tuner activation's
// hooks) and not switched off. A process that loaded us only as NCCL's tuner, without hooks, is not.
NCCL_LAMPORT_EXPORT int ncclLamportIsActive(void) { return interposerEnabled() && !tunerOnlyPathOff() ? 1 : 0; }
