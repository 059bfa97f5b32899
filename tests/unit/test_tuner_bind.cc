// Tuner activation: a communicator handle is bound, at its first hooked call, to the set-up its
// own tuner init recorded (plugin/comm/tuner_setup.h), never to another communicator's, and
// that init always leaves an entry of its own, whatever happens in the set-up.
// No GPU: fake struct ncclComm laid out as NCCL allocates them (1.2 MB each, startMagic first,
// endMagic last, the tuner context slot at NCCL 2.30.7's offset); the stand-in NCCL
// (tests/shim/lifecycle_fake_nccl.c) answers ncclCommCount from them. A communicator "on two
// nodes" takes the set-up's branch that needs no CUDA.
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cta_cap.h"
#include "plugin/comm/tuner_setup.h"
#include "plugin/comm/workspace_setup.h"
#include "tests/unit/setup_test_support.h"
#include "tuner/tuner_impl.h"

namespace {

constexpr size_t kCommBytes = 1200000;   // about sizeof(struct ncclComm) in NCCL 2.28-2.30
constexpr size_t kSlotOffset = 1191560;  // offsetof(struct ncclComm, tunerContext), NCCL 2.30.7

/** Two communicators NCCL allocated one after the other: comm(0) just below comm(1). */
class TwoComms {
 public:
  TwoComms() : memory_(2 * kCommBytes / sizeof(uint64_t), 0) {
    for (int i = 0; i < 2; ++i) {
      char* c = base(i);
      const uint64_t magic = nccl_lamport::kNcclCommMagic;
      const int nRanks = 2;  // where the stand-in's ncclCommCount reads it
      memcpy(c, &magic, sizeof(magic));
      memcpy(c + kCommBytes - sizeof(magic), &magic, sizeof(magic));
      memcpy(c + 8, &nRanks, sizeof(nRanks));
    }
  }
  ncclComm_t comm(int i) { return reinterpret_cast<ncclComm_t>(base(i)); }
  const void* slot(int i) { return base(i) + kSlotOffset; }

