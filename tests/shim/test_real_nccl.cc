// Which NCCL plugin/loader/real_nccl.cc picks, and realNcclHasProfilingApi(), in a process that does not
// link NCCL. The choice is made once per process, so each test runs alone in its own process
// (tests/shim/shim_tests.cmake registers one ctest per test with --gtest_filter); run together they
// skip themselves.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/log.h"
#include "plugin/loader/real_nccl.h"

namespace {

std::vector<std::string>& logLines() {
  static std::vector<std::string> lines;
  return lines;
}

void collect(const char* line) { logLines().push_back(line); }

// Skips unless this is the only test of the run; captures every log line from here on.
#define RUN_ALONE()                                                                             \
  do {                                                                                          \
    if (::testing::UnitTest::GetInstance()->test_to_run_count() != 1)                           \
      GTEST_SKIP() << "picks the NCCL of the whole process: run it alone (--gtest_filter)";    \
    nccl_lamport::setLogSettingsForTest({nccl_lamport::kLogInfo, nccl_lamport::kSubsysAll});   \
    nccl_lamport::setLogSinkForTest(&collect);                                                  \
  } while (0)

bool logged(const std::string& text) {
  for (const std::string& line : logLines()) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string allLines() {
  std::string all;
  for (const std::string& line : logLines()) all += line + "\n";
  return all;
}

std::string objectOf(void* fn) {
  Dl_info info{};
  return fn != nullptr && dladdr(fn, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "";
}

int versionThrough(void* fn) {
  int version = 0;
  EXPECT_EQ(reinterpret_cast<decltype(&ncclGetVersion)>(fn)(&version), ncclSuccess);
  return version;
}

bool libncclLoaded() {
  void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

// Nothing loaded, no NCCL_LAMPORT_NCCL_PATH: libnccl.so.2 through the loader's search path.
TEST(RealNccl, LoadsLibncclByNameWhenNoneIsLoaded) {
  RUN_ALONE();
  unsetenv("NCCL_LAMPORT_NCCL_PATH");
  ASSERT_FALSE(libncclLoaded());
  void* getVersion = nccl_lamport::resolveRealNccl("ncclGetVersion");
  ASSERT_NE(getVersion, nullptr) << allLines();
  EXPECT_TRUE(libncclLoaded());
  EXPECT_NE(objectOf(getVersion).find("libnccl.so"), std::string::npos) << objectOf(getVersion);
  EXPECT_GE(versionThrough(getVersion), 21602);
  EXPECT_TRUE(nccl_lamport::realNcclHasProfilingApi());
  EXPECT_EQ(nccl_lamport::resolveRealNccl("ncclNoSuchFunction"), nullptr);
  EXPECT_TRUE(logged("(loaded by name)")) << allLines();
}

// An NCCL in the global scope is used through its pnccl aliases.
TEST(RealNccl, UsesAnNcclInTheGlobalScope) {
  RUN_ALONE();
  ASSERT_NE(dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
  void* allReduce = nccl_lamport::resolveRealNccl("ncclAllReduce");
  EXPECT_EQ(allReduce, dlsym(RTLD_DEFAULT, "pncclAllReduce"));
  // An export without a pnccl alias (NCCL 2.28: ncclResetDebugInitInternal) by its plain name.
  if (void* plain = dlsym(RTLD_DEFAULT, "ncclResetDebugInitInternal")) {
    EXPECT_EQ(nccl_lamport::resolveRealNccl("ncclResetDebugInitInternal"), plain);
  }
  EXPECT_TRUE(nccl_lamport::realNcclHasProfilingApi());
  EXPECT_TRUE(logged("(in the global scope)")) << allLines();
}

// An NCCL loaded RTLD_LOCAL (as PyTorch does) is found by name, not loaded a second time.
TEST(RealNccl, FindsAnNcclLoadedLocally) {
  RUN_ALONE();
  setenv("NCCL_LAMPORT_NCCL_PATH", "/nonexistent/libnccl.so.2", 1);  // must not be needed
  void* local = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(local, nullptr) << dlerror();
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "pncclAllReduce"), nullptr);
  EXPECT_EQ(nccl_lamport::resolveRealNccl("ncclAllReduce"), dlsym(local, "pncclAllReduce"));
  EXPECT_TRUE(nccl_lamport::realNcclHasProfilingApi());
  EXPECT_TRUE(logged("(already loaded)")) << allLines();
  EXPECT_FALSE(logged("NCCL_LAMPORT_NCCL_PATH")) << allLines();
}

// An NCCL older than 2.16.2 (no pnccl aliases) is used by handle, plain names, and reported.
TEST(RealNccl, OldNcclWithoutProfilingApi) {
  RUN_ALONE();
  setenv("NCCL_LAMPORT_NCCL_PATH", FAKE_OLD_NCCL_PATH, 1);
  void* getVersion = nccl_lamport::resolveRealNccl("ncclGetVersion");
  ASSERT_NE(getVersion, nullptr) << allLines();
  EXPECT_EQ(versionThrough(getVersion), 21500);
  EXPECT_EQ(objectOf(nccl_lamport::resolveRealNccl("ncclAllReduce")), objectOf(getVersion));
  EXPECT_FALSE(nccl_lamport::realNcclHasProfilingApi());
  EXPECT_TRUE(logged("no profiling API")) << allLines();
  EXPECT_TRUE(logged("Lamport path is off")) << allLines();
  EXPECT_STREQ(nccl_lamport::ncclErrorText(ncclInternalError), "fake old NCCL");
  EXPECT_FALSE(libncclLoaded()) << "NCCL_LAMPORT_NCCL_PATH is the only candidate";
}

// A path that does not load means no NCCL: no fallback to another library by name.
TEST(RealNccl, ConfiguredPathIsTheOnlyCandidate) {
  RUN_ALONE();
  setenv("NCCL_LAMPORT_NCCL_PATH", "/nonexistent/libnccl.so.2", 1);
  EXPECT_EQ(nccl_lamport::resolveRealNccl("ncclGetVersion"), nullptr);
  EXPECT_FALSE(nccl_lamport::realNcclHasProfilingApi());
  EXPECT_FALSE(libncclLoaded());
  EXPECT_TRUE(logged("NCCL_LAMPORT_NCCL_PATH=/nonexistent/libnccl.so.2 does not load")) << allLines();
  EXPECT_TRUE(logged("no NCCL library found")) << allLines();
  EXPECT_STREQ(nccl_lamport::ncclErrorText(ncclInternalError), "unknown NCCL error");
}

// A FIFO named by NCCL_LAMPORT_NCCL_PATH is refused, not opened: dlopen would wait for a writer for
// ever (ctest's timeout fails the test if it does).
TEST(RealNccl, AConfiguredPathThatIsNoRegularFileIsNotOpened) {
  RUN_ALONE();
  char dir[] = "/tmp/lamport-real-nccl-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/libnccl.so.2";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  setenv("NCCL_LAMPORT_NCCL_PATH", fifo.c_str(), 1);
  EXPECT_EQ(nccl_lamport::resolveRealNccl("ncclGetVersion"), nullptr);
  EXPECT_TRUE(logged("NCCL_LAMPORT_NCCL_PATH=" + fifo + " is not a regular file")) << allLines();
  EXPECT_FALSE(libncclLoaded());
  unlink(fifo.c_str());
  rmdir(dir);
}

// Another copy of nccl-lamport named by NCCL_LAMPORT_NCCL_PATH is no NCCL (it exports no
// pncclAllReduce, so it used to be taken for an NCCL older than 2.16.2).
TEST(RealNccl, RejectsAnotherCopyByConfiguredPath) {
  RUN_ALONE();
  setenv("NCCL_LAMPORT_NCCL_PATH", LAMPORT_COPY_PATH, 1);
  EXPECT_EQ(nccl_lamport::resolveRealNccl("ncclGetVersion"), nullptr);
  EXPECT_FALSE(nccl_lamport::realNcclHasProfilingApi());
  EXPECT_TRUE(logged("another copy of nccl-lamport")) << allLines();
  EXPECT_FALSE(logged("no profiling API")) << allLines();
}

// A library that is no NCCL at all (no ncclGetVersion; this one has a stray profiling alias) named
// by NCCL_LAMPORT_NCCL_PATH: no NCCL, said as such; neither "NCCL 0.0.0 ... passes through to
// NCCL" nor a call forwarded into it.
TEST(RealNccl, RejectsALibraryThatIsNoNccl) {
  RUN_ALONE();
  setenv("NCCL_LAMPORT_NCCL_PATH", FAKE_PARTIAL_NCCL_PATH, 1);
  EXPECT_EQ(nccl_lamport::resolveRealNccl("ncclGetErrorString"), nullptr);
  EXPECT_FALSE(nccl_lamport::realNcclHasProfilingApi());
  EXPECT_TRUE(logged("is no NCCL library")) << allLines();
  EXPECT_TRUE(logged("no NCCL library found")) << allLines();
  EXPECT_FALSE(logged("no profiling API")) << allLines();
}

// The same copy found by name (LD_LIBRARY_PATH puts its directory first).
TEST(RealNccl, RejectsAnotherCopyByName) {
  RUN_ALONE();
  unsetenv("NCCL_LAMPORT_NCCL_PATH");
  EXPECT_EQ(nccl_lamport::resolveRealNccl("ncclGetVersion"), nullptr);
  EXPECT_FALSE(nccl_lamport::realNcclHasProfilingApi());
  EXPECT_TRUE(logged("another copy of nccl-lamport")) << allLines();
}

// In the global scope every function comes from the library holding pncclAllReduce, even where an
// earlier library in that scope defines one of the other aliases.
TEST(RealNccl, GlobalScopeResolvesFromOneLibrary) {
  RUN_ALONE();
  ASSERT_NE(dlopen(FAKE_PARTIAL_NCCL_PATH, RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
  ASSERT_NE(dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
  void* allReduce = nccl_lamport::resolveRealNccl("ncclAllReduce");
  void* errorString = nccl_lamport::resolveRealNccl("ncclGetErrorString");
  ASSERT_NE(allReduce, nullptr) << allLines();
  ASSERT_NE(errorString, nullptr) << allLines();
  EXPECT_EQ(objectOf(errorString), objectOf(allReduce));
  EXPECT_STRNE(nccl_lamport::ncclErrorText(ncclInternalError), "partial fake NCCL");
  EXPECT_TRUE(logged("(in the global scope)")) << allLines();
}

}  // namespace
