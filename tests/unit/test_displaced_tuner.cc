// The tuner ours displaces keeps answering behind ours (tuner/displaced_tuner.h): a fake net
// plugin's tuner (already loaded, as NCCL loads its net plugin before the tuner) or nccl.conf's,
// driven through our exported ncclTunerPlugin_v6 / _v7. One process per case (the search is once
// per process): ctest sets NCCL_NET_PLUGIN or NCCL_CONF_FILE and the filter.
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "tuner/abi/tuner_abi.h"
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
  void* fake = dlopen(FAKE_DISPLACED_TUNER, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr) << "nccl.conf's tuner was not loaded";
  EXPECT_EQ(displacedCalls(fake)[1], 1);
}

TEST(DisplacedTuner, WithoutOneOurCostsAreNcclsAlone) {
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 5.0f);
}

TEST(DisplacedTuner, ConfParsing) {
  EXPECT_EQ(tunerPluginFromConf(""), "");
  EXPECT_EQ(tunerPluginFromConf("NCCL_DEBUG=INFO\n"), "");
  EXPECT_EQ(tunerPluginFromConf("# NCCL_TUNER_PLUGIN=no\n NCCL_TUNER_PLUGIN = ofi \nX=1\n"), "ofi");
  EXPECT_EQ(tunerPluginFromConf("NCCL_TUNER_PLUGIN=a\nNCCL_TUNER_PLUGIN=/opt/b.so\n"), "/opt/b.so");
}

}  // namespace
}  // namespace nccl_lamport
