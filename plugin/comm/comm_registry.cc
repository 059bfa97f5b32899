#include "plugin/comm/comm_registry.h"

#include <mutex>

#include "common/config.h"
#include "common/log.h"

namespace nccl_lamport {

ncclResult_t lamportAsyncError(LamportComm& lc) {
  if (lc.setupFailed) {
    if (!lc.errorReported.exchange(true)) {
      LAMPORT_WARN("comm %p rank %d: the workspace set-up's exchange did not complete (%s); the communicator is in "
                   "error, abort it",
                   static_cast<void*>(lc.comm), lc.reportedRank(), lc.reason.c_str());
    }
    return ncclRemoteError;
  }
  if (lc.hostFlags == nullptr) return ncclSuccess;
  const uint32_t error = lc.hostFlags->error;
  if (error == kLamportOk) return ncclSuccess;
  if (!lc.errorReported.exchange(true)) {
    if (error == kLamportTimedOut) {
      LAMPORT_WARN("comm %p rank %d: a Lamport allreduce kernel waited %llu ms for its peers and gave up "
                   "(NCCL_LAMPORT_TIMEOUT_MS); the communicator is in error, abort it",
                   static_cast<void*>(lc.comm), lc.reportedRank(), static_cast<unsigned long long>(globalConfig().timeoutMs));
    } else {
      LAMPORT_WARN("comm %p rank %d: a Lamport allreduce kernel stopped because the communicator was aborted",
                   static_cast<void*>(lc.comm), lc.reportedRank());
    }
  }
  return ncclRemoteError;
}

ncclResult_t asyncErrorToReport(LamportComm* lc, ncclResult_t ncclState, bool calledByNccl) {
  if (lc == nullptr || lc->revoked.load()) return ncclState;
  if (ncclState == ncclSuccess) return lamportAsyncError(*lc);
  if (ncclState == ncclInProgress && lc->setupFailed && !calledByNccl) return lamportAsyncError(*lc);
  return ncclState;
}

CommRegistry& CommRegistry::instance() {
  // Leaked on purpose: wrappers may run from other libraries' static destructors at exit.
  static CommRegistry* registry = new CommRegistry();
  return *registry;
}

void CommRegistry::insert(std::shared_ptr<LamportComm> lc) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  ncclComm_t key = lc->comm;
  comms_[key] = std::move(lc);
}

std::shared_ptr<LamportComm> CommRegistry::find(ncclComm_t comm) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = comms_.find(comm);
  return it == comms_.end() ? nullptr : it->second;
}

std::shared_ptr<LamportComm> CommRegistry::remove(ncclComm_t comm) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto it = comms_.find(comm);
  if (it == comms_.end()) return nullptr;
  std::shared_ptr<LamportComm> lc = std::move(it->second);
  comms_.erase(it);
  return lc;
}

void CommRegistry::removeIfSame(ncclComm_t comm, const std::shared_ptr<LamportComm>& expected) {
  if (expected == nullptr) return;
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto it = comms_.find(comm);
  if (it != comms_.end() && it->second == expected) comms_.erase(it);
}

size_t CommRegistry::size() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return comms_.size();
}

}  // namespace nccl_lamport
