// The entry-hook engine (plugin/hooks) against a stand-in library whose entries have the prologue
// shapes real NCCL builds have (standin_entries.S, standin_cet.c): every way of calling an entry
// reaches the replacement, the trampoline still computes the original's result, entries that
// cannot be relocated are refused with nothing changed, a refused mprotect installs nothing, and
// installing while 8 threads call the entries in a loop never gives a wrong result.
#include <dlfcn.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/hooks/entry_hooks.h"
#include "tests/shim/hooks/standin_entries.h"

using nccl_lamport::hooks::EntryHook;
using nccl_lamport::hooks::EntryHookSet;

// mprotect as the test sees fit: with gDenyWritableCodeAt = N > 0, the N-th request for a
// writable and executable mapping fails with EACCES (as SELinux execmod refuses it). The
// engine is linked into this executable, so its calls bind here.
static std::atomic<int> gDenyWritableCodeAt{0};
static std::atomic<int> gWritableCodeRequests{0};
extern "C" int mprotect(void* addr, size_t len, int prot) {
  if ((prot & PROT_WRITE) && (prot & PROT_EXEC)) {
    const int n = ++gWritableCodeRequests;
    const int deny = gDenyWritableCodeAt.load();
    if (deny > 0 && n == deny) {
      errno = EACCES;
      return -1;
    }
  }
  return static_cast<int>(syscall(SYS_mprotect, addr, len, prot));
}

namespace {

using Fn = int (*)(int);

constexpr int kEntries = 6;
struct Entry {
  const char* name;
  Fn fn;
  int (*expected)(int);
};
const Entry kShapes[kEntries] = {
    {"hk_rip_lea", hk_rip_lea, [](int x) { return x + 101; }},
    {"hk_unaligned", hk_unaligned, [](int x) { return x + 102; }},
    {"hk_early_call", hk_early_call, [](int x) { return 2 * x + 3; }},
    {"hk_endbr", hk_endbr, [](int x) { return x + 104; }},
    {"hk_early_jcc", hk_early_jcc, [](int x) { return x == 0 ? -1 : x + 5; }},
    {"hk_cet", hk_cet, [](int x) { return 3 * x + 7; }},
};

std::atomic<long> gCalls[kEntries];
void* gOriginal[kEntries];

template <int I>
int wrapper(int x) {
  gCalls[I].fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<Fn>(__atomic_load_n(&gOriginal[I], __ATOMIC_ACQUIRE))(x);
}
const Fn kWrappers[kEntries] = {wrapper<0>, wrapper<1>, wrapper<2>, wrapper<3>, wrapper<4>, wrapper<5>};

std::vector<EntryHook> allHooks() {
  std::vector<EntryHook> hooks;
  for (int i = 0; i < kEntries; ++i) {
    EntryHook h;
    h.name = kShapes[i].name;
    h.entry = reinterpret_cast<void*>(kShapes[i].fn);
    h.replacement = reinterpret_cast<void*>(kWrappers[i]);
    h.publishOriginal = &gOriginal[i];
    hooks.push_back(h);
  }
  return hooks;
}

// The entry's address in the library itself (the test's &hk_x may be a PLT slot in a non-PIE
// executable): what dlsym on the library's handle gives.
void* libraryAddress(const char* name) {
  void* handle = dlopen(STANDIN_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  void* fn = handle != nullptr ? dlsym(handle, name) : nullptr;
  if (handle != nullptr) dlclose(handle);
  return fn;
}

std::vector<uint8_t> entryBytes(const char* name) {
  const auto* p = static_cast<const uint8_t*>(libraryAddress(name));
  return std::vector<uint8_t>(p, p + 16);
}

class EntryHooks : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto& c : gCalls) c = 0;
    for (auto& o : gOriginal) o = nullptr;
    gDenyWritableCodeAt = 0;
    gWritableCodeRequests = 0;
  }
  void TearDown() override {
    std::string why;
    EXPECT_TRUE(set_.remove(&why)) << why;
  }
  EntryHookSet set_;
};

