// The tuner ours displaces keeps answering behind ours (tuner/displaced_tuner.h): a fake net
// plugin's tuner (already loaded, as NCCL loads its net plugin before the tuner) or nccl.conf's,
// driven through our exported ncclTunerPlugin_v6 / _v7. One process per case (the search is once
// per process): ctest sets NCCL_NET_PLUGIN or NCCL_CONF_FILE and the filter, and runs the same
// cases against fakes that export only tuner ABI v4, v3 or v2 (tuner/chained_tuner.h adapts).
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "tuner/abi/tuner_abi.h"
#include "tuner/chained_tuner.h"
#include "tuner/displaced_tuner.h"

namespace nccl_lamport {
namespace {

int* displacedCalls(void* handle) { return static_cast<int*>(dlsym(handle, "fakeDisplacedCalls")); }

// Drives one communicator through our v6 (or v7) struct and returns the cost NCCL would see for
// ring/simple ([1][2]).
template <typename Table, typename Constants>
float driveOnce(const Table& t) {
  abi::NvlDomainInfoV5 nvl{1, 2, 2};
  Constants constants{};
  void* ctx = nullptr;
  EXPECT_EQ(t.init(&ctx, 0x77, 2, 1, nullptr, &nvl, &constants), ncclSuccess);
  EXPECT_NE(ctx, nullptr);
  float table[abi::kCostAlgorithms][abi::kCostProtocols];
  for (auto& row : table) {
    for (float& c : row) c = 5.0f;
  }
  int nChannels = 0;
  EXPECT_EQ(t.getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, reinterpret_cast<float**>(table), abi::kCostAlgorithms,
                          abi::kCostProtocols, 0, &nChannels),
            ncclSuccess);
  EXPECT_EQ(t.finalize(ctx), ncclSuccess);
  return table[1][2];
}

TEST(DisplacedTuner, TheNetPluginsTunerKeepsAnswering) {
  const char* net = getenv("NCCL_NET_PLUGIN");
  ASSERT_NE(net, nullptr) << "ctest sets NCCL_NET_PLUGIN to the fake";
  void* plugin = dlopen(net, RTLD_NOW | RTLD_LOCAL);  // NCCL loads its net plugin first
  ASSERT_NE(plugin, nullptr) << dlerror();
  int* calls = displacedCalls(plugin);
  ASSERT_NE(calls, nullptr);
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 0.0f);
  EXPECT_EQ(calls[0], 1);
  EXPECT_EQ(calls[1], 1);
  EXPECT_EQ(calls[2], 1);
  EXPECT_EQ((driveOnce<abi::TunerV7, abi::TunerConstantsV7>(ncclTunerPlugin_v7)), 0.0f);
  EXPECT_EQ(calls[0], 2);
}

TEST(DisplacedTuner, ANetPluginNotLoadedIsNotLoadedByUs) {
  // NCCL_NET_PLUGIN names the fake but nothing loaded it: no chaining, costs untouched.
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 5.0f);
  EXPECT_EQ(dlopen(getenv("NCCL_NET_PLUGIN"), RTLD_NOW | RTLD_NOLOAD), nullptr);
}

TEST(DisplacedTuner, NcclConfsTunerKeepsAnswering) {
  ASSERT_NE(getenv("NCCL_CONF_FILE"), nullptr);
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 0.0f);
  // ctest names the fake of another ABI version in FAKE_DISPLACED_TUNER when it uses one.
  const char* path = getenv("FAKE_DISPLACED_TUNER") != nullptr ? getenv("FAKE_DISPLACED_TUNER") : FAKE_DISPLACED_TUNER;
  void* fake = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr) << "nccl.conf's tuner was not loaded";
  EXPECT_EQ(displacedCalls(fake)[1], 1);
}

TEST(DisplacedTuner, WithoutOneOurCostsAreNcclsAlone) {
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 5.0f);
}

// A v2 tuner answers with one algorithm/protocol choice, mapped onto NCCL's cost table as its
// cheapest entry and nothing else (tuner/chained_tuner.h). Driven directly, without a library.
struct V2Answer {
  int algorithm = -1;
  int protocol = -1;
  ncclResult_t result = ncclSuccess;
  int sawCollNet = -1;
  int sawNvls = -1;
  int sawAlgorithm = 0;
  int sawProtocol = 0;
};
V2Answer gV2;

