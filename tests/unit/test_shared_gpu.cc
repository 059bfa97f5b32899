// CPU tests of the shared-GPU mode's rules (tests/gpu/shared_gpu.h): how many ranks a forked GPU test
// runs, on which devices, when it skips, and what each rank sets before NCCL starts.
#include "tests/gpu/shared_gpu.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

namespace nccl_lamport {
namespace gputest {
namespace {

std::map<std::string, std::string> asMap(const std::vector<std::pair<std::string, std::string>>& env) {
  std::map<std::string, std::string> m;
  for (const auto& kv : env) m[kv.first] = kv.second;
  return m;
}

class SharedGpuEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"NCCL_LAMPORT_TEST_SHARED_GPU", "NCCL_LAMPORT_TEST_SHARED_GPU_RANKS", "NCCL_SOCKET_IFNAME",
                             "NCCL_IB_DISABLE", "NCCL_LAMPORT_REQUIRE_NVLINK"}) {
      unsetenv(name);
    }
  }
};

TEST_F(SharedGpuEnv, ModeOnlyForExactlyOne) {
  EXPECT_FALSE(sharedGpuMode());
  setenv("NCCL_LAMPORT_TEST_SHARED_GPU", "0", 1);
  EXPECT_FALSE(sharedGpuMode());
  setenv("NCCL_LAMPORT_TEST_SHARED_GPU", "yes", 1);
  EXPECT_FALSE(sharedGpuMode());
  setenv("NCCL_LAMPORT_TEST_SHARED_GPU", "1", 1);
  EXPECT_TRUE(sharedGpuMode());
}

TEST(SharedGpu, RankCount) {
  EXPECT_EQ(forkedRankCount(0, 8, false), 8);
  EXPECT_EQ(forkedRankCount(0, 1, false), 1);  // then skipped: normal mode needs 2 GPUs
  EXPECT_EQ(forkedRankCount(0, 1, true), 2);
  EXPECT_EQ(forkedRankCount(0, 4, true), 4);
  EXPECT_EQ(forkedRankCount(3, 1, true), 3);
  EXPECT_EQ(forkedRankCount(3, 8, false), 3);
}

TEST_F(SharedGpuEnv, RankCountOnOneGpuFromTheEnvironment) {
  setenv("NCCL_LAMPORT_TEST_SHARED_GPU_RANKS", "4", 1);
  EXPECT_EQ(forkedRankCount(0, 1, true), 4);
  EXPECT_EQ(forkedRankCount(0, 2, true), 2);  // one rank per GPU where there are several
  EXPECT_EQ(forkedRankCount(0, 1, false), 1);
  EXPECT_EQ(forkedRankCount(3, 1, true), 3);  // a test's own count wins
  setenv("NCCL_LAMPORT_TEST_SHARED_GPU_RANKS", "8", 1);
  EXPECT_EQ(forkedRankCount(0, 1, true), 8);
  for (const char* bad : {"1", "9", "x", ""}) {
    setenv("NCCL_LAMPORT_TEST_SHARED_GPU_RANKS", bad, 1);
    EXPECT_EQ(forkedRankCount(0, 1, true), 2) << bad;
  }
  unsetenv("NCCL_LAMPORT_TEST_SHARED_GPU_RANKS");
}

TEST(SharedGpu, SkipReasons) {
  EXPECT_EQ(forkedRankSkipReason(2, 2, false), "");
  EXPECT_EQ(forkedRankSkipReason(2, 8, false), "");
  EXPECT_NE(forkedRankSkipReason(1, 1, false), "");
  EXPECT_NE(forkedRankSkipReason(4, 2, false), "");
  EXPECT_NE(forkedRankSkipReason(2, 0, false), "");
  EXPECT_NE(forkedRankSkipReason(2, 1, false).find("NCCL_LAMPORT_TEST_SHARED_GPU=1"), std::string::npos);
  EXPECT_EQ(forkedRankSkipReason(2, 1, true), "");
  EXPECT_EQ(forkedRankSkipReason(4, 1, true), "");
  EXPECT_NE(forkedRankSkipReason(2, 0, true), "");  // still skipped, never passed, without a GPU
}

TEST(SharedGpu, Devices) {
  EXPECT_EQ(forkedRankDevice(0, 1, true), 0);
  EXPECT_EQ(forkedRankDevice(1, 1, true), 0);
  EXPECT_EQ(forkedRankDevice(3, 2, true), 1);
  EXPECT_EQ(forkedRankDevice(3, 8, false), 3);
  EXPECT_EQ(forkedRankDevice(1, 1, false), 1);
}

TEST_F(SharedGpuEnv, EnvironmentPerRank) {
  EXPECT_TRUE(sharedGpuEnvironment(0, false).empty());
  auto r0 = asMap(sharedGpuEnvironment(0, true));
  auto r1 = asMap(sharedGpuEnvironment(1, true));
  ASSERT_EQ(r0.count("NCCL_HOSTID"), 1u);
  ASSERT_EQ(r1.count("NCCL_HOSTID"), 1u);
  EXPECT_NE(r0["NCCL_HOSTID"], r1["NCCL_HOSTID"]);  // NCCL must see two hosts
  EXPECT_EQ(r0["NCCL_SOCKET_IFNAME"], "lo");
  EXPECT_EQ(r0["NCCL_IB_DISABLE"], "1");
  EXPECT_EQ(r0["NCCL_LAMPORT_REQUIRE_NVLINK"], "0");
}

TEST_F(SharedGpuEnv, EnvironmentKeepsWhatTheUserSet) {
  setenv("NCCL_SOCKET_IFNAME", "eth0", 1);
  setenv("NCCL_LAMPORT_REQUIRE_NVLINK", "1", 1);
  auto env = asMap(sharedGpuEnvironment(0, true));
  EXPECT_EQ(env.count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(env.count("NCCL_LAMPORT_REQUIRE_NVLINK"), 0u);
  EXPECT_EQ(env["NCCL_IB_DISABLE"], "1");
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("NCCL_LAMPORT_REQUIRE_NVLINK");
}

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
