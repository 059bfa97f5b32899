#include "plugin/comm/workspace_setup.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/comm_teardown.h"
#include "plugin/comm/cta_cap.h"
#include "common/config.h"
#include "plugin/comm/cuda_guards.h"
#include "plugin/comm/exchange_rounds.h"
#include "common/log.h"
#include "plugin/loader/real_nccl.h"
#include "plugin/comm/setup_state.h"
#include "plugin/comm/setup_verdict.h"
#include "plugin/comm/workspace_mapping.h"

namespace nccl_lamport {

namespace {

/** exchange.allGather, with a throw (out of memory) taken for a round this rank did not get
 *  through: the exchange then ends without it on every rank. */
bool gatherOver(SetupExchange& exchange, const void* mine, size_t bytes, std::vector<uint8_t>* all, int* index,
                std::string* why) noexcept {
  try {
    return exchange.allGather(mine, bytes, all, index, why);
  } catch (...) {
    resultOfException("workspace exchange over the host rendezvous");
    return false;
  }
}

void publish(SetupState& s, bool allOk) {
  settleVerdict(s, allOk);
  logCommVerdict(*s.lc);
  CommRegistry::instance().insert(std::move(s.lc));
}

}  // namespace

void registerIneligible(ncclComm_t comm, const char* reason, bool nonBlocking) {
  auto lc = std::make_unique<LamportComm>();
  lc->comm = comm;
  lc->nonBlocking = nonBlocking;
  lc->maxCtas = effectiveCtaCap(takeCtaCap(comm));
  // Best effort: a non-blocking communicator may not answer yet; the fields are for logs only.
  REAL_NCCL(ncclCommUserRank)(comm, &lc->lamportRank);
  REAL_NCCL(ncclCommCount)(comm, &lc->nRanks);
  REAL_NCCL(ncclCommCuDevice)(comm, &lc->cudaDev);
  lc->reason = reason;
  LAMPORT_INFO(kSubsysInit, "comm %p rank %d nRanks %d: Lamport OFF, every call goes to NCCL: %s",
               static_cast<void*>(comm), lc->lamportRank, lc->nRanks, reason);
  CommRegistry::instance().insert(std::move(lc));
}

void setupWorkspaces(const std::vector<ncclComm_t>& comms, const SetupOptions& options) {
  if (comms.empty()) return;
  const Config& config = globalConfig();
  // Every step below makes a communicator's device current. The caller's thread gets its device
  // back; a set-up thread (options.control) is left as it is, since restoring its never-chosen
  // device 0 would create a context there on a rank of another GPU.
  std::optional<RestoreCurrentDevice> callerDevice;
  if (options.control == nullptr) callerDevice.emplace();
  ScopedRelaxedCapture relaxed;

  std::vector<std::unique_ptr<SetupState>> states;
  std::unique_lock<std::mutex> describing;
  if (options.control != nullptr) {
    describing = std::unique_lock<std::mutex>(options.control->ncclMutex);
    if (options.control->cancelled.load()) return;
  }
  for (ncclComm_t comm : comms) {
    // An aborted or revoked one is NCCL's alone; those created with it are set up all the same.
    if (comm == nullptr) continue;
    if (options.control != nullptr && options.control->stopped(comm)) {
      takeCtaCap(comm);  // never set up: its CTA-cap note goes
      continue;
    }
    auto s = std::make_unique<SetupState>();
    s->comm = comm;
    s->lc = std::make_unique<LamportComm>();
    s->lc->comm = comm;
    s->lc->nonBlocking = options.nonBlocking;
    // registerIneligible takes the CTA-cap note itself; the note is taken below otherwise.
    if (REAL_NCCL(ncclCommUserRank)(comm, &s->lc->lamportRank) != ncclSuccess ||
        REAL_NCCL(ncclCommCount)(comm, &s->lc->nRanks) != ncclSuccess ||
        REAL_NCCL(ncclCommCuDevice)(comm, &s->lc->cudaDev) != ncclSuccess) {
      registerIneligible(comm, "NCCL could not describe the communicator", options.nonBlocking);
      continue;
    }
    if (s->lc->nRanks < 2) {
      registerIneligible(comm, "single-rank communicator", options.nonBlocking);
      continue;
    }
    s->lc->maxCtas = effectiveCtaCap(takeCtaCap(comm));
    states.push_back(std::move(s));
  }

  if (describing.owns_lock()) describing.unlock();
  for (auto& s : states) guardedStep(*s, "workspace allocation", [&] { prepareLocal(*s, config); });

  exchangeRound(
      states, sizeof(ExchangeRecord), options, ExchangeRound::kFirst, [](SetupState& s, char* out) { memcpy(out, &s.mine, sizeof(ExchangeRecord)); },
      [](SetupState& s, const char* in) {
        s.records.resize(s.lc->nRanks);
        memcpy(s.records.data(), in, sizeof(ExchangeRecord) * s.lc->nRanks);
        decideFromRecords(s);
      });

  for (auto& s : states) {
    if (s->proceed) guardedStep(*s, "serving the workspace handle", [&] { startServing(*s, config); });
  }
  for (auto& s : states) {
    if (s->proceed) guardedStep(*s, "mapping the peers", [&] { mapPeers(*s, config); });
  }
  for (auto& s : states) {
    if (s->proceed) guardedStep(*s, "preparing the kernels", [&] { finishLocal(*s); });
  }

  exchangeRound(
      states, sizeof(OkRecord), options, ExchangeRound::kSecond,
      [](SetupState& s, char* out) {
        OkRecord rec{};
        rec.ok = s.proceed && s.localOk ? 1 : 0;
        memcpy(out, &rec, sizeof(rec));
      },
      [](SetupState& s, const char* in) {
        // The verdict from the words alone, identical on every rank (guardedStep would turn a
        // throw here into a rank-local "no"; allRanksOk never throws).
        int firstNo = -1;
        s.localOk = allRanksOk(in, s.lc->nRanks, &firstNo) && s.proceed;
        if (firstNo >= 0 && s.why.empty()) s.why = peerNotOkReason(firstNo);
      });

  // Under the control's mutex, so a stop either comes first (nothing is registered) or after
  // (the canceller's releaseComm removes what was).
  std::unique_lock<std::mutex> publishing;
  if (options.control != nullptr) publishing = std::unique_lock<std::mutex>(options.control->ncclMutex);
  std::vector<std::unique_ptr<LamportComm>> unpublished;
  for (auto& s : states) {
    cudaSetDevice(s->lc->cudaDev);
    if (options.control != nullptr && options.control->stopped(s->comm)) {
      // Aborted or destroyed meanwhile: the handle may already be reused by a new communicator.
      unpublished.push_back(std::move(s->lc));
      continue;
    }
    s->lc->setupFailed = s->roundOneIncomplete;
    publish(*s, s->proceed && s->localOk);
  }
  if (publishing.owns_lock()) publishing.unlock();
  // Freed without the mutex: unmapping may wait for the device (an aborted communicator's stuck
  // exchange, until NCCL's abort stops it), and the next abort must not wait for that.
  for (auto& lc : unpublished) {
    cudaSetDevice(lc->cudaDev);
    releaseResources(*lc);
  }
  states.clear();
}

std::unique_ptr<LamportComm> setupWorkspaceOverExchange(int nRanks, int cudaDev, SetupExchange& exchange) {
  const Config& config = globalConfig();
  RestoreCurrentDevice callerDevice;
  auto s = std::make_unique<SetupState>();
  s->lc = std::make_unique<LamportComm>();
  s->lc->nRanks = nRanks;
  s->lc->cudaDev = cudaDev;
  s->lc->maxCtas = effectiveCtaCap(0);  // the init's config is not seen from the tuner's init
  if (nRanks < 2) {
    s->lc->reason = "single-rank communicator";
    return std::move(s->lc);
  }
  // Every local step is guarded as in setupWorkspaces: a throw (bad_alloc, a thread that cannot
  // start) ends this rank's part but never skips a round its peers wait in, and never leaves
  // the tuner's init without an entry for this communicator.
  guardedStep(*s, "workspace allocation", [&] { prepareLocal(*s, config); });
  // Round 1: every rank's record, in the exchange's order; our place in it is our rank.
  std::vector<uint8_t> all;
  int index = -1;
  std::string why;
  if (gatherOver(exchange, &s->mine, sizeof(ExchangeRecord), &all, &index, &why) &&
      all.size() == sizeof(ExchangeRecord) * static_cast<size_t>(nRanks) && index >= 0 && index < nRanks) {
    s->lc->lamportRank = index;
    guardedStep(*s, "workspace exchange", [&] {
      s->records.resize(nRanks);
      memcpy(s->records.data(), all.data(), all.size());
      decideFromRecords(*s);
    });
  } else {
    guardedStep(*s, "workspace exchange", [&] {
      s->why = why.empty() ? std::string("the exchange of workspace records failed") : why;
    });
  }
  // Every rank got the same records, so every rank takes part in round 2 or none does, whatever
  // a local step below does to s->proceed.
  if (s->proceed) {
    guardedStep(*s, "serving the workspace handle", [&] { startServing(*s, config); });
    if (s->proceed) guardedStep(*s, "mapping the peers", [&] { mapPeers(*s, config); });
    if (s->proceed) guardedStep(*s, "preparing the kernels", [&] { finishLocal(*s); });
    // Round 2: one ok word per rank.
    OkRecord mine{};
    mine.ok = s->proceed && s->localOk ? 1 : 0;
    bool allOk = gatherOver(exchange, &mine, sizeof(mine), &all, &index, &why) &&
                 all.size() == sizeof(OkRecord) * static_cast<size_t>(nRanks);
    // The verdict from the words alone, identical on every rank (allRanksOk never throws).
    int firstNo = -1;
    allOk = allOk && allRanksOk(reinterpret_cast<const char*>(all.data()), nRanks, &firstNo);
    s->localOk = allOk;
    if (!allOk) noteWhy(*s, [&] { return firstNo >= 0 ? peerNotOkReason(firstNo) : why; });
  }
  cudaSetDevice(cudaDev);
  settleVerdict(*s, s->proceed && s->localOk);
  return std::move(s->lc);
}

}  // namespace nccl_lamport
