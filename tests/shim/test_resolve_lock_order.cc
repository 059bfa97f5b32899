// The lazy resolution of the real NCCL (plugin/loader/real_nccl.cc, plugin/abi/nccl_api_forward.cc,
// plugin/abi/opaque_forward.cc) against the dynamic loader's lock: a thread's first call of a
// forwarder while another thread is inside dlopen, whose library constructor calls the same
// forwarder. Stock NCCL answers both (ncclGetVersion takes no lock). The resolution must not hold
// a lock of its own (a function-local static's guard) across dlsym/dladdr/dlopen, which take the
// loader's lock: the constructor, holding the loader's lock, would wait for that guard while its
// holder waits for the loader's lock, for ever.
//
// Each scenario runs in a child process (forked before any thread; the choice of NCCL is once
// per process), which the test kills and fails after kTimeout. The child's NCCL is
// tests/shim/fake_opaque_nccl.c (NCCL_LAMPORT_NCCL_PATH; its ncclGetVersion gives 22800).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/shim/child_deadline.h"

namespace {

constexpr auto kTimeout = std::chrono::seconds(10);

// The child: load our object, start a thread that dlopens the helper (its constructor waits 600
// ms under the loader's lock, then calls `entry`), make this thread's first call of `entry` at
// 200 ms, and exit 0 when both calls gave the stand-in's answer.
[[noreturn]] void childScenario(const char* entry) {
  setenv("NCCL_LAMPORT_NCCL_PATH", FAKE_NCCL_PATH, 1);
  void* ours = dlopen(LAMPORT_SO_PATH, RTLD_NOW | RTLD_LOCAL);
  if (ours == nullptr) _exit(10);
  setenv("LAMPORT_CTOR_SO", LAMPORT_SO_PATH, 1);
  setenv("LAMPORT_CTOR_ENTRY", entry, 1);
  setenv("LAMPORT_CTOR_DELAY_MS", "600", 1);
  void* fn = dlsym(ours, entry);  // before the thread: dlsym itself takes the loader's lock
  void* helper = nullptr;
  std::thread opener([&helper] { helper = dlopen(CTOR_CALLS_NCCL_PATH, RTLD_NOW | RTLD_LOCAL); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  bool ok = false;
  if (std::string(entry) == "ncclGetVersion") {
    int version = 0;
    ok = fn != nullptr && reinterpret_cast<int (*)(int*)>(fn)(&version) == 0 && version == 22800;
  } else if (std::string(entry) == "ncclAllReduce") {  // the stand-in has none: ncclSystemError
    using AllReduceFn = int (*)(const void*, void*, size_t, int, int, void*, void*);
    ok = fn != nullptr && reinterpret_cast<AllReduceFn>(fn)(nullptr, nullptr, 0, 0, 0, nullptr, nullptr) == 2;
  } else {
    ok = fn != nullptr && reinterpret_cast<double (*)(double, long)>(fn)(1.5, 4) == 7.0;
  }
  opener.join();
  if (helper == nullptr) _exit(11);
  const int* ctorResult = static_cast<const int*>(dlsym(helper, "ctorCallsNcclResult"));
  if (ctorResult == nullptr || *ctorResult != 1) _exit(12);
  _exit(ok ? 0 : 13);
}

// Runs childScenario(entry) in a child; "exit N", or "deadlock" when it outlives kTimeout.
std::string runInChild(const char* entry) {
  const pid_t pid = fork();
  if (pid == 0) childScenario(entry);
  return nccl_lamport::testing::waitForChild(pid, kTimeout);
}

TEST(ResolveLockOrder, ForwarderFirstCallWhileAConstructorCallsIt) {
  EXPECT_EQ(runInChild("ncclGetVersion"), "exit 0");
}

TEST(ResolveLockOrder, TrampolineFirstCallWhileAConstructorCallsIt) {
  EXPECT_EQ(runInChild("ncclTeamRail"), "exit 0");
}

}  // namespace

namespace {
TEST(ResolveLockOrder, WrapperFirstCallWhileAConstructorCallsIt) {
  EXPECT_EQ(runInChild("ncclAllReduce"), "exit 0");
}
}  // namespace
