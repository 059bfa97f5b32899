// The communicator registry (plugin/comm/comm_registry.h) and the teardown entry points that only
// touch it (plugin/comm/comm_teardown.h: requestAbort, markFinalized, handOverToNccl,
// releaseComm of a communicator we never accelerated, and of one whose set-up failed), linked from
// lamport_internal as the shared object links them. No NCCL, no GPU: handles are made-up
// addresses, host flags plain memory.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/comm_teardown.h"
#include "plugin/comm/setup_state.h"
#include "plugin/comm/setup_verdict.h"

namespace nccl_lamport {
namespace {

// A made-up handle, distinct per test (the registry is process-wide).
ncclComm_t fakeHandle(uintptr_t n) { return reinterpret_cast<ncclComm_t>(uintptr_t{0x10000} + n * 0x100); }

std::shared_ptr<LamportComm> makeEntry(ncclComm_t comm, int rank = 0) {
  auto lc = std::make_shared<LamportComm>();
  lc->comm = comm;
  lc->lamportRank = rank;
  lc->nRanks = 2;
  return lc;
}

class CommRegistryTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (ncclComm_t comm : used_) CommRegistry::instance().remove(comm);
  }
  ncclComm_t handle(uintptr_t n) {
    used_.push_back(fakeHandle(n));
    return used_.back();
  }
  std::vector<ncclComm_t> used_;
};

TEST_F(CommRegistryTest, FindGivesTheInsertedEntryAndNullForUnknownHandles) {
  CommRegistry& registry = CommRegistry::instance();
  const size_t before = registry.size();
  const ncclComm_t a = handle(1), b = handle(2);
  auto lc = makeEntry(a, 1);
  registry.insert(lc);
  EXPECT_EQ(registry.find(a), lc);
  EXPECT_EQ(registry.find(a)->lamportRank, 1);
  EXPECT_EQ(registry.find(b), nullptr);
  EXPECT_EQ(registry.find(nullptr), nullptr);
  EXPECT_EQ(registry.size(), before + 1);
}

TEST_F(CommRegistryTest, InsertOfAUniquePtrIsFoundToo) {
  const ncclComm_t a = handle(3);
  auto owned = std::make_unique<LamportComm>();
  owned->comm = a;
  owned->lamportRank = 7;
  CommRegistry::instance().insert(std::move(owned));
  ASSERT_NE(CommRegistry::instance().find(a), nullptr);
  EXPECT_EQ(CommRegistry::instance().find(a)->lamportRank, 7);
}

TEST_F(CommRegistryTest, RemoveTakesTheEntryOutOnce) {
  CommRegistry& registry = CommRegistry::instance();
  const ncclComm_t a = handle(4);
  auto lc = makeEntry(a);
  registry.insert(lc);
  const size_t with = registry.size();
  EXPECT_EQ(registry.remove(a), lc);
  EXPECT_EQ(registry.size(), with - 1);
  EXPECT_EQ(registry.find(a), nullptr);
  EXPECT_EQ(registry.remove(a), nullptr);
}

// A destroy on another thread cannot free an entry under a caller still using it.
TEST_F(CommRegistryTest, AnEntryHeldByACallerOutlivesItsRemoval) {
  const ncclComm_t a = handle(5);
  CommRegistry::instance().insert(makeEntry(a, 3));
  std::shared_ptr<LamportComm> held = CommRegistry::instance().find(a);
  CommRegistry::instance().remove(a);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->lamportRank, 3);
  EXPECT_EQ(held.use_count(), 1);
}

// NCCL may hand out a freed communicator's address again: the new communicator's entry replaces
// the old one, and a late removeIfSame for the old entry must leave the new one in place.
TEST_F(CommRegistryTest, HandleReuseReplacesAndRemoveIfSameKeepsTheNewEntry) {
  CommRegistry& registry = CommRegistry::instance();
  const ncclComm_t a = handle(6);
  auto oldEntry = makeEntry(a, 0);
  auto newEntry = makeEntry(a, 1);
  registry.insert(oldEntry);
  registry.insert(newEntry);
  EXPECT_EQ(registry.find(a), newEntry);
  registry.removeIfSame(a, oldEntry);
  EXPECT_EQ(registry.find(a), newEntry);
  registry.removeIfSame(a, nullptr);
  EXPECT_EQ(registry.find(a), newEntry);
  registry.removeIfSame(a, newEntry);
  EXPECT_EQ(registry.find(a), nullptr);
  registry.removeIfSame(a, newEntry);  // absent: nothing to do
  EXPECT_EQ(registry.find(a), nullptr);
}

