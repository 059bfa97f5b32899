// The NCCL tuner as NCCL sees it: every exported ncclTunerPlugin_vN struct, driven with a mock
// NCCL logger and fake cost tables, the tuner-only notice and the cost hook. No GPU, no NCCL.
// The self-registration decision and the tuner-only reason are in test_tuner_registration.cc.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "tuner/abi/tuner_abi.h"
#include "tuner/load_mode.h"
#include "tuner/tuner_impl.h"

namespace nccl_lamport {
namespace {

using abi::kCostAlgorithms;
using abi::kCostProtocols;

// ---- mock NCCL logger ----------------------------------------------------------------------

struct LoggedLine {
  int level;
  unsigned long flags;
  std::string text;
};

std::mutex gMockMutex;
std::vector<LoggedLine> gMockLines;

void mockNcclLogger(int level, unsigned long flags, const char* /*file*/, int /*line*/,
                    const char* fmt, ...) {
  char buffer[2048];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buffer, sizeof(buffer), fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(gMockMutex);
  gMockLines.push_back({level, flags, buffer});
}

std::vector<LoggedLine> mockLines() {
  std::lock_guard<std::mutex> lock(gMockMutex);
  return gMockLines;
}

size_t countLinesContaining(const std::string& needle) {
  size_t count = 0;
  for (const LoggedLine& line : mockLines()) {
    if (line.text.find(needle) != std::string::npos) ++count;
  }
  return count;
}

const char* const kTopologyMarker = "tuner: comm";  // commId (v5+) or communicator (v2..v4)
const char* const kTunerOnlyMarker = "Lamport path is off";

// ---- one driver over every exported version --------------------------------------------------

// A version-neutral handle on one exported struct, so each test runs against all five.
struct TunerDriver {
  int version;
  const char* name;
  // commId and nvl are dropped for v2..v4, which do not carry them.
  std::function<ncclResult_t(void**, uint64_t, size_t, size_t, abi::TunerLogger,
                             abi::NvlDomainInfoV5*, abi::TunerConstantsV5*)>
      init;
  // table: float[7][3]; algorithm/protocol only reach v2.
  std::function<ncclResult_t(void*, float*, int*, int*, int*)> getCollInfo;
  std::function<ncclResult_t(void*)> finalize;
};

TunerDriver makeDriver(int version) {
  TunerDriver d;
  d.version = version;
  switch (version) {
    case 2: {
      const abi::TunerV2& t = ncclTunerPlugin_v2;
      d.name = t.name;
      d.init = [&t](void** ctx, uint64_t, size_t nRanks, size_t nNodes, abi::TunerLogger log,
                    abi::NvlDomainInfoV5*, abi::TunerConstantsV5*) {
        return t.init(nRanks, nNodes, log, ctx);
      };
      d.getCollInfo = [&t](void* ctx, float*, int* algo, int* proto, int* nChannels) {
        return t.getCollInfo(ctx, abi::kFuncAllReduce, 65536, /*collNetSupport=*/0,
                             /*nvlsSupport=*/1, /*numPipeOps=*/1, algo, proto, nChannels);
      };
      d.finalize = t.destroy;
      break;
    }
    case 3: {
      const abi::TunerV3& t = ncclTunerPlugin_v3;
      d.name = t.name;
      d.init = [&t](void** ctx, uint64_t, size_t nRanks, size_t nNodes, abi::TunerLogger log,
                    abi::NvlDomainInfoV5*, abi::TunerConstantsV5*) {
        return t.init(nRanks, nNodes, log, ctx);
      };
      d.getCollInfo = [&t](void* ctx, float* table, int*, int*, int* nChannels) {
        return t.getCollInfo(ctx, abi::kFuncAllReduce, 65536, 1, reinterpret_cast<float**>(table),
                             kCostAlgorithms, kCostProtocols, nChannels);
      };
      d.finalize = t.destroy;
      break;
    }
    case 4: {
      const abi::TunerV4& t = ncclTunerPlugin_v4;
      d.name = t.name;
      d.init = [&t](void** ctx, uint64_t, size_t nRanks, size_t nNodes, abi::TunerLogger log,
                    abi::NvlDomainInfoV5*, abi::TunerConstantsV5*) {
        return t.init(nRanks, nNodes, log, ctx);
      };
      d.getCollInfo = [&t](void* ctx, float* table, int*, int*, int* nChannels) {
        return t.getCollInfo(ctx, abi::kFuncAllReduce, 65536, 1, reinterpret_cast<float**>(table),
                             kCostAlgorithms, kCostProtocols, /*regBuff=*/0, nChannels);
      };
      d.finalize = t.destroy;
      break;
    }
    case 5: {
      const abi::TunerV5& t = ncclTunerPlugin_v5;
      d.name = t.name;
      d.init = t.init;
      d.getCollInfo = [&t](void* ctx, float* table, int*, int*, int* nChannels) {
        return t.getCollInfo(ctx, abi::kFuncAllReduce, 65536, 1, reinterpret_cast<float**>(table),
                             kCostAlgorithms, kCostProtocols, /*regBuff=*/1, nChannels);
      };
      d.finalize = t.finalize;
      break;
    }
    case 7: {
      // v7's constants table has a fifth architecture row: the adapter gets a v7 table laid out
      // from the driver's v5 one (the rows v5 has, the new one set to a pattern), and the test
      // below sees the v5 part; the v7 table itself is checked unchanged here.
      const abi::TunerV7& t = ncclTunerPlugin_v7;
      d.name = t.name;
      d.init = [&t](void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, abi::TunerLogger log,
                    abi::NvlDomainInfoV5* nvl, abi::TunerConstantsV5* constants) {
        if (constants == nullptr) return t.init(ctx, commId, nRanks, nNodes, log, nvl, nullptr);
        abi::TunerConstantsV7 v7;
        std::memset(&v7, 0, sizeof(v7));
        std::memcpy(v7.baseLatencies, constants->baseLatencies, sizeof(v7.baseLatencies));
        std::memcpy(v7.hwLatencies, constants->hwLatencies, sizeof(v7.hwLatencies));
        for (int row = 0; row < abi::kV7CompCaps; ++row) {
          for (int scale = 0; scale < abi::kV5TuningScales; ++scale) {
            v7.llMaxBws[row][scale] = row < abi::kV5CompCaps ? constants->llMaxBws[row][scale] : 7.25 + scale;
          }
        }
        const abi::TunerConstantsV7 before = v7;
        const ncclResult_t result = t.init(ctx, commId, nRanks, nNodes, log, nvl, &v7);
        EXPECT_EQ(std::memcmp(&v7, &before, sizeof(v7)), 0) << "v7 constants changed";
        return result;
      };
      d.getCollInfo = [&t](void* ctx, float* table, int*, int*, int* nChannels) {
        return t.getCollInfo(ctx, abi::kFuncAllReduce, 65536, 1, reinterpret_cast<float**>(table),
                             kCostAlgorithms, kCostProtocols, /*regBuff=*/0, nChannels);
      };
      d.finalize = t.finalize;
      break;
    }
    default: {
      const abi::TunerV6& t = ncclTunerPlugin_v6;
      d.name = t.name;
      d.init = t.init;
      d.getCollInfo = [&t](void* ctx, float* table, int*, int*, int* nChannels) {
        return t.getCollInfo(ctx, abi::kFuncAllReduce, 65536, 1, reinterpret_cast<float**>(table),
                             kCostAlgorithms, kCostProtocols, /*regBuff=*/0, nChannels);
      };
      d.finalize = t.finalize;
      break;
    }
  }
  return d;
}

// A cost table as NCCL builds one: some candidates, several -1 ("not a candidate") entries.
struct FakeCostTable {
  float entries[kCostAlgorithms][kCostProtocols] = {
      {12.5f, 9.0f, 30.25f},  // tree
      {8.0f, 7.5f, 20.0f},    // ring
      {-1.0f, -1.0f, -1.0f},  // collnet direct: no collnet
      {-1.0f, -1.0f, -1.0f},  // collnet chain
      {-1.0f, -1.0f, 4.75f},  // NVLS: simple only
      {-1.0f, -1.0f, -1.0f},  // NVLS tree: single node
      {0.0f, -1.0f, 1e9f},    // PAT: a zero (forced) entry and a huge one
  };
  float* data() { return &entries[0][0]; }
};

bool sameBits(const FakeCostTable& a, const FakeCostTable& b) {
  return std::memcmp(a.entries, b.entries, sizeof(a.entries)) == 0;
}

class TunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::lock_guard<std::mutex> lock(gMockMutex);
      gMockLines.clear();
    }
    resetTunerProcessStateForTest();
    setLogSinkForTest(nullptr);
    // The tuner reads the knobs (NCCL_LAMPORT_TUNER_HOOKS); the config's one INFO line comes at
    // the first read, here, before INFO is on, so each test counts only the tuner's own lines.
    (void)globalConfig();
    LogSettings settings;
    settings.level = kLogInfo;
    settings.subsysMask = kSubsysTuning | kSubsysInit;
    setLogSettingsForTest(settings);
  }
  void TearDown() override {
    setNcclLogger(nullptr);
    setLogSettingsForTest(LogSettings{});
    resetTunerProcessStateForTest();
  }
};

