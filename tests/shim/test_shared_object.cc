// Loads libnccl-lamport.so the way NCCL (2.26+: RTLD_NOW|RTLD_LOCAL) and vLLM's subprocess probe
// do, in a process with no NCCL loaded and without touching a GPU: the load must succeed, the
// tuner structs must be found, and an interposed or forwarded call with no NCCL present must
// fail cleanly.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

// "No NCCL": with nothing loaded the plugin would dlopen("libnccl.so.2") by name, and this
// machine may well have one on the loader's path. A set NCCL_LAMPORT_NCCL_PATH is the only
// library the plugin tries (README), so a missing file means no NCCL at all.
const int kNoNccl = setenv("NCCL_LAMPORT_NCCL_PATH", "/nonexistent/libnccl.so.2", 1);

struct TunerHeader {
  const char* name;
};

TEST(SharedObject, LoadsWithRtldNowLocalWithoutNcclOrGpu) {
  void* handle = dlopen(NCCL_LAMPORT_SO_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  for (const char* symbol : {"ncclTunerPlugin_v2", "ncclTunerPlugin_v3", "ncclTunerPlugin_v4",
                             "ncclTunerPlugin_v5", "ncclTunerPlugin_v6", "ncclTunerPlugin_v7"}) {
    auto* tuner = static_cast<const TunerHeader*>(dlsym(handle, symbol));
    ASSERT_NE(tuner, nullptr) << symbol;
    EXPECT_STREQ(tuner->name, "lamport") << symbol;
  }
  EXPECT_EQ(dlsym(handle, "pncclAllReduce"), nullptr) << "must never export NCCL's own aliases";
  EXPECT_EQ(dlclose(handle), 0);
}

TEST(SharedObject, InterposedCallWithoutNcclFailsCleanly) {
  void* handle = dlopen(NCCL_LAMPORT_SO_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  using GroupStartFn = ncclResult_t (*)();
  auto groupStart = reinterpret_cast<GroupStartFn>(dlsym(handle, "ncclGroupStart"));
  ASSERT_NE(groupStart, nullptr);
  // No libnccl in this process: the wrapper must report an error, not crash or recurse.
  EXPECT_EQ(groupStart(), ncclSystemError);
  using IsActiveFn = int (*)();
  auto isActive = reinterpret_cast<IsActiveFn>(dlsym(handle, "ncclLamportIsActive"));
  ASSERT_NE(isActive, nullptr);
  EXPECT_EQ(isActive(), 0) << "no NCCL behind it: the interposer only passes calls through";
  // A forwarded function (plugin/abi/nccl_api_forward.cc) fails with ncclSystemError (as the wrappers do) and a const
  // char* one answers with a fixed text.
  auto getVersion = reinterpret_cast<ncclResult_t (*)(int*)>(dlsym(handle, "ncclGetVersion"));
  ASSERT_NE(getVersion, nullptr);
  int version = 0;
  EXPECT_EQ(getVersion(&version), ncclSystemError);
  auto errorString = reinterpret_cast<const char* (*)(ncclResult_t)>(dlsym(handle, "ncclGetErrorString"));
  ASSERT_NE(errorString, nullptr);
  EXPECT_EQ(std::string(errorString(ncclSuccess)).rfind("nccl-lamport:", 0), 0u) << errorString(ncclSuccess);
  EXPECT_EQ(dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD), nullptr) << "the plugin loaded an NCCL after all";
  ASSERT_EQ(kNoNccl, 0);
  dlclose(handle);
}

TEST(SharedObject, ExportsMapListsEveryWrapperOfSpec42) {
  std::ifstream map(NCCL_LAMPORT_EXPORTS_MAP);
  ASSERT_TRUE(map.good());
  std::string text((std::istreambuf_iterator<char>(map)), std::istreambuf_iterator<char>());
  for (const char* name : {"ncclAllReduce", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitAll",
                           "ncclCommSplit", "ncclCommDestroy", "ncclCommAbort", "ncclCommFinalize",
                           "ncclCommGetAsyncError", "ncclGroupStart", "ncclGroupEnd"}) {
    EXPECT_NE(text.find(std::string(name) + ";"), std::string::npos) << name;
  }
}

}  // namespace
