// The exchange rounds of a non-blocking communicator's set-up (plugin/comm/exchange_rounds.h,
// setupWorkspaces) over the stand-in NCCL, with a stand-in for their device side (RoundDevice): a
// round's blocks are read back only once its all-gather has finished, and a round 1 that gave up
// on a gone peer ends the set-up instead of waiting in round 2 behind the stuck all-gather.
// No GPU: the set-up's CUDA steps fail here (capable = 0), which the rounds carry like any rank's
// "no"; what is checked is which device steps run, in which order, and when the set-up ends.
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/exchange_rounds.h"
#include "plugin/comm/setup_control.h"
#include "plugin/comm/workspace_setup.h"
#include "tests/unit/setup_test_support.h"

namespace {

using nccl_lamport::ExchangeRound;
using nccl_lamport::SetupControl;
using nccl_lamport::SetupState;
using setup_test::fakeComm;
using setup_test::within;

/** Round index (0, 1) of a block of `bytes`: records in round 1, ok words in round 2. */
int roundOf(size_t bytes) { return bytes == sizeof(nccl_lamport::ExchangeRecord) ? 0 : 1; }

/**
 * The device side of the rounds without a GPU. Round r's all-gather finishes while it is waited
 * for when finishes[r], else never (a gone peer): the wait then ends only by the round's own
 * bound (the product's waitForQuery). Counts each step per round, and the read-backs made
 * before the all-gather finished (a copy into pageable memory would block there, unbounded).
 */
class StandInDevice : public nccl_lamport::RoundDevice {
 public:
  bool finishes[2] = {true, true};
  std::function<void(SetupState&)> atRoundOneUpload;  // before round 1's all-gather is issued
  std::atomic<int> uploads[2] = {}, waits[2] = {}, downloads[2] = {}, downloadsBeforeDone[2] = {};

  bool hasBuffers(const SetupState&) override { return true; }
  cudaError_t upload(SetupState& s, const void* host, size_t bytes) override {
    round_ = roundOf(bytes);
    done_ = false;
    ++uploads[round_];
    const char* p = static_cast<const char*>(host);
    block_.assign(p, p + bytes);
    if (round_ == 0 && atRoundOneUpload) atRoundOneUpload(s);
    return cudaSuccess;
  }
  cudaError_t waitIdle(SetupState&, SetupControl* control, ExchangeRound round) override {
    const int r = round == ExchangeRound::kFirst ? 0 : 1;
    ++waits[r];
    if (finishes[r]) {
      done_ = true;
      return cudaSuccess;
    }
    return nccl_lamport::waitForQuery([] { return cudaErrorNotReady; }, control, round);
  }
  cudaError_t download(SetupState&, void* host, size_t bytes) override {
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

/** setupWorkspaces({comm}) as the deferred set-up runs it, on a thread of its own; true if it
 *  returned within 5 s. */
bool setUpWithin5s(ncclComm_t comm, const std::shared_ptr<SetupControl>& control,
                   const std::shared_ptr<StandInDevice>& device) {
  return within<bool>(std::chrono::seconds(5), [comm, control, device] {
           nccl_lamport::SetupOptions options;
           options.nonBlocking = true;
           options.control = control.get();
           options.device = device.get();
           nccl_lamport::setupWorkspaces({comm}, options);
           return true;
         }).has_value();
}

/** Lets a set-up still waiting (the test failed) end, and forgets comm's entry. */
void cleanUp(ncclComm_t comm, const std::shared_ptr<SetupControl>& control) {
  {
    std::lock_guard<std::mutex> lock(control->ncclMutex);
    control->cancelled.store(true);
  }
  fakeCommBusyFor(comm, 0);
  nccl_lamport::CommRegistry::instance().remove(comm);
}

TEST(SetupRounds, TheReadBackWaitsUntilTheAllGatherFinished) {
  ncclComm_t comm = fakeComm(0);
  ASSERT_NE(comm, nullptr);
  auto control = std::make_shared<SetupControl>();
  auto device = std::make_shared<StandInDevice>();
  ASSERT_TRUE(setUpWithin5s(comm, control, device));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(device->downloads[r].load(), 1) << "round " << r + 1;
    EXPECT_EQ(device->downloadsBeforeDone[r].load(), 0)
        << "round " << r + 1 << " read its blocks back before its all-gather finished: a copy into pageable "
        << "memory then blocks until it does, whatever the round's deadline";
  }
  cleanUp(comm, control);
}

}  // namespace