class TunerVersionTest : public TunerTest, public ::testing::WithParamInterface<int> {};

INSTANTIATE_TEST_SUITE_P(AllVersions, TunerVersionTest, ::testing::Values(2, 3, 4, 5, 6, 7),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "v" + std::to_string(info.param);
                         });

// ---- the exported structs --------------------------------------------------------------------

TEST_F(TunerTest, EveryVersionIsExportedAsLamportWithAllEntryPoints) {
  EXPECT_STREQ(ncclTunerPlugin_v2.name, "lamport");
  EXPECT_STREQ(ncclTunerPlugin_v3.name, "lamport");
  EXPECT_STREQ(ncclTunerPlugin_v4.name, "lamport");
  EXPECT_STREQ(ncclTunerPlugin_v5.name, "lamport");
  EXPECT_STREQ(ncclTunerPlugin_v6.name, "lamport");
  EXPECT_NE(ncclTunerPlugin_v2.init, nullptr);
  EXPECT_NE(ncclTunerPlugin_v2.getCollInfo, nullptr);
  EXPECT_NE(ncclTunerPlugin_v2.destroy, nullptr);
  EXPECT_NE(ncclTunerPlugin_v3.init, nullptr);
  EXPECT_NE(ncclTunerPlugin_v3.getCollInfo, nullptr);
  EXPECT_NE(ncclTunerPlugin_v3.destroy, nullptr);
  EXPECT_NE(ncclTunerPlugin_v4.init, nullptr);
  EXPECT_NE(ncclTunerPlugin_v4.getCollInfo, nullptr);
  EXPECT_NE(ncclTunerPlugin_v4.destroy, nullptr);
  EXPECT_NE(ncclTunerPlugin_v5.init, nullptr);
  EXPECT_NE(ncclTunerPlugin_v5.getCollInfo, nullptr);
  EXPECT_NE(ncclTunerPlugin_v5.finalize, nullptr);
  EXPECT_NE(ncclTunerPlugin_v6.init, nullptr);
  EXPECT_NE(ncclTunerPlugin_v6.getCollInfo, nullptr);
  EXPECT_NE(ncclTunerPlugin_v6.finalize, nullptr);
  // Optional in v6; null keeps NCCL's own chunk size.
  EXPECT_EQ(ncclTunerPlugin_v6.getChunkSize, nullptr);
  EXPECT_STREQ(ncclTunerPlugin_v7.name, "lamport");
  EXPECT_NE(ncclTunerPlugin_v7.init, nullptr);
  EXPECT_NE(ncclTunerPlugin_v7.getCollInfo, nullptr);
  EXPECT_NE(ncclTunerPlugin_v7.finalize, nullptr);
  EXPECT_EQ(ncclTunerPlugin_v7.getChunkSize, nullptr);
}

