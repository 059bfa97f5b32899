// How long the waits of a deferred (non-blocking) workspace set-up may last (plugin/comm/setup_control.h,
// ExchangeRound): round 1 gives up after NCCL_LAMPORT_TIMEOUT_MS, round 2 only when cancelled, so
// no rank can publish "ineligible" on its own after its peers agreed (issue 10, points 2 and 4).
// No GPU: the communicators come from the stand-in NCCL of tests/shim/lifecycle_fake_nccl.c
// (linked: its pnccl* are in the global scope), which reports one "in progress" until FAKE_READY_MS after its init;
// the stream waits poll a query function instead of a CUDA stream. NCCL_LAMPORT_TIMEOUT_MS=100.
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "common/config.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/deferred_setup.h"
#include "plugin/comm/setup_control.h"
#include "tests/unit/setup_test_support.h"

namespace {

using setup_test::Clock;
using setup_test::fakeComm;
using setup_test::kTimeoutMs;
using setup_test::secondsSince;
using setup_test::within;

TEST(SetupWaits, ConfiguredForTheTest) {
  ASSERT_EQ(nccl_lamport::globalConfig().timeoutMs, kTimeoutMs);
  int version = 0;
  ASSERT_EQ(pncclGetVersion(&version), ncclSuccess);  // also keeps the linked stand-in DT_NEEDED
  EXPECT_EQ(version, 22809) << "not the stand-in NCCL";
}

// A peer that died after init keeps NCCL's enqueue of round 1 waiting: round 1 gives up.
TEST(SetupWaits, RoundOneEnqueueGivesUpAfterTheTimeout) {
  ncclComm_t comm = fakeComm(3600 * 1000);
  ASSERT_NE(comm, nullptr);
  auto control = std::make_shared<nccl_lamport::SetupControl>();
  const auto start = Clock::now();
  const auto result = within<ncclResult_t>(std::chrono::seconds(5), [comm, control] {
    return nccl_lamport::waitUntilEnqueued(1, [comm](size_t) { return comm; }, control.get(), nccl_lamport::ExchangeRound::kFirst);
  });
  ASSERT_TRUE(result.has_value()) << "round 1's enqueue wait did not end within 5 s (timeout " << kTimeoutMs << " ms)";
  EXPECT_EQ(*result, ncclRemoteError);
  EXPECT_GE(secondsSince(start), kTimeoutMs / 1000.0 * 0.9);
}

// Round 2 outlasts the timeout: round 1 proved the peers alive, and a rank-local give-up here
// would publish "ineligible" while the peers publish "eligible".
TEST(SetupWaits, RoundTwoEnqueueWaitsPastTheTimeout) {
  ncclComm_t comm = fakeComm(6 * kTimeoutMs);
  ASSERT_NE(comm, nullptr);
  auto control = std::make_shared<nccl_lamport::SetupControl>();
  const auto result = within<ncclResult_t>(std::chrono::seconds(10), [comm, control] {
    return nccl_lamport::waitUntilEnqueued(1, [comm](size_t) { return comm; }, control.get(), nccl_lamport::ExchangeRound::kSecond);
  });
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(*result, ncclSuccess);
}

TEST(SetupWaits, RoundTwoStreamWaitOutlastsTheTimeout) {
  const auto start = Clock::now();
  const auto readyAt = start + std::chrono::milliseconds(6 * kTimeoutMs);
  auto control = std::make_shared<nccl_lamport::SetupControl>();
  const auto result = within<cudaError_t>(std::chrono::seconds(10), [readyAt, control] {
    return nccl_lamport::waitForQuery(
        [readyAt] { return Clock::now() >= readyAt ? cudaSuccess : cudaErrorNotReady; }, control.get(),
        nccl_lamport::ExchangeRound::kSecond);
  });
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(*result, cudaSuccess) << "round 2 gave up after " << secondsSince(start) << " s";
}

TEST(SetupWaits, RoundOneStreamWaitGivesUp) {
  auto control = std::make_shared<nccl_lamport::SetupControl>();
  const auto result = within<cudaError_t>(std::chrono::seconds(5), [control] {
    return nccl_lamport::waitForQuery([] { return cudaErrorNotReady; }, control.get(),
                                      nccl_lamport::ExchangeRound::kFirst);
  });
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(*result, cudaErrorNotReady);
}

// Round 2's only way out besides completion: a cancel (ncclCommAbort / revoke).
TEST(SetupWaits, RoundTwoStopsWhenCancelled) {
  ncclComm_t comm = fakeComm(3600 * 1000);
  ASSERT_NE(comm, nullptr);
  auto control = std::make_shared<nccl_lamport::SetupControl>();
  std::thread canceller([control] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * kTimeoutMs));
    std::lock_guard<std::mutex> lock(control->ncclMutex);
    control->cancelled.store(true);
  });
  const auto enqueued = within<ncclResult_t>(std::chrono::seconds(5), [comm, control] {
    return nccl_lamport::waitUntilEnqueued(1, [comm](size_t) { return comm; }, control.get(), nccl_lamport::ExchangeRound::kSecond);
  });
  const auto streamDone = within<cudaError_t>(std::chrono::seconds(5), [control] {
    return nccl_lamport::waitForQuery([] { return cudaErrorNotReady; }, control.get(),
                                      nccl_lamport::ExchangeRound::kSecond);
  });
  canceller.join();
  ASSERT_TRUE(enqueued.has_value());
  EXPECT_EQ(*enqueued, ncclInvalidUsage);
  ASSERT_TRUE(streamDone.has_value());
  EXPECT_EQ(*streamDone, cudaErrorNotReady);
}