TEST_F(EntryHooks, EveryCallerReachesTheReplacementAndTheOriginalStillComputes) {
  Fn cached[kEntries];
  for (int i = 0; i < kEntries; ++i) cached[i] = reinterpret_cast<Fn>(libraryAddress(kShapes[i].name));
  std::vector<EntryHook> hooks = allHooks();
  std::string why;
  ASSERT_TRUE(set_.install(hooks, &why)) << why;
  for (int i = 0; i < kEntries; ++i) {
    SCOPED_TRACE(kShapes[i].name);
    EXPECT_EQ(hooks[i].original, gOriginal[i]);
    for (int x : {0, 1, 7, -3}) {
      const long before = gCalls[i];
      EXPECT_EQ(kShapes[i].fn(x), kShapes[i].expected(x));  // through the PLT
      EXPECT_EQ(cached[i](x), kShapes[i].expected(x));      // a pointer taken before
      Fn looked = reinterpret_cast<Fn>(libraryAddress(kShapes[i].name));
      EXPECT_EQ(looked(x), kShapes[i].expected(x));  // dlsym on a handle, after
      EXPECT_EQ(gCalls[i] - before, 3);
    }
  }
  // endbr64 stays first, so indirect calls still land on an end-branch.
  EXPECT_EQ(entryBytes("hk_endbr")[0], 0xF3);
  EXPECT_EQ(entryBytes("hk_endbr")[4], 0xE9);
  EXPECT_EQ(entryBytes("hk_cet")[0], 0xF3);
}

TEST_F(EntryHooks, RemoveRestoresEveryByte) {
  std::vector<std::vector<uint8_t>> before;
  for (const Entry& e : kShapes) before.push_back(entryBytes(e.name));
  std::vector<EntryHook> hooks = allHooks();
  std::string why;
  ASSERT_TRUE(set_.install(hooks, &why)) << why;
  EXPECT_NE(entryBytes("hk_rip_lea"), before[0]);
  ASSERT_TRUE(set_.remove(&why)) << why;
  for (int i = 0; i < kEntries; ++i) EXPECT_EQ(entryBytes(kShapes[i].name), before[i]) << kShapes[i].name;
  EXPECT_EQ(hk_rip_lea(1), 102);
  EXPECT_EQ(gCalls[0], 0);
}

void expectRefusedWithNothingChanged(EntryHookSet& set, std::vector<EntryHook> hooks, const char* reasonPart) {
  std::vector<std::vector<uint8_t>> before;
  for (const Entry& e : kShapes) before.push_back(entryBytes(e.name));
  std::string why;
  EXPECT_FALSE(set.install(hooks, &why));
  EXPECT_NE(why.find(reasonPart), std::string::npos) << why;
  EXPECT_FALSE(set.installed());
  for (int i = 0; i < kEntries; ++i) {
    EXPECT_EQ(entryBytes(kShapes[i].name), before[i]) << kShapes[i].name;
    EXPECT_EQ(gOriginal[i], nullptr);
    EXPECT_EQ(kShapes[i].fn(2), kShapes[i].expected(2));
    EXPECT_EQ(gCalls[i], 0);
  }
}

TEST_F(EntryHooks, ABranchBackIntoThePatchedBytesRefusesAll) {
  std::vector<EntryHook> hooks = allHooks();
  EntryHook bad;
  bad.name = "hk_loop_back";
  bad.entry = libraryAddress("hk_loop_back");
  bad.replacement = reinterpret_cast<void*>(kWrappers[0]);
  hooks.push_back(bad);
  expectRefusedWithNothingChanged(set_, hooks, "hk_loop_back: a branch into");
  EXPECT_EQ(hk_loop_back(3), 0);
}

TEST_F(EntryHooks, AFunctionShorterThanTheJumpRefusesAll) {
  std::vector<EntryHook> hooks = allHooks();
  EntryHook bad;
  bad.name = "hk_tiny";
  bad.entry = libraryAddress("hk_tiny");
  bad.replacement = reinterpret_cast<void*>(kWrappers[0]);
  hooks.insert(hooks.begin() + 2, bad);
  expectRefusedWithNothingChanged(set_, hooks, "hk_tiny: the function ends");
}

TEST_F(EntryHooks, ARefusedMprotectInstallsNothing) {
  for (int deny : {1, 2}) {  // the first entry page, or a later one after the first succeeded
    SCOPED_TRACE(deny);
    gWritableCodeRequests = 0;
    gDenyWritableCodeAt = deny;
    expectRefusedWithNothingChanged(set_, allHooks(), "mprotect refused");
  }
}

// The last check before any byte is written: the process-wide table of trapped sites is full.
// A refusal there must leave what the header promises untouched: the published originals (they
// would point into trampoline pages the refusal unmaps) and the committed flag.
TEST_F(EntryHooks, ARefusalAtTheLastCheckPublishesNothing) {
  std::vector<EntryHook> hooks(4097, allHooks()[0]);  // more sites than the table holds
  std::atomic<bool> committed{false};
  std::string why;
  EXPECT_FALSE(set_.install(hooks, &why, &committed));
  EXPECT_NE(why.find("too many hooked sites"), std::string::npos) << why;
  EXPECT_FALSE(set_.installed());
  EXPECT_FALSE(committed.load());
  EXPECT_EQ(gOriginal[0], nullptr) << "a refused install published a trampoline it then unmapped";
  EXPECT_EQ(kShapes[0].fn(2), kShapes[0].expected(2));
  EXPECT_EQ(gCalls[0], 0);
}