 private:
  char* base(int i) { return reinterpret_cast<char*>(memory_.data()) + i * kCommBytes; }
  std::vector<uint64_t> memory_;
};

nccl_lamport::TunerCommInfo infoFor(uint64_t commId, size_t nNodes) {
  nccl_lamport::TunerCommInfo info;
  info.abiVersion = 6;
  info.hasCommId = true;
  info.commId = commId;
  info.nRanks = 2;
  info.nNodes = nNodes;
  return info;
}

/** The entry the handle is registered with after its first hooked call (null if none). */
std::shared_ptr<nccl_lamport::LamportComm> bind(ncclComm_t comm) {
  if (!nccl_lamport::bindCommToTunerSetUp(comm, /*registerIfNone=*/true)) return nullptr;
  return nccl_lamport::CommRegistry::instance().find(comm);
}

// Communicator 0's set-up was never recorded (its init threw before the fix, or ran before the
// hooks); communicator 1, allocated just above it, has not made its first call yet. Taking the
// nearest set-up above a handle, 0's calls would push into 1's peers' buffers.
TEST(TunerBind, AHandleWithoutItsOwnSetUpIsNotBoundToANeighboursSetUp) {
  TwoComms comms;
  const auto info = infoFor(0x5858585858585858ull, 2);
  nccl_lamport::setUpAtTunerInit(info, comms.slot(1));
  ASSERT_TRUE(nccl_lamport::tunerSetUpRecordedFor(comms.comm(1)));
  const auto bound = bind(comms.comm(0));
  ASSERT_NE(bound, nullptr);
  EXPECT_NE(bound->commId, info.commId) << "communicator 0 was bound to communicator 1's set-up: " << bound->reason;
  EXPECT_FALSE(bound->eligible);
  EXPECT_TRUE(nccl_lamport::tunerSetUpRecordedFor(comms.comm(1))) << "communicator 1's own set-up is gone";
  const auto own = bind(comms.comm(1));
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(own->commId, info.commId);
  nccl_lamport::CommRegistry::instance().remove(comms.comm(0));
  nccl_lamport::CommRegistry::instance().remove(comms.comm(1));
}

// Tuner activation: the init's config.maxCTAs reaches the communicator at its binding (noted under
// the handle by the hooked init wrapper), combined as NCCL combines it: a value above 64 counts as
// 64. Before (found by a review of session 18), the raw value was kept, and a limit from
// NCCL_MAX_NCHANNELS made the binding ignore the config altogether.
TEST(TunerBind, TheInitsBlockLimitIsCombinedAsNcclCombinesIt) {
  TwoComms comms;
  const auto info = infoFor(0x4343434343434343ull, 2);
  nccl_lamport::setUpAtTunerInit(info, comms.slot(0));
  nccl_lamport::noteCtaCap(comms.comm(0), 100);
  const auto bound = bind(comms.comm(0));
  ASSERT_NE(bound, nullptr);
  EXPECT_EQ(bound->maxCtas, nccl_lamport::kNcclMaxChannels);
  EXPECT_EQ(nccl_lamport::peekCtaCap(comms.comm(0)), 0) << "the note outlived the binding";
  nccl_lamport::CommRegistry::instance().remove(comms.comm(0));
}

// Both recorded: each handle gets its own, whichever binds first, and after the first bind the
// learnt offset is what binds (a handle whose own slot is empty gets nothing).
TEST(TunerBind, EachHandleIsBoundToItsOwnSetUp) {
  TwoComms comms;
  const auto info0 = infoFor(0x3030303030303030ull, 2);
  const auto info1 = infoFor(0x3131313131313131ull, 2);
  nccl_lamport::setUpAtTunerInit(info0, comms.slot(0));
  nccl_lamport::setUpAtTunerInit(info1, comms.slot(1));
  const auto bound1 = bind(comms.comm(1));
  const auto bound0 = bind(comms.comm(0));
  ASSERT_NE(bound0, nullptr);
  ASSERT_NE(bound1, nullptr);
  EXPECT_EQ(bound0->commId, info0.commId);
  EXPECT_EQ(bound1->commId, info1.commId);
  TwoComms later;  // nothing recorded for these: neither may take a set-up recorded since
  const auto info2 = infoFor(0x3232323232323232ull, 2);
  nccl_lamport::setUpAtTunerInit(info2, later.slot(1));
  EXPECT_FALSE(nccl_lamport::tunerSetUpRecordedFor(later.comm(0)));
  const auto none = bind(later.comm(0));
  ASSERT_NE(none, nullptr);
  EXPECT_NE(none->commId, info2.commId);
  nccl_lamport::forgetTunerSetUp(later.slot(1));
  for (ncclComm_t c : {comms.comm(0), comms.comm(1), later.comm(0)}) nccl_lamport::CommRegistry::instance().remove(c);
}

// The tuner's init records an entry of its own before its set-up runs, so that a throw anywhere
// in the set-up still leaves the handle OFF on its own entry. Here the set-up waits for a peer
// that never comes (NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS) while the test looks.
TEST(TunerBind, TheTunerInitRecordsAnEntryBeforeItsSetUpRuns) {
  TwoComms comms;
  const auto info = infoFor(0x4c41535447415445ull ^ static_cast<uint64_t>(getpid()), 1);
  std::atomic<bool> done{false};
  std::thread init([&] {
    nccl_lamport::setUpAtTunerInit(info, comms.slot(0));
    done.store(true);
  });
  bool recordedWhileRunning = false;
  while (!done.load() && !recordedWhileRunning) {
    recordedWhileRunning = nccl_lamport::tunerSetUpRecordedFor(comms.comm(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  init.join();
  EXPECT_TRUE(recordedWhileRunning) << "nothing was recorded for the communicator until its set-up ended";
  const auto bound = bind(comms.comm(0));
  ASSERT_NE(bound, nullptr);
  EXPECT_EQ(bound->commId, info.commId);
  EXPECT_FALSE(bound->eligible) << "no peer came";
  nccl_lamport::CommRegistry::instance().remove(comms.comm(0));
}

/** One communicator laid out as NCCL allocates it, in its own mapping, so that its first page can
 *  be unmapped as a destroyed communicator's calloc'ed block is. */
class MappedComm {
 public:
  MappedComm() {
    bytes_ = (kCommBytes + kPage - 1) / kPage * kPage;
    void* at = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = at == MAP_FAILED ? nullptr : static_cast<char*>(at);
    if (base_ == nullptr) return;
    const uint64_t magic = nccl_lamport::kNcclCommMagic;
    memcpy(base_, &magic, sizeof(magic));
    memcpy(base_ + kCommBytes - sizeof(magic), &magic, sizeof(magic));
  }
  ~MappedComm() {
    if (base_ != nullptr) munmap(base_ + firstMapped_, bytes_ - firstMapped_);
  }
  bool ok() const { return base_ != nullptr; }
  ncclComm_t comm() { return reinterpret_cast<ncclComm_t>(base_); }
  const void* slot() { return base_ + kSlotOffset; }
  void unmapFirstPage() {
    munmap(base_, kPage);
    firstMapped_ = kPage;
  }

 private:
  static constexpr size_t kPage = 4096;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  size_t firstMapped_ = 0;
};

// The extension API asked about a destroyed communicator whose memory is unmapped, with a set-up
// recorded above it (a neighbour's, or its own never bound): it used to read the handle and fault.
TEST(TunerBind, AQueryAboutAnUnmappedHandleIsUnknownWithoutAFault) {
  MappedComm destroyed;
  ASSERT_TRUE(destroyed.ok());
  const auto info = infoFor(0x4445414444454144ull, 2);
  nccl_lamport::setUpAtTunerInit(info, destroyed.slot());
  destroyed.unmapFirstPage();
  ASSERT_TRUE(nccl_lamport::tunerSetUpRecordedFor(destroyed.comm()));
  EXPECT_FALSE(nccl_lamport::bindCommToTunerSetUp(destroyed.comm(), /*registerIfNone=*/false));
  EXPECT_FALSE(nccl_lamport::bindCommToTunerSetUp(destroyed.comm(), /*registerIfNone=*/true))
      << "an unreadable handle is never registered";
  EXPECT_EQ(nccl_lamport::CommRegistry::instance().find(destroyed.comm()), nullptr);
  nccl_lamport::forgetTunerSetUp(destroyed.slot());
}

// A query about an address that is no communicator's start (inside one) is answered "unknown":
// before, it was registered OFF for good and NCCL was asked about it (ncclCommCount reads it).
TEST(TunerBind, AQueryAboutAnAddressInsideACommunicatorRegistersNothing) {
  TwoComms comms;
  const auto info = infoFor(0x4741524241474521ull, 2);
  nccl_lamport::setUpAtTunerInit(info, comms.slot(0));
  const auto inside = reinterpret_cast<ncclComm_t>(reinterpret_cast<char*>(comms.comm(0)) + 8);
  EXPECT_FALSE(nccl_lamport::bindCommToTunerSetUp(inside, /*registerIfNone=*/false));
  EXPECT_EQ(nccl_lamport::CommRegistry::instance().find(inside), nullptr);
  const auto own = bind(comms.comm(0));
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(own->commId, info.commId) << "the query took the communicator's own set-up";
  nccl_lamport::CommRegistry::instance().remove(comms.comm(0));
}

/** An exchange that runs out of memory in its first round. */
class ThrowingExchange : public nccl_lamport::SetupExchange {
 public:
  bool allGather(const void*, size_t, std::vector<uint8_t>*, int*, std::string*) override { throw std::bad_alloc(); }
};

// A throw in the set-up inside the tuner's init (before: it escaped, and nothing was recorded).
TEST(SetupOverExchange, AThrowingExchangeLeavesTheCommunicatorOff) {
  ThrowingExchange exchange;
  std::unique_ptr<nccl_lamport::LamportComm> lc;
  EXPECT_NO_THROW(lc = nccl_lamport::setupWorkspaceOverExchange(2, -1, exchange));
  ASSERT_NE(lc, nullptr);
  EXPECT_FALSE(lc->eligible);
  EXPECT_FALSE(lc->reason.empty());
}

}  // namespace