TEST_P(TunerVersionTest, InitGetCollInfoFinalizeSucceedAndChangeNothing) {
  TunerDriver d = makeDriver(GetParam());
  abi::NvlDomainInfoV5 nvl{1, 2, 2};
  abi::TunerConstantsV5 constants;
  for (size_t i = 0; i < sizeof(constants) / sizeof(double); ++i) {
    reinterpret_cast<double*>(&constants)[i] = 0.5 * static_cast<double>(i) + 1.0;
  }
  const abi::TunerConstantsV5 constantsBefore = constants;

  void* ctx = nullptr;
  ASSERT_EQ(d.init(&ctx, 0x1234abcdull, 2, 1, mockNcclLogger, &nvl, &constants), ncclSuccess);
  EXPECT_NE(ctx, nullptr);
  EXPECT_EQ(std::memcmp(&constants, &constantsBefore, sizeof(constants)), 0);

  for (int nChannelsIn : {0, 5}) {
    FakeCostTable table;
    const FakeCostTable before = table;
    int algorithm = -1, protocol = -1, nChannels = nChannelsIn;
    ASSERT_EQ(d.getCollInfo(ctx, table.data(), &algorithm, &protocol, &nChannels), ncclSuccess);
    EXPECT_TRUE(sameBits(table, before));
    EXPECT_EQ(nChannels, nChannelsIn);
    EXPECT_EQ(algorithm, -1);
    EXPECT_EQ(protocol, -1);
  }
  EXPECT_EQ(d.finalize(ctx), ncclSuccess);
}

