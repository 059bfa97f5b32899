// CPU tests of the launch policy of the default kernels (kernels/lamport_allreduce.h): when a
// launch uses the late PDL trigger. The kernel treats any non-zero value as late, so the launcher
// must turn the caller's request (0 = its choice, > 0 late, < 0 early) into exactly 0 or 1.
#include <gtest/gtest.h>

#include <cstddef>

#include "kernels/lamport_allreduce.h"

namespace nccl_lamport {
namespace {

// One H200, the 2-rank kernel: 4 blocks per SM x 132 SMs.
constexpr int kResident = 528;

TEST(LaunchPolicy, ForcedRequestsWinWhateverTheGrid) {
  for (size_t blocks : {size_t{1}, size_t{44}, size_t{45}, size_t{132}}) {
    EXPECT_TRUE(lamportUseLateTrigger(1, blocks, kResident)) << blocks;
    EXPECT_TRUE(lamportUseLateTrigger(7, blocks, kResident)) << blocks;
    // -1 (always early): the A/B variants named "-early" (this was read as late on the GPU when
    // the launcher passed -1 through to the kernel unchanged).
    EXPECT_FALSE(lamportUseLateTrigger(-1, blocks, kResident)) << blocks;
  }
}

TEST(LaunchPolicy, TheKernelReceivesExactlyZeroOrOne) {
  // The launcher passes triggerAfterWait on only where it equals this value; -1 ("always early",
  // the loopback variants named "-early") reached the kernel unchanged before, where it read as
  // late: those variants were timed with the late trigger on the GPU (2026-12-02, call 8).
  for (int requested : {-5, -1, 0, 1, 3}) {
    for (size_t blocks : {size_t{1}, size_t{44}, size_t{45}, size_t{132}}) {
      const int arg = lamportKernelTriggerArg(requested, blocks, kResident);
      EXPECT_TRUE(arg == 0 || arg == 1) << requested << " " << blocks;
      EXPECT_EQ(arg == 1, lamportUseLateTrigger(requested, blocks, kResident));
    }
  }
  EXPECT_EQ(lamportKernelTriggerArg(-1, 132, kResident), 0);
  EXPECT_EQ(lamportKernelTriggerArg(3, 1, kResident), 1);
}

TEST(LaunchPolicy, LauncherChoiceIsLateAboveOneTwelfthOfTheDevice) {
  // 528 / 12 = 44 blocks: up to 44 early, from 45 late.
  EXPECT_FALSE(lamportUseLateTrigger(0, 1, kResident));
  EXPECT_FALSE(lamportUseLateTrigger(0, 44, kResident));
  EXPECT_TRUE(lamportUseLateTrigger(0, 45, kResident));
  EXPECT_TRUE(lamportUseLateTrigger(0, kResident / kLamportResidencyShare, kResident));
  // 2 ranks, bf16, 128 data threads per block: 8 B and 32 KB are one and 16 blocks (early),
  // 128 KB is 64 blocks (late: the 0.3 us of docs/loopback-log-1xh200.md).
  EXPECT_FALSE(lamportUseLateTrigger(0, 16, kResident));
  EXPECT_TRUE(lamportUseLateTrigger(0, 64, kResident));
}

TEST(LaunchPolicy, OneStreamHoldsAtMostAThirdOfTheDeviceWhileItCanBlock) {
  // Early grid (a pre-launched successor may sit beside it) + the largest successor.
  const double earlyMost = 1.0 / kLamportEarlyTriggerShare;
  const double gridMost = 1.0 / kLamportResidencyShare;
  EXPECT_LE(earlyMost + gridMost, 1.0 / 3 + 1e-12);
}

TEST(LaunchPolicy, OneShotTakesWideBlocksFrom128KB) {
  constexpr size_t kWide = kLamportWideBlockMinBytes;
  EXPECT_EQ(kWide, size_t{128} * 1024);
  EXPECT_EQ(lamportDefaultDataThreads(true, 8), kLamportFastSmallBlockThreads);
  EXPECT_EQ(lamportDefaultDataThreads(true, kWide - 1), kLamportFastSmallBlockThreads);
  EXPECT_EQ(lamportDefaultDataThreads(true, kWide), kLamportFastWideBlockThreads);
  EXPECT_EQ(lamportDefaultDataThreads(true, size_t{64} << 20), kLamportFastWideBlockThreads);
  // The two-shot keeps the small blocks at every size.
  EXPECT_EQ(lamportDefaultDataThreads(false, kWide), kLamportFastSmallBlockThreads);
  EXPECT_EQ(lamportDefaultDataThreads(false, size_t{64} << 20), kLamportFastSmallBlockThreads);
}

TEST(LaunchPolicy, EveryFastAndTwoShotLaunchCarriesTheStashSharedMemory) {
  // 3 vectors of 16 bytes a data thread, and within the 48 KB a kernel gets without an opt-in.
  EXPECT_EQ(lamportDynamicSmemBytes(128), size_t{3} * 16 * 128);
  EXPECT_EQ(lamportDynamicSmemBytes(256), size_t{12} * 1024);
  EXPECT_LE(lamportDynamicSmemBytes(512), size_t{48} * 1024);
}

TEST(LaunchPolicy, AutoTakesTheSinglePassOnlyWithTheEarlyTrigger) {
  // Fits and early (small messages): the single pass.
  EXPECT_EQ(lamportAutoFastPass(true, false), LamportFastPass::kSinglePass);
  // Fits but late (2 ranks, 512 KB): the stash kernel.
  EXPECT_EQ(lamportAutoFastPass(true, true), LamportFastPass::kGridStridedStash);
}

TEST(LaunchPolicy, AutoTakesTheStashWhereTheSinglePassDoesNotFit) {
  // The early-trigger flag does not matter once the single pass cannot hold the message.
  EXPECT_EQ(lamportAutoFastPass(false, false), LamportFastPass::kGridStridedStash);
  EXPECT_EQ(lamportAutoFastPass(false, true), LamportFastPass::kGridStridedStash);
}

}  // namespace
}  // namespace nccl_lamport
