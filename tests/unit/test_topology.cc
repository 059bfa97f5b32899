// Tests of plugin/transport/topology.cc. Suites BusId and Topology run anywhere (label cpu); suite
// GpuTopology needs GPUs (label gpu) and skips without them. This executable never forks, so
// initialising CUDA here is harmless.
#include "plugin/transport/topology.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace nccl_lamport {
namespace {

std::string norm(const std::string& in) {
  std::string out = "unchanged";
  if (!normalizeBusId(in, &out)) {
    EXPECT_TRUE(out.empty()) << "output not cleared for " << in;
    return "<invalid>";
  }
  return out;
}

const char* verdictName(LinkCheck check) {
  switch (check) {
    case LinkCheck::kNvlinkP2p: return "kNvlinkP2p";
    case LinkCheck::kNotNvlink: return "kNotNvlink";
    case LinkCheck::kUnknown: return "kUnknown";
  }
  return "?";
}

TEST(BusId, CudaNvmlAndSysfsSpellingsAgree) {
  EXPECT_EQ(norm("0000:1A:00.0"), "0000:1a:00.0");       // cudaDeviceGetPCIBusId
  EXPECT_EQ(norm("00000000:1A:00.0"), "0000:1a:00.0");   // nvmlPciInfo_t.busId
  EXPECT_EQ(norm("0000:1a:00.0"), "0000:1a:00.0");       // busIdLegacy / sysfs
  EXPECT_EQ(norm("1A:00.0"), "0000:1a:00.0");            // no domain
  EXPECT_EQ(norm("0:1a:0"), "0000:1a:00.0");             // domain:bus:device
  EXPECT_EQ(norm("0:1a:0.0"), "0000:1a:00.0");
  EXPECT_EQ(norm("0001:02:1F.7"), "0001:02:1f.7");
  EXPECT_EQ(norm("0000:DB:00.0"), "0000:db:00.0");
}

TEST(BusId, WideDomains) {
  // VMD and some hypervisors use 32-bit PCI domains.
  EXPECT_EQ(norm("00010000:3B:00.0"), "10000:3b:00.0");
  EXPECT_EQ(norm("10000:3b:00.0"), "10000:3b:00.0");
  EXPECT_EQ(norm("FFFFFFFF:ff:1f.7"), "ffffffff:ff:1f.7");
}

TEST(BusId, BlanksAndTrailingNuls) {
  EXPECT_EQ(norm("  0000:1A:00.0\n"), "0000:1a:00.0");
  EXPECT_EQ(norm(std::string("0000:1A:00.0\0\0\0", 15)), "0000:1a:00.0");
}

TEST(BusId, RejectsMalformed) {
  for (const char* bad : {"", " ", "zz:00.0", "0000:100:00.0", "0000:1a:20.0", "0000:1a:00.8",
                          "0000:1a:00.0x", "1:2:3:4", "1a:00", "1a", "123456789:00:00.0",
                          ":1a:00.0", "0000:1a:00.", "0000::00.0", "0000:1a:00.0.0",
                          "0x0000:1a:00.0", "0000:1a:00:0", "-1:1a:00.0", "0000 :1a:00.0"}) {
    EXPECT_EQ(norm(bad), "<invalid>") << '"' << bad << '"';
  }
  EXPECT_FALSE(normalizeBusId("0000:1a:00.0", nullptr));
}

TEST(BusId, CanonicalFormIsAFixedPoint) {
  for (const char* id : {"0000:00:00.0", "0000:1a:00.0", "0003:c1:1f.7", "10000:3b:00.0"}) {
    EXPECT_EQ(norm(norm(id)), norm(id));
  }
}

TEST(Topology, SameGpuIsNotAPeerLink) {
  std::string why;
  EXPECT_EQ(checkNvlinkP2p("0000:1A:00.0", "00000000:1a:00.0", &why), LinkCheck::kNotNvlink);
  EXPECT_EQ(why, "same GPU");
  EXPECT_EQ(checkNvlinkP2p("0000:1a:00.0", "1a:00.0", nullptr), LinkCheck::kNotNvlink);
}

TEST(Topology, MalformedIdsAreUnknown) {
  std::string why;
  EXPECT_EQ(checkNvlinkP2p("not-a-bus-id", "0000:1a:00.0", &why), LinkCheck::kUnknown);
  EXPECT_FALSE(why.empty());
  why.clear();
  EXPECT_EQ(checkNvlinkP2p("0000:1a:00.0", "", &why), LinkCheck::kUnknown);
  EXPECT_FALSE(why.empty());
}

TEST(Topology, AbsentGpusAreUnknownWithAReason) {
  // Bus ids no GPU has: unknown to NVML (or NVML absent and CUDA cannot see them either).
  std::string why;
  LinkCheck first = checkNvlinkP2p("0000:fe:1f.6", "0000:fe:1f.7", &why);
  EXPECT_EQ(first, LinkCheck::kUnknown);
  EXPECT_FALSE(why.empty());
  std::printf("absent GPUs: %s (%s)\n", verdictName(first), why.c_str());
  // Cached and symmetric: same answer, same reason, either order, any spelling.
  std::string why2;
  EXPECT_EQ(checkNvlinkP2p("00000000:FE:1F.7", "0000:fe:1f.6", &why2), first);
  EXPECT_EQ(why2, why);
}

TEST(Topology, ConcurrentQueriesAgree) {
  std::vector<std::thread> threads;
  std::atomic<int> disagreements{0};
  std::string reference;
  LinkCheck expected = checkNvlinkP2p("0000:fd:00.0", "0000:fd:01.0", &reference);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string why;
        // Mix cached and fresh pairs.
        char other[32];
        std::snprintf(other, sizeof(other), "0000:fc:%02x.%d", t, i % 8);
        (void)checkNvlinkP2p("0000:fc:1f.0", other, &why);
        if (checkNvlinkP2p("0000:fd:01.0", "0000:fd:00.0", &why) != expected || why != reference) {
          disagreements.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(disagreements.load(), 0);
}

// ---- GPU part --------------------------------------------------------------------------------

int visibleGpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

TEST(GpuTopology, LocalIdentity) {
  int gpus = visibleGpus();
  if (gpus < 1) GTEST_SKIP() << "no GPU visible";
  GpuIdentity id;
  ASSERT_TRUE(localGpuIdentity(0, &id));
  std::string canonical;
  ASSERT_TRUE(normalizeBusId(id.busId, &canonical));
  EXPECT_EQ(canonical, id.busId);  // already in canonical form
  std::printf("GPU 0 bus id: %s\n", id.busId);
  std::string why;
  EXPECT_EQ(checkNvlinkP2p(id.busId, id.busId, &why), LinkCheck::kNotNvlink);
  EXPECT_EQ(why, "same GPU");
  GpuIdentity bad;
  EXPECT_FALSE(localGpuIdentity(gpus, &bad));  // no such device
}

TEST(GpuTopology, TwoGpusGiveADefiniteAnswer) {
  int gpus = visibleGpus();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, " << gpus << " visible";
  GpuIdentity a, b;
  ASSERT_TRUE(localGpuIdentity(0, &a));
  ASSERT_TRUE(localGpuIdentity(1, &b));
  EXPECT_STRNE(a.busId, b.busId);
  std::string why;
  LinkCheck check = checkNvlinkP2p(a.busId, b.busId, &why);
  std::printf("GPU 0 (%s) <-> GPU 1 (%s): %s%s%s\n", a.busId, b.busId, verdictName(check),
              why.empty() ? "" : ": ", why.c_str());
  EXPECT_NE(check, LinkCheck::kUnknown) << why;
  if (check == LinkCheck::kNvlinkP2p) {
    EXPECT_TRUE(why.empty());
  }
  std::string whyReverse;
  EXPECT_EQ(checkNvlinkP2p(b.busId, a.busId, &whyReverse), check);
  EXPECT_EQ(whyReverse, why);
  // CUDA's view must not contradict a positive answer: NVLink P2P implies peer access.
  if (check == LinkCheck::kNvlinkP2p) {
    int canAccess = 0;
    ASSERT_EQ(cudaDeviceCanAccessPeer(&canAccess, 0, 1), cudaSuccess);
    EXPECT_EQ(canAccess, 1);
  }
}

}  // namespace
}  // namespace nccl_lamport