TEST_P(TunerVersionTest, LogsTopologyOnceAtInfoPerCommunicator) {
  TunerDriver d = makeDriver(GetParam());
  abi::NvlDomainInfoV5 nvl{1, 2, 2};
  abi::TunerConstantsV5 constants{};
  void* ctxA = nullptr;
  void* ctxB = nullptr;
  ASSERT_EQ(d.init(&ctxA, 0xabcull, 2, 1, mockNcclLogger, &nvl, &constants), ncclSuccess);
  ASSERT_EQ(d.init(&ctxB, 0xdefull, 2, 1, mockNcclLogger, &nvl, &constants), ncclSuccess);
  for (int i = 0; i < 100; ++i) {
    FakeCostTable table;
    int algorithm = -1, protocol = -1, nChannels = 0;
    ASSERT_EQ(d.getCollInfo(ctxA, table.data(), &algorithm, &protocol, &nChannels), ncclSuccess);
    ASSERT_EQ(d.getCollInfo(ctxB, table.data(), &algorithm, &protocol, &nChannels), ncclSuccess);
  }
  ASSERT_EQ(d.finalize(ctxA), ncclSuccess);
  ASSERT_EQ(d.finalize(ctxB), ncclSuccess);

  std::vector<LoggedLine> topology;
  for (const LoggedLine& line : mockLines()) {
    if (line.text.find(kTopologyMarker) != std::string::npos) topology.push_back(line);
  }
  ASSERT_EQ(topology.size(), 2u);
  for (const LoggedLine& line : topology) {
    EXPECT_EQ(line.level, kLogInfo);
    EXPECT_NE(line.flags & kSubsysTuning, 0u);
    EXPECT_NE(line.flags & kSubsysInit, 0u);
    EXPECT_EQ(line.text.rfind(d.version >= 5 ? "Lamport: tuner: commId 0x" : "Lamport: tuner: communicator of tuner context ", 0), 0u) << line.text;
    EXPECT_NE(line.text.find("nRanks 2 nNodes 1"), std::string::npos) << line.text;
    EXPECT_NE(line.text.find("tuner ABI v" + std::to_string(d.version)), std::string::npos);
  }
  if (d.version >= 5) {
    EXPECT_NE(topology[0].text.find("commId 0x0000000000000abc nRanks 2 nNodes 1 nvlDomains 1 "
                                    "ranks/domain 2..2"),
              std::string::npos)
        << topology[0].text;
    EXPECT_NE(topology[1].text.find("commId 0x0000000000000def"), std::string::npos);
  }
  // Only the two topology lines and the one tuner-only notice: nothing per call at INFO.
  EXPECT_EQ(mockLines().size(), 3u);
}

