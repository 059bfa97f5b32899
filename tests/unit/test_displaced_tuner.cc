// The tuner ours displaces keeps answering behind ours (tuner/displaced_tuner.h): a fake net
// plugin's tuner (already loaded, as NCCL loads its net plugin before the tuner) or nccl.conf's,
// driven through our exported ncclTunerPlugin_v6 / _v7. One process per case (the search is once
// per process): ctest sets NCCL_NET_PLUGIN or NCCL_CONF_FILE and the filter, and runs the same
// cases against fakes that export only tuner ABI v4, v3 or v2 (tuner/chained_tuner.h adapts).
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tuner/abi/tuner_abi.h"
#include "tuner/chained_tuner.h"
#include "tuner/displaced_tuner.h"
#include "tuner/tuner_impl.h"

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

// nccl.conf read as NCCL reads it (src/misc/param.cc): setenv without overwrite, so the first
// assignment wins; the variable is exactly what precedes '=' (no trimming); '#' only in column 0.
TEST(DisplacedTuner, ConfParsing) {
  std::string value = "untouched";
  EXPECT_FALSE(tunerPluginInConf("", &value));
  EXPECT_FALSE(tunerPluginInConf("NCCL_DEBUG=INFO\n", &value));
  EXPECT_EQ(value, "untouched");
  EXPECT_TRUE(tunerPluginInConf("# NCCL_TUNER_PLUGIN=no\nNCCL_TUNER_PLUGIN=ofi\r\nX=1\n", &value));
  EXPECT_EQ(value, "ofi");
  EXPECT_TRUE(tunerPluginInConf("NCCL_TUNER_PLUGIN=a\nNCCL_TUNER_PLUGIN=/opt/b.so\n", &value));
  EXPECT_EQ(value, "a");
  // " NCCL_TUNER_PLUGIN " and "NCCL_TUNER_PLUGIN " are other variables to NCCL, not this one.
  EXPECT_FALSE(tunerPluginInConf(" NCCL_TUNER_PLUGIN = ofi \nNCCL_TUNER_PLUGIN =x\n", &value));
  // Set but empty is set (NCCL then loads libnccl-tuner.so, and a later file cannot override it).
  EXPECT_TRUE(tunerPluginInConf("NCCL_TUNER_PLUGIN=\nNCCL_TUNER_PLUGIN=b\n", &value));
  EXPECT_EQ(value, "");
}

// The names NCCL tries for a value (src/plugin/plugin_open.cc): the prefixed form is skipped only
// for a path or a name that both starts with "lib" and ends with ".so".
TEST(DisplacedTuner, PluginNames) {
  using Names = std::vector<std::string>;
  EXPECT_EQ(pluginLibraryNames("ofi", "nccl-tuner"), (Names{"ofi", "libnccl-tuner-ofi.so"}));
  EXPECT_EQ(pluginLibraryNames("libofi.so", "nccl-tuner"), (Names{"libofi.so"}));
  EXPECT_EQ(pluginLibraryNames("/opt/t.so", "nccl-tuner"), (Names{"/opt/t.so"}));
  EXPECT_EQ(pluginLibraryNames("libofi", "nccl-tuner"), (Names{"libofi", "libnccl-tuner-libofi.so"}));
}

// NCCL_TUNER_PLUGIN=none (in any case) in the nccl.conf NCCL reads turns every tuner off, the
// net plugin's included (src/plugin/tuner.cc): nothing may answer behind ours.
TEST(DisplacedTuner, NoneInNcclConfTurnsTheNetPluginsTunerOffToo) {
  void* plugin = dlopen(getenv("NCCL_NET_PLUGIN"), RTLD_NOW | RTLD_LOCAL);  // loaded, as by NCCL
  ASSERT_NE(plugin, nullptr) << dlerror();
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 5.0f);
  EXPECT_EQ(displacedCalls(plugin)[0], 0);
}

// A library nccl.conf names that opens but exports no tuner NCCL can use ends NCCL's search
// ("External tuner plugin ... is unsupported"): the net plugin's tuner is not loaded either.
TEST(DisplacedTuner, ANamedLibraryWithoutATunerEndsTheSearch) {
  void* plugin = dlopen(getenv("NCCL_NET_PLUGIN"), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(plugin, nullptr) << dlerror();
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 5.0f);
  EXPECT_EQ(displacedCalls(plugin)[0], 0);
}

// NCCL_CONF_FILE replaces ~/.nccl.conf (only /etc/nccl.conf is read besides it): a tuner named in
// ~/.nccl.conf is not what NCCL would load, so it is not chained.
TEST(DisplacedTuner, NcclConfFileReplacesTheHomeConf) {
  ASSERT_NE(getenv("NCCL_CONF_FILE"), nullptr);
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 5.0f);
  EXPECT_EQ(dlopen(FAKE_DISPLACED_TUNER, RTLD_NOW | RTLD_NOLOAD), nullptr);
}

// With no NCCL_TUNER_PLUGIN in any nccl.conf, NCCL loads libnccl-tuner.so (by the library search
// path) before the net plugin's tuner; naming ours displaces it, so it keeps answering.
TEST(DisplacedTuner, TheDefaultTunerLibraryKeepsAnswering) {
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 0.0f);
  void* fake = dlopen("libnccl-tuner.so", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr) << "libnccl-tuner.so was not loaded";
  EXPECT_EQ(displacedCalls(fake)[1], 1);
}

// nccl.conf names another copy of nccl-lamport (a site-wide install, while the environment names
// a newer build): chaining it would run our tuner init twice per communicator, the second one
// hooking the first copy's exported entry points. Another copy of ours is never a candidate.
TEST(DisplacedTuner, AnotherCopyOfOursIsNeverChained) {
  ASSERT_NE(getenv("NCCL_CONF_FILE"), nullptr);
  const DisplacedTuner found = displacedTuner(6, ownObjectPath());
  EXPECT_EQ(found.table, nullptr) << found.source;
  EXPECT_EQ(displacedTuner(7, ownObjectPath()).table, nullptr);
}

// A displaced tuner whose finalize throws: nothing may cross the C ABI (or end the process
// through our noexcept finalize); ours still frees its context.
ncclResult_t throwingFinalize(void*) { throw std::runtime_error("displaced finalize"); }
ncclResult_t v7GetCollInfo(void*, abi::TunerFunc, size_t, int, float**, int, int, int, int*) { return ncclSuccess; }
ncclResult_t v7Init(void**, uint64_t, size_t, size_t, abi::TunerLogger, abi::NvlDomainInfoV7*,
                    abi::TunerConstantsV7*) {
  return ncclSuccess;
}
const abi::TunerV7 kThrowingV7{"throws", v7Init, v7GetCollInfo, throwingFinalize, nullptr};

TEST(DisplacedTuner, AThrowingDisplacedFinalizeIsContained) {
  EXPECT_EXIT(
      {
        void* context = nullptr;
        tunerInit(TunerCommInfo{}, nullptr, &context);
        if (context == nullptr) _exit(2);
        auto* ctx = static_cast<TunerContext*>(context);
        ctx->chained.abiVersion = 7;
        ctx->chained.table = &kThrowingV7;
        _exit(ncclTunerPlugin_v7.finalize(context) == ncclSuccess ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace nccl_lamport
