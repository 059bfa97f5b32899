#include "plugin/comm/exchange_rounds.h"

#include <mutex>
#include <string>

#include "plugin/loader/real_nccl.h"

namespace nccl_lamport {

namespace {

class CudaRoundDevice : public RoundDevice {
 public:
  bool hasBuffers(const SetupState& s) override {
    return s.stream != nullptr && s.sendDev != nullptr && s.recvDev != nullptr;
  }
  cudaError_t upload(SetupState& s, const void* host, size_t bytes) override {
    return cudaMemcpyAsync(s.sendDev, host, bytes, cudaMemcpyHostToDevice, s.stream);
  }
  cudaError_t waitIdle(SetupState& s, SetupControl* control, ExchangeRound round) override {
    return waitStream(s.stream, control, round, s.comm);
  }
  cudaError_t download(SetupState& s, void* host, size_t bytes) override {
    // The stream is idle by now (waitIdle comes first), and a copy into pageable memory returns
    // only once it is complete: the blocks are in `host` when this returns.
    return cudaMemcpyAsync(host, s.recvDev, bytes, cudaMemcpyDeviceToHost, s.stream);
  }
};

/** s takes part in a round: it has its buffers, and round 1 did not leave its stream stuck. */
bool takesPart(RoundDevice& device, const SetupState& s) { return device.hasBuffers(s) && !s.roundOneIncomplete; }

/** s's communicator was aborted or revoked during the set-up: nothing more of the set-up's is
 *  done on it (under control->ncclMutex where NCCL is called), its siblings go on. */
bool stopped(const SetupOptions& options, const SetupState& s) {
  return options.control != nullptr && options.control->stopped(s.comm);
}

/** The grouped all-gather itself: under the control's mutex, skipped once cancelled. Returns the
 *  group's result; each state's gatherResult is NCCL's answer for its all-gather (not
 *  ncclSuccess: NCCL refused it, and it is not part of the group).
 *  Nothing is allocated before the group has ended: a throw (host memory) there would skip this
 *  round on this rank alone, or leave its group open, while the peers wait in it, in round 2 for
 *  ever (the set-up thread's sweeps, tests/shim/lifecycle_fault_scenarios.c, caught a vector of
 *  these answers failing between the rounds). */
ncclResult_t issueAllGather(std::vector<std::unique_ptr<SetupState>>& states, size_t bytes,
                            const SetupOptions& options, ExchangeRound round, RoundDevice& device) {
  for (auto& s : states) s->gatherResult = ncclSuccess;
  std::unique_lock<std::mutex> lock;
  if (options.control != nullptr) {
    lock = std::unique_lock<std::mutex>(options.control->ncclMutex);
    if (options.control->cancelled.load()) return ncclInvalidUsage;
  }
  // A rank whose buffers could not even be allocated still has to take part, or its peers hang;
  // NCCL itself is then unusable on this device, so the all-gather fails on every rank anyway.
  ncclResult_t result = REAL_NCCL(ncclGroupStart)();
  for (auto& s : states) {
    if (!takesPart(device, *s) || stopped(options, *s)) continue;
    cudaSetDevice(s->lc->cudaDev);
    s->gatherResult = REAL_NCCL(ncclAllGather)(s->sendDev, s->recvDev, bytes, ncclUint8, s->comm, s->stream);
  }
  ncclResult_t endResult = REAL_NCCL(ncclGroupEnd)();
  if (lock.owns_lock()) lock.unlock();
  // Non-blocking communicators may still be enqueueing: the stream is not ready to wait on yet.
  if (endResult == ncclInProgress && options.nonBlocking) {
    std::vector<ncclComm_t> comms;  // those NCCL took into the group
    for (auto& s : states) {
      if (takesPart(device, *s) && !stopped(options, *s) && s->gatherResult == ncclSuccess) comms.push_back(s->comm);
    }
    endResult = waitUntilEnqueued(comms, options.control, round);
  }
  return result == ncclSuccess ? endResult : result;
}

}  // namespace

RoundDevice& cudaRoundDevice() {
  static CudaRoundDevice device;
  return device;
}

void exchangeRound(std::vector<std::unique_ptr<SetupState>>& states, size_t bytes, const SetupOptions& options,
                   ExchangeRound round, const RoundFill& fill, const RoundTake& take) {
  RoundDevice& device = options.device != nullptr ? *options.device : cudaRoundDevice();
  for (auto& s : states) {
    if (!takesPart(device, *s) || stopped(options, *s)) continue;
    cudaSetDevice(s->lc->cudaDev);
    std::vector<char> host(bytes, 0);
    guardedStep(*s, "workspace exchange", [&] { fill(*s, host.data()); });
    device.upload(*s, host.data(), bytes);
  }
  const ncclResult_t groupResult = issueAllGather(states, bytes, options, round, device);
  for (auto& s : states) {
    const ncclResult_t result = groupResult != ncclSuccess ? groupResult : s->gatherResult;
    if (stopped(options, *s)) {  // not published either; whether it was in this round or not
      s->proceed = false;
      continue;
    }
    if (!device.hasBuffers(*s)) {
      if (s->why.empty()) s->why = "no device buffers for the workspace exchange";
      continue;
    }
    if (s->roundOneIncomplete) continue;  // round 2: left out (why says so)
    cudaSetDevice(s->lc->cudaDev);
    std::vector<char> host(bytes * s->lc->nRanks, 0);
    std::string failure;
    if (result != ncclSuccess) {
      // Not waited for: an all-gather NCCL did not enqueue (or a gone peer keeps enqueueing)
      // would only take the round's whole bound a second time.
      failure = std::string("NCCL: ") + ncclErrorText(result);
    } else {
      // The wait first, with the round's bound: read back into pageable memory, the copy would
      // wait for the all-gather itself, for as long as a gone peer keeps it from finishing.
      cudaError_t err = device.waitIdle(*s, options.control, round);
      if (err == cudaSuccess) err = device.download(*s, host.data(), host.size());
      if (err == cudaErrorNotReady) {
        failure = "no answer within NCCL_LAMPORT_TIMEOUT_MS";
      } else if (err != cudaSuccess) {
        failure = cudaGetErrorString(err);
      }
    }
    if (!failure.empty()) {
      s->proceed = false;
      if (round == ExchangeRound::kFirst) {
        s->roundOneIncomplete = true;
        s->why = "the workspace exchange did not complete on this rank (" + failure + "): a peer is gone or stuck";
      } else if (s->why.empty()) {
        s->why = "workspace exchange failed: " + failure;
      }
      continue;
    }
    guardedStep(*s, "workspace exchange", [&] { take(*s, host.data()); });
  }
}

}  // namespace nccl_lamport
