// The tuner ours displaces keeps answering behind ours (tuner/displaced_tuner.h): a fake net
// plugin's tuner (already loaded, as NCCL loads its net plugin before the tuner) or nccl.conf's,
// driven through our exported ncclTunerPlugin_v6 / _v7, and through _v4, _v3 and _v2 as NCCL
// 2.21 - 2.27 call them. One process per case (the search is once per process and version):
// ctest sets NCCL_NET_PLUGIN or NCCL_CONF_FILE and the filter, and runs the same cases against
// fakes that export only tuner ABI v4, v3 or v2 (tuner/chained_tuner.h adapts).
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tuner/abi/tuner_abi.h"
#include "tuner/chained_tuner.h"
#include "tuner/displaced_tuner.h"
#include "tuner/load_mode.h"
#include "tuner/tuner_impl.h"
#include "tuner/tuner_loader_rules.h"

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
  // NCCL keeps the value as a C string: a NUL byte ends it (before, "" + "junk" was dlopen'ed as
  // one name, which is not what NCCL loads).
  const std::string withNul("NCCL_TUNER_PLUGIN=ofi\0junk\n", 27);
  EXPECT_TRUE(tunerPluginInConf(withNul, &value));
  EXPECT_EQ(value, "ofi");
}

// The names NCCL tries for a value (src/plugin/plugin_open.cc): the prefixed form is skipped only
// for a path or a name that both starts with "lib" and ends with ".so".
// A FIFO named by NCCL_TUNER_PLUGIN in nccl.conf is not opened: dlopen would wait for a writer for
// ever, inside NCCL's communicator init (found by a break-test). The conf is written here.
TEST(DisplacedTuner, AFifoNamedInNcclConfIsNotOpened) {
  char dir[] = "/tmp/lamport-displaced-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/libnccl-tuner-fifo.so";
  const std::string conf = std::string(dir) + "/nccl.conf";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  FILE* f = fopen(conf.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "NCCL_TUNER_PLUGIN=%s\n", fifo.c_str());
  fclose(f);
  setenv("NCCL_CONF_FILE", conf.c_str(), 1);
  auto done = std::async(std::launch::async, [] { return driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6); });
  const bool returned = done.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(returned) << "our tuner's init waited on a FIFO named in nccl.conf";
  if (returned) EXPECT_EQ(done.get(), 5.0f) << "nothing was chained";
  unlink(fifo.c_str());
  unlink(conf.c_str());
  rmdir(dir);
  if (!returned) std::_Exit(1);  // the init thread is stuck in dlopen: do not wait for it at exit
}

// A displaced tuner that chains to a tuner of its own, which is ours again (FAKE_CHAIN_TO names
// libnccl-lamport.so), called our init from inside its own for ever: a stack overflow. Ours now
// chains nothing from inside a chained init.
TEST(DisplacedTuner, ATunerThatChainsBackToOursEndsTheLoop) {
  ASSERT_NE(getenv("FAKE_CHAIN_TO"), nullptr);
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 0.0f) << "the fake still answers";
  void* fake = dlopen(FAKE_DISPLACED_TUNER, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr);
  EXPECT_GE(displacedCalls(fake)[0], 1);
  EXPECT_LE(displacedCalls(fake)[0], 2) << "the fake's init ran more than once per copy of ours";
}

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

// ---- NCCL 2.21 - 2.27: NCCL calls ours through tuner ABI v2, v3 or v4 ----------------------