TEST_F(CommRegistryTest, ConcurrentLookupsInsertsAndRemovals) {
  CommRegistry& registry = CommRegistry::instance();
  constexpr int kHandles = 16;
  std::vector<ncclComm_t> handles;
  for (int i = 0; i < kHandles; ++i) handles.push_back(handle(100 + i));
  std::atomic<bool> stop{false};
  std::atomic<long> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        for (ncclComm_t comm : handles) {
          std::shared_ptr<LamportComm> lc = registry.find(comm);
          if (lc != nullptr && lc->comm != comm) wrong.fetch_add(1);
        }
      }
    });
  }
  for (int round = 0; round < 2000; ++round) {
    ncclComm_t comm = handles[round % kHandles];
    if (round % 3 == 2) {
      registry.remove(comm);
    } else {
      registry.insert(makeEntry(comm, round));
    }
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(CommRegistryTest, AsyncErrorFollowsTheKernelsReport) {
  LamportComm lc;
  lc.comm = handle(7);
  EXPECT_EQ(lamportAsyncError(lc), ncclSuccess);  // no host flags: never accelerated
  LamportHostFlags flags{};
  lc.hostFlags = &flags;
  EXPECT_EQ(lamportAsyncError(lc), ncclSuccess);
  flags.error = kLamportTimedOut;
  EXPECT_EQ(lamportAsyncError(lc), ncclRemoteError);
  EXPECT_TRUE(lc.errorReported.load());
  EXPECT_EQ(lamportAsyncError(lc), ncclRemoteError);  // stays in error
  lc.hostFlags = nullptr;
}

// ---- teardown entry points that only touch the registry -----------------------------------

TEST_F(CommRegistryTest, RequestAbortRaisesTheKernelsAbortFlag) {
  const ncclComm_t a = handle(8);
  auto lc = makeEntry(a);
  LamportHostFlags flags{};
  lc->hostFlags = &flags;
  CommRegistry::instance().insert(lc);
  requestAbort(a);
  EXPECT_EQ(flags.abort, 1u);
  requestAbort(handle(9));  // unknown: no-op
  CommRegistry::instance().remove(a);
  lc->hostFlags = nullptr;
}

TEST_F(CommRegistryTest, MarkFinalizedRoutesLaterCallsToNccl) {
  const ncclComm_t a = handle(10);
  auto lc = makeEntry(a);
  CommRegistry::instance().insert(lc);
  EXPECT_FALSE(lc->routesToNccl.load());
  markFinalized(a);
  EXPECT_TRUE(lc->routesToNccl.load());
  EXPECT_FALSE(lc->revoked.load());
  markFinalized(handle(11));  // unknown: no-op
}

TEST_F(CommRegistryTest, HandOverToNcclRevokesFinalizesAndAborts) {
  const ncclComm_t a = handle(12);
  auto lc = makeEntry(a);
  LamportHostFlags flags{};
  lc->hostFlags = &flags;
  CommRegistry::instance().insert(lc);
  handOverToNccl(a);
  EXPECT_TRUE(lc->revoked.load());
  EXPECT_TRUE(lc->routesToNccl.load());
  EXPECT_EQ(flags.abort, 1u);
  CommRegistry::instance().remove(a);
  lc->hostFlags = nullptr;
}

// A communicator we never accelerated has nothing on the device: releasing it forgets it at once
// (no device wait, no CUDA call).
TEST_F(CommRegistryTest, ReleasingAnIneligibleCommForgetsIt) {
  const ncclComm_t a = handle(13);
  auto lc = makeEntry(a);
  lc->eligible = false;
  CommRegistry::instance().insert(lc);
  releaseComm(a, /*aborting=*/false);
  EXPECT_EQ(CommRegistry::instance().find(a), nullptr);
  EXPECT_EQ(lc.use_count(), 1);
  releaseComm(a, /*aborting=*/true);  // already gone: no-op
  releaseCommEntry(nullptr, false);
}

// A set-up whose exchange did not complete may have left its all-gather stuck on the device, and
// unmapping the workspace then waits for it: published with the communicator "failed", the
// workspace stays with the entry, and the tear-down (after NCCL's abort stopped that all-gather)
// frees it. A peer mapping that maps nothing stands for the workspace here.
TEST_F(CommRegistryTest, AFailedSetUpsWorkspaceIsFreedAtItsTearDownNotWhenPublished) {
  SetupState s;
  s.lc = std::make_unique<LamportComm>();
  s.lc->comm = handle(30);
  s.lc->nRanks = 2;
  s.lc->setupFailed = true;
  s.lc->peers.push_back(std::make_unique<PeerMapping>());
  settleVerdict(s, /*allOk=*/false);
  EXPECT_FALSE(s.lc->eligible);
  EXPECT_EQ(s.lc->peers.size(), 1u) << "freed when the failed set-up was published";
  std::shared_ptr<LamportComm> entry(std::move(s.lc));
  releaseCommEntry(entry, /*aborting=*/true);
  EXPECT_TRUE(entry->peers.empty()) << "not freed at the tear-down";
}

}  // namespace
}  // namespace nccl_lamport