// The committed flag is set before the first byte is written: a replacement reached through a
// hook already sees it.
TEST_F(EntryHooks, TheCommittedFlagIsSetBeforeAnyCallerIsRedirected) {
  std::atomic<bool> committed{false};
  std::vector<EntryHook> hooks = allHooks();
  std::string why;
  ASSERT_TRUE(set_.install(hooks, &why, &committed)) << why;
  EXPECT_TRUE(committed.load());
}

// Installing is what production does (once, while other threads may be calling NCCL); removing
// is for tests only and happens with the callers stopped. Three rounds.
TEST_F(EntryHooks, InstallWhileEightThreadsCall) {
  std::string why;
  // Waits on progress, not on time: on a loaded 2-core CI machine the callers may not run at all
  // within a few milliseconds (fixed sleeps made this test flaky there).
  const auto waitFor = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done() && std::chrono::steady_clock::now() < deadline) usleep(1000);
    return done();
  };
  const auto hookedCalls = [] {
    long hooked = 0;
    for (auto& c : gCalls) hooked += c;
    return hooked;
  };
  for (int round = 0; round < 3; ++round) {
    std::atomic<bool> stop{false};
    std::atomic<long> wrong{0};
    std::atomic<long> calls{0};
    for (auto& c : gCalls) c = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        long n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          const Entry& e = kShapes[(t + n) % kEntries];
          const int x = static_cast<int>(n % 1000);
          if (e.fn(x) != e.expected(x)) wrong.fetch_add(1);
          ++n;
          calls.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    const bool callingBefore = waitFor([&] { return calls.load() >= 1000; });
    std::vector<EntryHook> hooks = allHooks();
    ASSERT_TRUE(set_.install(hooks, &why)) << why;
    const long atInstall = calls.load();
    const bool reached = waitFor([&] { return hookedCalls() > 0 && calls.load() >= atInstall + 1000; });
    stop = true;
    for (auto& t : threads) t.join();
    EXPECT_TRUE(callingBefore) << "the callers never started";
    EXPECT_TRUE(reached) << "no call reached a replacement after the install";
    EXPECT_EQ(wrong, 0);
    EXPECT_GT(calls.load(), hookedCalls());
    ASSERT_TRUE(set_.remove(&why)) << why;
  }
}

}  // namespace

#ifdef REAL_NCCL_LIBRARY
// The real libnccl.so.2 this build found (no GPU needed: nothing is called): every function tuner
// activation hooks is relocatable, and removing restores its bytes.
TEST(RealNcclEntries, AreHookable) {
  void* nccl = dlopen(REAL_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nccl, nullptr) << dlerror();
  const char* names[] = {"ncclAllReduce",   "ncclCommInitRank",      "ncclCommInitRankConfig", "ncclCommInitRankScalable",
                         "ncclCommInitAll", "ncclCommSplit",         "ncclCommShrink",         "ncclCommFinalize",
                         "ncclCommDestroy", "ncclCommAbort",         "ncclCommRevoke",         "ncclCommGetAsyncError",
                         "ncclGroupStart",  "ncclGroupEnd",          "ncclGroupSimulateEnd"};
  std::vector<EntryHook> hooks;
  std::vector<std::vector<uint8_t>> before;
  for (const char* name : names) {
    void* entry = dlsym(nccl, name);
    if (entry == nullptr) continue;
    EntryHook h;
    h.name = name;
    h.entry = entry;
    h.replacement = reinterpret_cast<void*>(kWrappers[0]);  // never called
    hooks.push_back(h);
    const auto* p = static_cast<const uint8_t*>(entry);
    before.emplace_back(p, p + 16);
  }
  ASSERT_GE(hooks.size(), 12u);
  EntryHookSet set;
  std::string why;
  ASSERT_TRUE(set.install(hooks, &why)) << why;
  for (const EntryHook& h : hooks) EXPECT_NE(h.original, nullptr) << h.name;
  ASSERT_TRUE(set.remove(&why)) << why;
  for (size_t i = 0; i < hooks.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(hooks[i].entry);
    EXPECT_EQ(std::vector<uint8_t>(p, p + 16), before[i]) << hooks[i].name;
  }
}
#endif