// Drives one communicator of an NCCL speaking tuner ABI `version` (2..4) through our struct of
// that version, as that NCCL calls it (v2: collNet supported, NVLS not). True when the fake
// displaced tuner's choice, ring/simple, is what NCCL ends up with; otherwise NCCL's own answer
// must be untouched. Nothing else may change: no other cost, not nChannels.
bool olderNcclEndsWithRingSimple(int version) {
  void* ctx = nullptr;
  int nChannels = 0;
  bool ringSimple = false;
  if (version == 2) {
    const abi::TunerV2& t = ncclTunerPlugin_v2;
    EXPECT_EQ(t.init(2, 1, nullptr, &ctx), ncclSuccess);
    int algorithm = -1;
    int protocol = -1;
    EXPECT_EQ(t.getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, 0, 1, &algorithm, &protocol, &nChannels), ncclSuccess);
    ringSimple = algorithm == abi::kAlgoRing && protocol == abi::kProtoSimple;
    if (!ringSimple) EXPECT_TRUE(algorithm == -1 && protocol == -1) << algorithm << "/" << protocol;
    EXPECT_EQ(t.destroy(ctx), ncclSuccess);
  } else {
    Costs table;
    fill(table, 5.0f);
    auto** asNccl = reinterpret_cast<float**>(table);
    if (version == 3) {
      const abi::TunerV3& t = ncclTunerPlugin_v3;
      EXPECT_EQ(t.init(2, 1, nullptr, &ctx), ncclSuccess);
      EXPECT_EQ(t.getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, asNccl, abi::kCostAlgorithms, abi::kCostProtocols,
                              &nChannels),
                ncclSuccess);
      EXPECT_EQ(t.destroy(ctx), ncclSuccess);
    } else {
      const abi::TunerV4& t = ncclTunerPlugin_v4;
      EXPECT_EQ(t.init(2, 1, nullptr, &ctx), ncclSuccess);
      EXPECT_EQ(t.getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, asNccl, abi::kCostAlgorithms, abi::kCostProtocols, 0,
                              &nChannels),
                ncclSuccess);
      EXPECT_EQ(t.destroy(ctx), ncclSuccess);
    }
    ringSimple = table[abi::kAlgoRing][abi::kProtoSimple] == 0.0f;
    table[abi::kAlgoRing][abi::kProtoSimple] = 5.0f;
    Costs untouched;
    fill(untouched, 5.0f);
    EXPECT_EQ(std::memcmp(table, untouched, sizeof(table)), 0) << "a cost besides ring/simple changed";
  }
  EXPECT_EQ(nChannels, 0);
  return ringSimple;
}

// The struct versions the fake exports (ctest's FAKE_EXPORTS: 2, 3, 4, or 7 for the fake with
// v5..v7).
int fakeExports() {
  const char* exported = getenv("FAKE_EXPORTS");
  return exported != nullptr ? atoi(exported) : 0;
}