TEST_P(TunerVersionTest, NullContextCallsAreNoOps) {
  TunerDriver d = makeDriver(GetParam());
  FakeCostTable table;
  const FakeCostTable before = table;
  int algorithm = 2, protocol = 1, nChannels = 0;
  EXPECT_EQ(d.getCollInfo(nullptr, table.data(), &algorithm, &protocol, &nChannels), ncclSuccess);
  EXPECT_TRUE(sameBits(table, before));
  EXPECT_EQ(algorithm, 2);
  EXPECT_EQ(protocol, 1);
  EXPECT_EQ(nChannels, 0);
  EXPECT_EQ(d.finalize(nullptr), ncclSuccess);
  EXPECT_TRUE(mockLines().empty());
}

TEST_P(TunerVersionTest, NothingLoggedBelowInfo) {
  LogSettings settings;
  settings.level = kLogWarn;
  setLogSettingsForTest(settings);
  TunerDriver d = makeDriver(GetParam());
  abi::NvlDomainInfoV5 nvl{1, 8, 8};
  abi::TunerConstantsV5 constants{};
  void* ctx = nullptr;
  ASSERT_EQ(d.init(&ctx, 7, 8, 1, mockNcclLogger, &nvl, &constants), ncclSuccess);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(d.finalize(ctx), ncclSuccess);
  EXPECT_TRUE(mockLines().empty());
}

TEST_P(TunerVersionTest, ConcurrentInitGetCollInfoFinalize) {
  TunerDriver d = makeDriver(GetParam());
  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 2000;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      abi::NvlDomainInfoV5 nvl{1, 4, 4};
      abi::TunerConstantsV5 constants{};
      void* ctx = nullptr;
      if (d.init(&ctx, 1000 + t, 4, 1, mockNcclLogger, &nvl, &constants) != ncclSuccess ||
          ctx == nullptr) {
        ++failures[t];
        return;
      }
      for (int i = 0; i < kCallsPerThread; ++i) {
        FakeCostTable table;
        const FakeCostTable before = table;
        int algorithm = -1, protocol = -1, nChannels = 0;
        if (d.getCollInfo(ctx, table.data(), &algorithm, &protocol, &nChannels) != ncclSuccess ||
            !sameBits(table, before) || nChannels != 0) {
          ++failures[t];
        }
      }
      if (d.finalize(ctx) != ncclSuccess) ++failures[t];
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(countLinesContaining(kTopologyMarker), static_cast<size_t>(kThreads));
  EXPECT_EQ(countLinesContaining(kTunerOnlyMarker), 1u);
}

// ---- tuner-only mode -------------------------------------------------------------------------

