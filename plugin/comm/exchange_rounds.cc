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
 *  Allocates nothing: a throw (host memory) would skip this round on this rank alone, or leave
 *  its group open, while the peers wait in it, in round 2 for ever (the set-up thread's sweeps,
 *  tests/shim/lifecycle_fault_scenarios.c and tests/unit/test_setup_round_faults.cc, caught a
 *  vector of these answers and the wait's list of communicators failing between the rounds). */
ncclResult_t issueAllGather(std::vector<std::unique_ptr<SetupState>>& states, size_t bytes,
                            const SetupOptions& options, ExchangeRound round, RoundDevice& device) {
  for (auto& s : states) {
    s->gatherResult = ncclSuccess;
    s->gathered = false;
  }
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
    s->gathered = s->gatherResult == ncclSuccess;
  }
  ncclResult_t endResult = REAL_NCCL(ncclGroupEnd)();
  if (lock.owns_lock()) lock.unlock();
  // Non-blocking communicators may still be enqueueing: the stream is not ready to wait on yet.
  if (endResult == ncclInProgress && options.nonBlocking) {
    endResult = waitUntilEnqueued(
        states.size(), [&states](size_t i) { return states[i]->gathered ? states[i]->comm : nullptr; },
        options.control, round);
  }
  return result == ncclSuccess ? endResult : result;
}

/** s's part of a round did not complete: NCCL refused its all-gather (ncclFailure, its text) or
 *  the wait or read-back failed (err). s stops here whatever happens to the reason's text (host
 *  memory): after round 1 it takes no part in round 2 either (SetupState::roundOneIncomplete). */
void noteRoundFailure(SetupState& s, ExchangeRound round, const char* ncclFailure, cudaError_t err) noexcept {
  s.proceed = false;
  if (round == ExchangeRound::kFirst) s.roundOneIncomplete = true;
  try {
    const std::string failure = ncclFailure != nullptr        ? std::string("NCCL: ") + ncclFailure
                                : err == cudaErrorNotReady ? std::string("no answer within NCCL_LAMPORT_TIMEOUT_MS")
                                                           : std::string(cudaGetErrorString(err));
    if (round == ExchangeRound::kFirst) {
      s.why = "the workspace exchange did not complete on this rank (" + failure + "): a peer is gone or stuck";
    } else if (s.why.empty()) {
      s.why = "workspace exchange failed: " + failure;
    }
  } catch (...) {  // no memory for the text: the state has stopped all the same
  }
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
    if (round == ExchangeRound::kFirst) {
      // Failing here (host memory) says "not capable" in this round, and "not ok" in the next.
      guardedStep(*s, "workspace exchange", [&] {
        s->roundIn.assign(kExchangeBlockMaxBytes * static_cast<size_t>(s->lc->nRanks), 0);
      });
    }
    // On the stack: a rank must take part in the round even where fill fails (zeros: "no").
    alignas(16) char out[kExchangeBlockMaxBytes] = {};
    guardedStep(*s, "workspace exchange", [&] { fill(*s, out); });
    device.upload(*s, out, bytes);
  }
  const ncclResult_t groupResult = issueAllGather(states, bytes, options, round, device);
  for (auto& s : states) {
    const ncclResult_t result = groupResult != ncclSuccess ? groupResult : s->gatherResult;
    if (stopped(options, *s)) {  // not published either; whether it was in this round or not
      s->proceed = false;
      continue;
    }
    if (!device.hasBuffers(*s)) {
      // Never throws: its siblings still take part in round 2.
      noteWhy(*s, [] { return std::string("no device buffers for the workspace exchange"); });
      continue;
    }
    if (s->roundOneIncomplete) continue;  // round 2: left out (why says so)
    cudaSetDevice(s->lc->cudaDev);
    const char* ncclFailure = nullptr;
    cudaError_t err = cudaSuccess;
    if (result != ncclSuccess) {
      // Not waited for: an all-gather NCCL did not enqueue (or a gone peer keeps enqueueing)
      // would only take the round's whole bound a second time.
      ncclFailure = ncclErrorText(result);
    } else {
      // The wait first, with the round's bound: read back into pageable memory, the copy would
      // wait for the all-gather itself, for as long as a gone peer keeps it from finishing.
      err = device.waitIdle(*s, options.control, round);
      // No read-back buffer: its allocation failed in round 1, which this rank's blocks said.
      const size_t allBytes = bytes * static_cast<size_t>(s->lc->nRanks);
      if (err == cudaSuccess && s->roundIn.size() < allBytes) {
        s->proceed = false;
        continue;
      }
      if (err == cudaSuccess) err = device.download(*s, s->roundIn.data(), allBytes);
    }
    if (ncclFailure != nullptr || err != cudaSuccess) {
      noteRoundFailure(*s, round, ncclFailure, err);
      continue;
    }
    guardedStep(*s, "workspace exchange", [&] { take(*s, s->roundIn.data()); });
  }
}

}  // namespace nccl_lamport