// Drives ours through tuner ABI v2, v3 and v4, in `order`; expects the fake at fakePath chained
// exactly by the NCCL versions `chains` names, and then asked once per query, with every init
// matched by a destroy.
void expectChainedBy(std::initializer_list<int> order, bool (*chains)(int version), const char* fakePath) {
  for (const int version : order) {
    const bool chained = chains(version);
    void* fake = dlopen(fakePath, RTLD_NOW | RTLD_NOLOAD);
    const int before = fake != nullptr ? displacedCalls(fake)[1] : 0;
    EXPECT_EQ(olderNcclEndsWithRingSimple(version), chained) << "NCCL speaking tuner ABI v" << version;
    fake = fake != nullptr ? fake : dlopen(fakePath, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_TRUE(fake != nullptr || !chained) << "v" << version << ": the fake was not loaded";
    if (fake == nullptr) continue;
    const int* calls = displacedCalls(fake);
    EXPECT_EQ(calls[1] - before, chained ? 1 : 0) << "v" << version << ": its getCollInfo";
    EXPECT_EQ(calls[0], calls[2]) << "v" << version << ": every init has its destroy";
  }
}

// The net plugin's tuner (loaded by NCCL before its tuner) behind an NCCL 2.21 - 2.27: chained
// when it exports NCCL's struct version or an older one, never a newer one only. The fake with
// v5..v7 alone is found all the same: a v6 NCCL chains it.
TEST(DisplacedTuner, OlderNcclsChainTheNetPluginsTuner) {
  const char* net = getenv("NCCL_NET_PLUGIN");
  ASSERT_NE(net, nullptr) << "ctest sets NCCL_NET_PLUGIN to the fake";
  ASSERT_GE(fakeExports(), 2);
  void* plugin = dlopen(net, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(plugin, nullptr) << dlerror();
  expectChainedBy({4, 3, 2}, [](int version) { return fakeExports() <= version; }, net);
  EXPECT_EQ(displacedCalls(plugin)[0], fakeExports() <= 4 ? 5 - fakeExports() : 0);
  if (fakeExports() == 2) {
    // NCCL 2.21's own support flags reached it, not ones read from a cost table.
    const int* support = static_cast<int*>(dlsym(plugin, "fakeDisplacedSupport"));
    ASSERT_NE(support, nullptr);
    EXPECT_EQ(support[0], 1);
    EXPECT_EQ(support[1], 0);
  }
  if (fakeExports() > 4) EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 0.0f);
}

// nccl.conf's tuner (NCCL_CONF_FILE) behind an NCCL 2.21 - 2.27: NCCL 2.21 reads no
// NCCL_CONF_FILE (so it is not what 2.21 would load); v3 and v4 chain it by the same struct
// version rule. A library that opens without a struct NCCL accepts ends the search.
TEST(DisplacedTuner, OlderNcclsChainNcclConfsTuner) {
  ASSERT_NE(getenv("NCCL_CONF_FILE"), nullptr);
  const char* fake = getenv("FAKE_DISPLACED_TUNER");
  ASSERT_NE(fake, nullptr);
  ASSERT_GE(fakeExports(), 2);
  expectChainedBy({4, 3, 2}, [](int version) { return version >= 3 && fakeExports() <= version; }, fake);
}

// libnccl-tuner.so (found by the library search path) behind every NCCL 2.21 - 2.27.
TEST(DisplacedTuner, TheDefaultTunerLibraryKeepsAnsweringOlderNccls) {
  expectChainedBy({4, 3, 2}, [](int) { return true; }, "libnccl-tuner.so");
}

// Before NCCL 2.28, NCCL_TUNER_PLUGIN=none in nccl.conf is only a library name that does not
// open: NCCL 2.21 - 2.27 go on to the net plugin's tuner, which keeps answering; 2.28 on load
// none.
TEST(DisplacedTuner, NoneInNcclConfIsANameToOlderNccls) {
  const char* net = getenv("NCCL_NET_PLUGIN");
  void* plugin = dlopen(net, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(plugin, nullptr) << dlerror();
  expectChainedBy({2, 3, 4}, [](int) { return true; }, net);
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 5.0f);
  EXPECT_EQ(displacedCalls(plugin)[0], 3);
}

// The tuner loader of NCCL 2.21 - 2.25 opens the net plugin's library itself (2.21 - 2.23: v2 and
// v3); the v4 rules (2.26 - 2.27) take only the library NCCL's net loader holds, and we never
// load one for them.
TEST(DisplacedTuner, OlderNcclsOpenTheNetPluginThemselves) {
  const char* net = getenv("NCCL_NET_PLUGIN");
  ASSERT_NE(net, nullptr);
  ASSERT_EQ(dlopen(net, RTLD_NOW | RTLD_NOLOAD), nullptr);
  EXPECT_FALSE(olderNcclEndsWithRingSimple(4));
  EXPECT_EQ(dlopen(net, RTLD_NOW | RTLD_NOLOAD), nullptr) << "loaded for NCCL 2.26 - 2.27";
  expectChainedBy({3, 2}, [](int) { return true; }, net);
}

// nccl.conf names another copy of nccl-lamport: behind an NCCL 2.21 - 2.27 it is skipped too,
// and what it displaced (the net plugin's tuner) answers.
TEST(DisplacedTuner, AnotherCopyOfOursIsNeverChainedByOlderNccls) {
  ASSERT_NE(getenv("NCCL_CONF_FILE"), nullptr);
  const char* net = getenv("NCCL_NET_PLUGIN");
  void* plugin = dlopen(net, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(plugin, nullptr) << dlerror();
  Dl_info fake{};
  ASSERT_NE(dladdr(displacedCalls(plugin), &fake), 0);
  for (const int version : {2, 3, 4}) {
    const DisplacedTuner found = displacedTuner(version, ownObjectPath());
    Dl_info where{};
    ASSERT_NE(dladdr(found.table, &where), 0) << "v" << version << ": nothing chained";
    EXPECT_EQ(where.dli_fbase, fake.dli_fbase) << "v" << version << ": " << where.dli_fname;
  }
  expectChainedBy({2, 3, 4}, [](int) { return true; }, net);
}

// NCCL_NET_PLUGIN as a comma-separated list (NCCL 2.27 on: src/plugin/net.cc loads the
// libraries in order until one is assigned, and the tuner loader takes the net library it holds):
// the list's plugin that NCCL loaded (its first here, a v4 fake) keeps answering behind NCCL
// 2.27 (tuner ABI v4) and 2.28 on. NCCL 2.21 - 2.23 open the whole value as one name: none.
TEST(DisplacedTuner, ANetPluginListKeepsItsTunerAnswering) {
  const char* list = getenv("NCCL_NET_PLUGIN");
  ASSERT_NE(list, nullptr);
  const std::string first = std::string(list).substr(0, std::string(list).find(','));
  ASSERT_NE(first, list) << "ctest sets a list";
  void* plugin = dlopen(first.c_str(), RTLD_NOW | RTLD_LOCAL);  // as NCCL's net loader does
  ASSERT_NE(plugin, nullptr) << dlerror();
  expectChainedBy({4, 3, 2}, [](int version) { return version == 4; }, first.c_str());
  EXPECT_EQ((driveOnce<abi::TunerV6, abi::TunerConstantsV6>(ncclTunerPlugin_v6)), 0.0f);
}

// The rules each NCCL's tuner loader follows (tuner/tuner_loader_rules.h), and the names and
// nccl.conf lines as NCCL before 2.27.5 / 2.30 take them.
TEST(DisplacedTuner, OlderNcclsLoaderRules) {
  using Versions = std::vector<int>;
  EXPECT_EQ(tunerLoaderRules(2).structVersions, (Versions{2}));
  EXPECT_EQ(tunerLoaderRules(3).structVersions, (Versions{3, 2}));
  EXPECT_EQ(tunerLoaderRules(4).structVersions, (Versions{4, 3, 2}));
  EXPECT_EQ(tunerLoaderRules(6).structVersions, (Versions{6, 4, 3, 2}));
  EXPECT_TRUE(tunerLoaderRules(1).structVersions.empty());
  EXPECT_FALSE(tunerLoaderRules(2).confFileVariable);
  EXPECT_TRUE(tunerLoaderRules(3).confFileVariable);
  for (const int version : {2, 3, 4}) {
    const TunerLoaderRules rules = tunerLoaderRules(version);
    EXPECT_TRUE(rules.homeFromPasswd);
    EXPECT_FALSE(rules.stripsCarriageReturn);
    EXPECT_FALSE(rules.noneTurnsPluginsOff);
    EXPECT_TRUE(rules.prefixedNameAlways);
    EXPECT_EQ(rules.opensNetPluginItself, version < 4);
    EXPECT_EQ(rules.lazyBinding, version < 4);
  }
  const TunerLoaderRules newer = tunerLoaderRules(7);
  EXPECT_TRUE(newer.noneTurnsPluginsOff && newer.stripsCarriageReturn && !newer.homeFromPasswd);
  using Names = std::vector<std::string>;
  EXPECT_EQ(pluginLibraryNames("libofi.so", "nccl-tuner", true), (Names{"libofi.so", "libnccl-tuner-libofi.so.so"}));
  EXPECT_EQ(pluginLibraryNames("/opt/t.so", "nccl-net", true), (Names{"/opt/t.so", "libnccl-net-/opt/t.so.so"}));
  std::string value;
  EXPECT_TRUE(tunerPluginInConf("NCCL_TUNER_PLUGIN=ofi\r\n", &value, false));
  EXPECT_EQ(value, "ofi\r");
}

}  // namespace
}  // namespace nccl_lamport