TEST_F(TunerTest, TunerOnlyNoticeAppearsExactlyOncePerProcess) {
  ASSERT_FALSE(interposerActive());
  for (int version : {6, 5, 4, 3, 2, 6}) {
    TunerDriver d = makeDriver(version);
    abi::NvlDomainInfoV5 nvl{1, 2, 2};
    abi::TunerConstantsV5 constants{};
    void* ctx = nullptr;
    ASSERT_EQ(d.init(&ctx, 42, 2, 1, mockNcclLogger, &nvl, &constants), ncclSuccess);
    ASSERT_EQ(d.finalize(ctx), ncclSuccess);
  }
  std::vector<LoggedLine> notices;
  for (const LoggedLine& line : mockLines()) {
    if (line.text.find(kTunerOnlyMarker) != std::string::npos) notices.push_back(line);
  }
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].level, kLogInfo);
  // The first init was v6 with the hooks wanted (the default) in a binary that has none: the
  // notice says why the path stays off.
  const std::string expected = "Lamport: " + tunerOnlyNotice(ownObjectPath()) + " (" +
                               tunerOnlyReason(6, true, true, "") + ")";
  EXPECT_EQ(notices[0].text, expected);
  EXPECT_NE(notices[0].text.find("entry hooks unavailable in this build"), std::string::npos);
  EXPECT_NE(notices[0].text.find("only as NCCL's tuner (NCCL_TUNER_PLUGIN); start it with "
                                 "LD_PRELOAD=/"),
            std::string::npos)
      << notices[0].text;
  EXPECT_NE(notices[0].text.find(" to run small allreduces on Lamport kernels"),
            std::string::npos);
}

TEST_F(TunerTest, NoTunerOnlyNoticeWhenTheInterposerRanFirst) {
  markInterposerActive();
  EXPECT_TRUE(interposerActive());
  markInterposerActive();  // idempotent
  for (int version : {2, 3, 4, 5, 6}) {
    TunerDriver d = makeDriver(version);
    abi::NvlDomainInfoV5 nvl{1, 2, 2};
    abi::TunerConstantsV5 constants{};
    void* ctx = nullptr;
    ASSERT_EQ(d.init(&ctx, 42, 2, 1, mockNcclLogger, &nvl, &constants), ncclSuccess);
    ASSERT_EQ(d.finalize(ctx), ncclSuccess);
  }
  EXPECT_EQ(countLinesContaining(kTunerOnlyMarker), 0u);
  EXPECT_EQ(countLinesContaining(kTopologyMarker), 5u);
}

TEST_F(TunerTest, TunerOnlyNoticeText) {
  EXPECT_EQ(tunerOnlyNotice("/opt/lib/libnccl-lamport.so"),
            "Lamport path is off: this process loaded libnccl-lamport.so only as NCCL's tuner "
            "(NCCL_TUNER_PLUGIN); start it with LD_PRELOAD=/opt/lib/libnccl-lamport.so to run "
            "small allreduces on Lamport kernels");
  // Unknown path: still a usable hint.
  EXPECT_NE(tunerOnlyNotice("").find("LD_PRELOAD=/"), std::string::npos);
}

TEST_F(TunerTest, OwnObjectPathIsAbsolute) {
  const std::string path = ownObjectPath();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path[0], '/');
}

// ---- v5/v6 specifics ---------------------------------------------------------------------------

TEST_F(TunerTest, V5AndV6AcceptANullNvlDomainInfoAndNullConstants) {
  for (int version : {5, 6}) {
    TunerDriver d = makeDriver(version);
    void* ctx = nullptr;
    ASSERT_EQ(d.init(&ctx, 99, 4, 2, mockNcclLogger, nullptr, nullptr), ncclSuccess);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(d.finalize(ctx), ncclSuccess);
  }
  EXPECT_EQ(countLinesContaining("nRanks 4 nNodes 2 nvlDomains ?"), 2u);
}

TEST_F(TunerTest, InitWithoutAContextPointerIsANoOp) {
  EXPECT_EQ(ncclTunerPlugin_v6.init(nullptr, 1, 2, 1, mockNcclLogger, nullptr, nullptr),
            ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v2.init(2, 1, mockNcclLogger, nullptr), ncclSuccess);
}