/** Holds the set-up thread inside its first exchange round's ncclGroupEnd until released: a
 *  set-up that never ends (its round 2 waiting for a peer that died between the rounds). */
std::atomic<bool> gHoldSetUp{false};
std::atomic<bool> gSetUpHeld{false};

void holdSetUpAtGroupEnd(const char* function, ncclComm_t) {
  if (strcmp(function, "ncclGroupEnd") != 0) return;
  gSetUpHeld.store(true);
  while (gHoldSetUp.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// ncclAllReduce, split, shrink, finalize and destroy wait for a set-up NCCL reports ready; a
// set-up that never ends must not keep them for ever (ncclCommAbort is bounded too).
TEST(SetupWaits, ACallGivesUpOnASetUpThatNeverEnds) {
  ncclComm_t comm = fakeComm(0);
  ASSERT_NE(comm, nullptr);
  gHoldSetUp.store(true);
  fakeSetHelperCallHook(holdSetUpAtGroupEnd);
  nccl_lamport::startDeferredSetup({comm});
  const auto start = Clock::now();
  while (!gSetUpHeld.load() && secondsSince(start) < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(gSetUpHeld.load()) << "the set-up never reached its exchange";
  auto ncclCalls = std::make_shared<std::atomic<int>>(0);
  using Answer = std::pair<nccl_lamport::PendingCall, ncclResult_t>;
  const auto answer = within<Answer>(std::chrono::seconds(5), [comm, ncclCalls] {
    ncclResult_t result = ncclSuccess;
    const auto callNccl = [ncclCalls] {
      ++*ncclCalls;
      return ncclSuccess;
    };
    const auto how = nccl_lamport::waitForDeferredSetup(comm, callNccl, &result);
    return std::make_pair(how, result);
  });
  const double waited = secondsSince(start);
  gHoldSetUp.store(false);
  EXPECT_TRUE(nccl_lamport::joinDeferredSetup(comm, 5000));
  fakeSetHelperCallHook(nullptr);
  nccl_lamport::CommRegistry::instance().remove(comm);
  ASSERT_TRUE(answer.has_value()) << "the call still waited for the set-up after " << waited << " s";
  EXPECT_EQ(answer->first, nccl_lamport::PendingCall::kAnswered);
  EXPECT_EQ(answer->second, ncclInvalidArgument) << "the answer NCCL gives for a communicator still in progress";
  EXPECT_EQ(ncclCalls->load(), 0) << "the call reached NCCL while the set-up was using the communicator";
  EXPECT_GE(waited, kTimeoutMs / 1000.0) << "gave up before NCCL_LAMPORT_TIMEOUT_MS";
}

}  // namespace
