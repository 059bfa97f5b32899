// A stand-in for the device side of the set-up's exchange rounds (plugin/comm/exchange_rounds.h,
// RoundDevice), for the CPU tests of tests/unit/test_setup_rounds.cc and test_setup_stops.cc:
// which device steps a set-up runs, in which order, and what it does when an all-gather never
// finishes, without a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "plugin/comm/exchange_rounds.h"
#include "plugin/comm/setup_control.h"
#include "plugin/comm/workspace_setup.h"
#include "tests/unit/setup_test_support.h"

namespace setup_test {

/** Round index (0, 1) of a block of `bytes`: records in round 1, ok words in round 2. */
inline int roundOf(size_t bytes) { return bytes == sizeof(nccl_lamport::ExchangeRecord) ? 0 : 1; }

/**
 * Round r's all-gather finishes while it is waited for when finishes[r] (after finishAfterMs[r]),
 * else never (a gone peer): the wait then ends only by the round's own bound or a stop (the
 * product's waitForQuery). Counts each step per round, and the read-backs made before the
 * all-gather finished (a copy into pageable memory would block there, unbounded). onStep runs at
 * the start of each step ("upload", "wait", "download"), on the set-up's thread. Each state's
 * steps of one round run in the order upload, (issue), wait, download, one state after another.
 */
class StandInDevice : public nccl_lamport::RoundDevice {
 public:
  bool finishes[2] = {true, true};
  int finishAfterMs[2] = {0, 0};
  std::function<void(const char* step, int round, nccl_lamport::SetupState& s)> onStep;
  std::atomic<int> uploads[2] = {}, waits[2] = {}, downloads[2] = {}, downloadsBeforeDone[2] = {};

  // The block's memory up front: the rounds themselves allocate nothing (test_setup_round_faults.cc).
  StandInDevice() { block_.reserve(nccl_lamport::kExchangeBlockMaxBytes); }

  bool hasBuffers(const nccl_lamport::SetupState&) override { return true; }
  cudaError_t upload(nccl_lamport::SetupState& s, const void* host, size_t bytes) override {
    round_ = roundOf(bytes);
    done_ = false;
    if (onStep) onStep("upload", round_, s);
    ++uploads[round_];
    const char* p = static_cast<const char*>(host);
    block_.assign(p, p + bytes);
    return cudaSuccess;
  }
  cudaError_t waitIdle(nccl_lamport::SetupState& s, nccl_lamport::SetupControl* control,
                       nccl_lamport::ExchangeRound round) override {
    const int r = round == nccl_lamport::ExchangeRound::kFirst ? 0 : 1;
    if (onStep) onStep("wait", r, s);
    ++waits[r];
    const auto finishAt = Clock::now() + std::chrono::milliseconds(finishAfterMs[r]);
    const bool finishes = this->finishes[r];
    const cudaError_t err = nccl_lamport::waitForQuery(
        [finishes, finishAt] { return finishes && Clock::now() >= finishAt ? cudaSuccess : cudaErrorNotReady; },
        control, round, s.comm);
    done_ = err == cudaSuccess;
    return err;
  }
  cudaError_t download(nccl_lamport::SetupState& s, void* host, size_t bytes) override {
    if (onStep) onStep("download", round_, s);
    ++downloads[round_];
    if (!done_) ++downloadsBeforeDone[round_];
    // A 2-rank all-gather of two identical blocks.
    for (size_t at = 0; at + block_.size() <= bytes; at += block_.size()) {
      memcpy(static_cast<char*>(host) + at, block_.data(), block_.size());
    }
    return cudaSuccess;
  }

 private:
  int round_ = 0;
  bool done_ = false;
  std::vector<char> block_;
};

/** setupWorkspaces(comms) as the deferred set-up runs it, on a thread of its own; true if it
 *  returned within 5 s. */
inline bool setUpWithin5s(std::vector<ncclComm_t> comms, const std::shared_ptr<nccl_lamport::SetupControl>& control,
                          const std::shared_ptr<StandInDevice>& device) {
  return within<bool>(std::chrono::seconds(5), [comms, control, device] {
           nccl_lamport::SetupOptions options;
           options.nonBlocking = true;
           options.control = control.get();
           options.device = device.get();
           nccl_lamport::setupWorkspaces(comms, options);
           return true;
         }).has_value();
}

}  // namespace setup_test
