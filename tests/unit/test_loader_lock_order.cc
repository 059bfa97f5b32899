// The lazily loaded NVML table of plugin/transport/topology.cc (nvmlLibrary) against the dynamic
// loader's lock. Its first use calls dlopen; a function-local static's guard held across that call
// deadlocks with a library constructor (running under the loader's lock, on another thread) that
// reaches the same table: the constructor waits for the guard, its holder waits for the loader's
// lock. The same rule as tests/shim/test_resolve_lock_order.cc.
//
// driverApi (cuda_driver.cc) has the same shape, but no case here: when it is the first call of
// our static CUDA runtime, the runtime's own lazy initialisation (a pthread_once held across
// dlopen("libcuda.so.1")) deadlocks the same way with or without our guard, so a test would not
// tell the two apart.
//
// Each scenario runs in a child process forked before any thread or CUDA call; the test kills the
// child and fails after kTimeout. No GPU is needed: a dlopen that fails takes the lock as well.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "plugin/transport/topology.h"

namespace nccl_lamport {
#include "tests/shim/child_deadline.h"

namespace {

constexpr auto kTimeout = std::chrono::seconds(20);
constexpr auto kCtorDelay = std::chrono::milliseconds(600);

std::atomic<bool> gCtorStarted{false};
std::atomic<bool> gCtorDone{false};
void (*gFirstUse)() = nullptr;

void firstNvmlUse() { (void)checkNvlinkP2p("0000:01:00.0", "0000:02:00.0", nullptr); }

// Runs in the helper library's constructor, under the loader's lock.
void ctorCallback() {
  gCtorStarted.store(true);
  std::this_thread::sleep_for(kCtorDelay);  // the main thread's first use starts meanwhile
  gFirstUse();
  gCtorDone.store(true);
}

[[noreturn]] void childScenario(void (*firstUse)()) {
  gFirstUse = firstUse;
  char address[32];
  snprintf(address, sizeof(address), "%llx",
           static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&ctorCallback)));
  setenv("LAMPORT_CTOR_CALLBACK", address, 1);
  void* helper = nullptr;
  std::thread opener([&helper] { helper = dlopen(CTOR_RUNS_CALLBACK_PATH, RTLD_NOW | RTLD_LOCAL); });
  while (!gCtorStarted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  firstUse();  // the first use: while the other thread holds the loader's lock
  opener.join();
  _exit(helper != nullptr && gCtorDone.load() ? 0 : 11);
}

std::string runInChild(void (*firstUse)()) {
  const pid_t pid = fork();
  if (pid == 0) childScenario(firstUse);
  return nccl_lamport::testing::waitForChild(pid, kTimeout);
}

TEST(LoaderLockOrder, NvmlFirstUseWhileAConstructorUsesIt) { EXPECT_EQ(runInChild(firstNvmlUse), "exit 0"); }

}  // namespace
}  // namespace nccl_lamport