ncclResult_t v2GetCollInfo(void* /*context*/, abi::TunerFunc /*coll*/, size_t /*nBytes*/, int collNetSupport,
                           int nvlsSupport, int /*numPipeOps*/, int* algorithm, int* protocol, int* /*nChannels*/) {
  gV2.sawCollNet = collNetSupport;
  gV2.sawNvls = nvlsSupport;
  gV2.sawAlgorithm = *algorithm;
  gV2.sawProtocol = *protocol;
  *algorithm = gV2.algorithm;
  *protocol = gV2.protocol;
  return gV2.result;
}
ncclResult_t v2Init(size_t, size_t, abi::TunerLogger, void**) { return ncclSuccess; }
ncclResult_t v2Destroy(void*) { return ncclSuccess; }
const abi::TunerV2 kV2{"v2", v2Init, v2GetCollInfo, v2Destroy};

using Costs = float[abi::kCostAlgorithms][abi::kCostProtocols];

void fill(Costs& table, float value) {
  for (auto& row : table) {
    for (float& c : row) c = value;
  }
}

// Runs one v2 query; returns how many entries differ from `before` besides [algo][proto].
int v2Query(Costs& table, int algo, int proto) {
  Costs before;
  std::memcpy(before, table, sizeof(before));
  ChainedTuner chained;
  chained.abiVersion = 2;
  chained.table = &kV2;
  int nChannels = 0;
  chainedGetCollInfo(chained, abi::kFuncAllReduce, 4096, 1, &table[0][0], abi::kCostAlgorithms, abi::kCostProtocols,
                     0, &nChannels);
  int others = 0;
  for (int a = 0; a < abi::kCostAlgorithms; ++a) {
    for (int p = 0; p < abi::kCostProtocols; ++p) {
      if ((a != algo || p != proto) && table[a][p] != before[a][p]) ++others;
    }
  }
  return others;
}

TEST(DisplacedTuner, AV2ChoiceBecomesTheCheapestEntryAndNothingElse) {
  Costs table;
  fill(table, 5.0f);
  table[abi::kAlgoNvls][abi::kProtoSimple] = abi::kCostIgnored;
  table[abi::kAlgoNvlsTree][abi::kProtoSimple] = abi::kCostIgnored;
  gV2 = V2Answer{abi::kAlgoTree, abi::kProtoLL128};
  EXPECT_EQ(v2Query(table, abi::kAlgoTree, abi::kProtoLL128), 0);
  EXPECT_EQ(table[abi::kAlgoTree][abi::kProtoLL128], 0.0f);
  // It was asked as NCCL's own v2 adapter asks: choice undefined, support read from the table.
  EXPECT_EQ(gV2.sawAlgorithm, -1);
  EXPECT_EQ(gV2.sawProtocol, -1);
  EXPECT_EQ(gV2.sawNvls, 0);
  EXPECT_EQ(gV2.sawCollNet, 1);

  // An entry NCCL does not offer stays -1; a half choice, an out-of-range one, no choice and a
  // failed call change nothing.
  fill(table, 5.0f);
  table[abi::kAlgoRing][abi::kProtoLL] = abi::kCostIgnored;
  for (const V2Answer& answer : {V2Answer{abi::kAlgoRing, abi::kProtoLL}, V2Answer{abi::kAlgoRing, -1},
                                 V2Answer{abi::kCostAlgorithms, abi::kProtoSimple}, V2Answer{},
                                 V2Answer{abi::kAlgoTree, abi::kProtoSimple, ncclInternalError}}) {
    gV2 = answer;
    EXPECT_EQ(v2Query(table, -1, -1), 0) << answer.algorithm << "/" << answer.protocol;
  }
  EXPECT_EQ(table[abi::kAlgoRing][abi::kProtoLL], abi::kCostIgnored);
  EXPECT_EQ(gV2.sawNvls, 1);
}

TEST(DisplacedTuner, ConfParsing) {
  EXPECT_EQ(tunerPluginFromConf(""), "");
  EXPECT_EQ(tunerPluginFromConf("NCCL_DEBUG=INFO\n"), "");
  EXPECT_EQ(tunerPluginFromConf("# NCCL_TUNER_PLUGIN=no\n NCCL_TUNER_PLUGIN = ofi \nX=1\n"), "ofi");
  EXPECT_EQ(tunerPluginFromConf("NCCL_TUNER_PLUGIN=a\nNCCL_TUNER_PLUGIN=/opt/b.so\n"), "/opt/b.so");
}

}  // namespace
}  // namespace nccl_lamport