TEST_F(TunerTest, V3CostTableOfOtherShapesIsLeftAlone) {
  // NCCL passes its own numAlgo/numProto; odd shapes must neither crash nor be edited.
  void* ctx = nullptr;
  ASSERT_EQ(ncclTunerPlugin_v3.init(2, 1, mockNcclLogger, &ctx), ncclSuccess);
  float small[2][2] = {{1.0f, -1.0f}, {-1.0f, 2.0f}};
  float copy[2][2];
  std::memcpy(copy, small, sizeof(small));
  int nChannels = 0;
  EXPECT_EQ(ncclTunerPlugin_v3.getCollInfo(ctx, abi::kFuncAllGather, 8, 1,
                                           reinterpret_cast<float**>(&small[0][0]), 2, 2,
                                           &nChannels),
            ncclSuccess);
  EXPECT_EQ(std::memcmp(small, copy, sizeof(small)), 0);
  EXPECT_EQ(ncclTunerPlugin_v3.getCollInfo(ctx, abi::kFuncAllReduce, 8, 1, nullptr, 7, 3,
                                           &nChannels),
            ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v3.destroy(ctx), ncclSuccess);
}

TEST_F(TunerTest, ReinitAfterFinalizeOfEveryCommunicator) {
  // NCCL dlcloses the tuner when the last communicator dies and reloads it for the next one;
  // nothing may depend on state left from the earlier communicators.
  for (int round = 0; round < 3; ++round) {
    void* ctx = nullptr;
    abi::NvlDomainInfoV5 nvl{1, 2, 2};
    ASSERT_EQ(ncclTunerPlugin_v6.init(&ctx, round, 2, 1, mockNcclLogger, &nvl, nullptr),
              ncclSuccess);
    ASSERT_NE(ctx, nullptr);
    ASSERT_EQ(ncclTunerPlugin_v6.finalize(ctx), ncclSuccess);
    setNcclLogger(nullptr);
  }
  EXPECT_EQ(countLinesContaining(kTopologyMarker), 3u);
}

// ---- the cost hook ------------------------------------------------------------------------------

TEST_F(TunerTest, EditCollCostsChangesNothingInThisVersion) {
  TunerContext context;
  context.comm.nRanks = 2;
  for (size_t nBytes : {size_t{0}, size_t{8}, size_t{1} << 20, ~size_t{0}}) {
    FakeCostTable table;
    const FakeCostTable before = table;
    CostTable view(table.data(), kCostAlgorithms, kCostProtocols);
    editCollCosts(context, abi::kFuncAllReduce, nBytes, view);
    EXPECT_TRUE(sameBits(table, before));
  }
}

TEST_F(TunerTest, CostTableViewOnlyWritesCandidates) {
  FakeCostTable table;
  CostTable view(table.data(), kCostAlgorithms, kCostProtocols);
  EXPECT_TRUE(view.isCandidate(abi::kAlgoRing, abi::kProtoLL));
  EXPECT_FALSE(view.isCandidate(abi::kAlgoCollNetDirect, abi::kProtoSimple));
  EXPECT_TRUE(view.isCandidate(abi::kAlgoPat, abi::kProtoLL));  // 0 is a candidate
  EXPECT_FALSE(view.setCost(abi::kAlgoCollNetChain, abi::kProtoLL, 1.0f));
  EXPECT_EQ(table.entries[abi::kAlgoCollNetChain][abi::kProtoLL], -1.0f);
  EXPECT_FALSE(view.setCost(abi::kAlgoRing, abi::kProtoLL, -1.0f));
  EXPECT_FALSE(view.setCost(7, 0, 1.0f));
  EXPECT_FALSE(view.setCost(0, 3, 1.0f));
  EXPECT_FALSE(view.setCost(-1, 0, 1.0f));
  EXPECT_EQ(view.cost(7, 0), -1.0f);
  EXPECT_TRUE(view.setCost(abi::kAlgoRing, abi::kProtoLL, 1.5f));
  EXPECT_EQ(table.entries[abi::kAlgoRing][abi::kProtoLL], 1.5f);

  CostTable none(nullptr, 7, 3);
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(none.setCost(0, 0, 1.0f));
  CostTable negative(table.data(), -7, 3);
  EXPECT_TRUE(negative.empty());
}

}  // namespace
}  // namespace nccl_lamport
