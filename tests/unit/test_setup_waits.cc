// How long the waits of a deferred (non-blocking) workspace set-up may last (plugin/comm/setup_control.h,
// ExchangeRound): round 1 gives up after NCCL_LAMPORT_TIMEOUT_MS, round 2 only when cancelled, so
// no rank can publish "ineligible" on its own after its peers agreed (issue 10, points 2 and 4).
// No GPU: the communicators come from the stand-in NCCL of tests/shim/lifecycle_fake_nccl.c
// (linked: its pnccl* are in the global scope), which reports one "in progress" until FAKE_READY_MS after its init;
// the stream waits poll a query function instead of a CUDA stream. NCCL_LAMPORT_TIMEOUT_MS=100.
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "common/config.h"
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
    return nccl_lamport::waitUntilEnqueued({comm}, control.get(), nccl_lamport::ExchangeRound::kFirst);
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
    return nccl_lamport::waitUntilEnqueued({comm}, control.get(), nccl_lamport::ExchangeRound::kSecond);
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
    return nccl_lamport::waitUntilEnqueued({comm}, control.get(), nccl_lamport::ExchangeRound::kSecond);
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

}  // namespace
