// The exchange rounds of a non-blocking communicator's set-up (plugin/comm/exchange_rounds.h,
// setupWorkspaces) over the stand-in NCCL, with a stand-in for their device side (RoundDevice): a
// round's blocks are read back only once its all-gather has finished, and a round 1 that gave up
// on a gone peer ends the set-up instead of waiting in round 2 behind the stuck all-gather.
// No GPU: the set-up's CUDA steps fail here (capable = 0), which the rounds carry like any rank's
// "no"; what is checked is which device steps run, in which order, and when the set-up ends.
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cta_cap.h"
#include "plugin/comm/deferred_setup.h"
#include "plugin/comm/exchange_rounds.h"
#include "plugin/comm/setup_control.h"
#include "plugin/comm/workspace_setup.h"
#include "tests/unit/setup_test_support.h"
#include "tests/unit/stand_in_round_device.h"

namespace {

using nccl_lamport::ExchangeRound;
using nccl_lamport::SetupControl;
using nccl_lamport::SetupState;
using setup_test::fakeComm;
using setup_test::setUpWithin5s;
using setup_test::StandInDevice;

/** Lets a set-up still waiting (the test failed) end, and forgets comm's entry. */
void cleanUp(ncclComm_t comm, const std::shared_ptr<SetupControl>& control) {
  {
    std::lock_guard<std::mutex> lock(control->ncclMutex);
    control->cancelled.store(true);
  }
  fakeCommBusyFor(comm, 0);
  nccl_lamport::CommRegistry::instance().remove(comm);
}

TEST(SetupRounds, TheReadBackWaitsUntilTheAllGatherFinished) {
  ncclComm_t comm = fakeComm(0);
  ASSERT_NE(comm, nullptr);
  auto control = std::make_shared<SetupControl>();
  auto device = std::make_shared<StandInDevice>();
  ASSERT_TRUE(setUpWithin5s({comm}, control, device));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(device->downloads[r].load(), 1) << "round " << r + 1;
    EXPECT_EQ(device->downloadsBeforeDone[r].load(), 0)
        << "round " << r + 1 << " read its blocks back before its all-gather finished: a copy into pageable "
        << "memory then blocks until it does, whatever the round's deadline";
  }
  cleanUp(comm, control);
}

// The CTA cap noted by the init or split wrapper (plugin/comm/cta_cap.h) reaches the set-up's
// communicator, which keeps it (its launches and its children without a config use it); the note
// is taken once.
TEST(SetupRounds, TheSetUpTakesTheCtaCapNotedAtCreation) {
  ncclComm_t comm = fakeComm(0);
  ASSERT_NE(comm, nullptr);
  nccl_lamport::noteCtaCap(comm, 6);
  auto control = std::make_shared<SetupControl>();
  auto device = std::make_shared<StandInDevice>();
  ASSERT_TRUE(setUpWithin5s({comm}, control, device));
  const std::shared_ptr<nccl_lamport::LamportComm> lc = nccl_lamport::CommRegistry::instance().find(comm);
  ASSERT_NE(lc, nullptr);
  EXPECT_EQ(lc->maxCtas, 6);
  EXPECT_EQ(nccl_lamport::peekCtaCap(comm), 0) << "the note was not taken";
  cleanUp(comm, control);
}

// What a split or shrink without a config inherits is the parent's registry entry's maxCtas
// (interpose_lifecycle.cc onChildCreated). For a non-blocking parent that entry is the set-up's
// placeholder while the set-up is pending, and the "stays on NCCL" entry publishOnNccl puts in
// its place when the set-up is stopped (ncclCommRevoke, ncclCommShrink with NCCL_SHRINK_ABORT):
// both must carry the cap noted at init (NCCL copies the parent's config to the child). Both had
// none before (found by a review of session 18).
TEST(SetupRounds, APendingOrStoppedSetUpsEntryKeepsTheCtaCapItsChildrenInherit) {
  ncclComm_t comm = fakeComm(3600000);  // NCCL does not report it ready during the test
  ASSERT_NE(comm, nullptr);
  nccl_lamport::noteCtaCap(comm, 6);  // the init wrapper's note for config.maxCTAs = 6
  nccl_lamport::startDeferredSetup({comm});
  const std::shared_ptr<nccl_lamport::LamportComm> pending = nccl_lamport::CommRegistry::instance().find(comm);
  ASSERT_NE(pending, nullptr);
  EXPECT_EQ(pending->maxCtas, 6) << "the placeholder a child without a config inherits from has no cap";
  nccl_lamport::cancelDeferredSetup(comm, nccl_lamport::CancelReason::kHandedToNccl);  // revoked
  EXPECT_TRUE(nccl_lamport::joinDeferredSetup(comm, 5000));  // returns at the stop: wait for the entry
  std::shared_ptr<nccl_lamport::LamportComm> published = pending;
  for (int i = 0; i < 5000 && published == pending; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    published = nccl_lamport::CommRegistry::instance().find(comm);
  }
  ASSERT_NE(published, pending) << "the stopped set-up never replaced its placeholder";
  ASSERT_NE(published, nullptr);
  EXPECT_EQ(published->maxCtas, 6) << "the entry left after a stopped set-up (" << published->reason << ") has no cap";
  nccl_lamport::takeCtaCap(comm);
  nccl_lamport::CommRegistry::instance().remove(comm);
}

// A peer gone after init: round 1's all-gather never finishes on the stream. Round 2 would be
// queued behind it on the same stream and communicator, and has no deadline.
TEST(SetupRounds, ARoundOneStreamGiveUpEndsTheSetUpWithTheCommunicatorFailed) {
  ncclComm_t comm = fakeComm(0);
  ASSERT_NE(comm, nullptr);
  auto control = std::make_shared<SetupControl>();
  auto device = std::make_shared<StandInDevice>();
  device->finishes[0] = device->finishes[1] = false;
  EXPECT_TRUE(setUpWithin5s({comm}, control, device))
      << "round 1 gave up after " << setup_test::kTimeoutMs << " ms, but the set-up did not end";
  EXPECT_EQ(device->waits[0].load(), 1);
  EXPECT_EQ(device->uploads[1].load() + device->waits[1].load(), 0) << "round 2 ran after round 1 gave up";
  const auto entry = nccl_lamport::CommRegistry::instance().find(comm);
  ASSERT_NE(entry, nullptr) << "the communicator was never published";
  EXPECT_FALSE(entry->eligible);
  EXPECT_EQ(nccl_lamport::lamportAsyncError(*entry), ncclRemoteError) << "not reported failed: " << entry->reason;
  // What our ncclCommGetAsyncError tells the program, also while NCCL is still busy with the
  // stuck all-gather; NCCL's own internal calls keep NCCL's answer.
  EXPECT_EQ(nccl_lamport::asyncErrorToReport(entry.get(), ncclSuccess, false), ncclRemoteError);
  EXPECT_EQ(nccl_lamport::asyncErrorToReport(entry.get(), ncclInProgress, false), ncclRemoteError);
  EXPECT_EQ(nccl_lamport::asyncErrorToReport(entry.get(), ncclInProgress, true), ncclInProgress);
  cleanUp(comm, control);
}

/** The communicator NCCL keeps enqueueing for ever from the next ncclGroupEnd on (a gone peer). */
std::atomic<ncclComm_t> gBusyFromGroupEnd{nullptr};

void busyFromGroupEnd(const char* function, ncclComm_t) {
  ncclComm_t comm = gBusyFromGroupEnd.load();
  if (comm != nullptr && strcmp(function, "ncclGroupEnd") == 0) fakeCommBusyFor(comm, 3600 * 1000);
}

/** Checks what a round 1 that did not complete leaves: no stream wait, no round 2, comm failed. */
void expectEndedWithoutRoundTwo(ncclComm_t comm, const StandInDevice& device) {
  EXPECT_EQ(device.waits[0].load(), 0) << "round 1's stream was waited for after its all-gather was not enqueued";
  EXPECT_EQ(device.uploads[1].load() + device.waits[1].load(), 0) << "round 2 ran after round 1 gave up";
  const auto entry = nccl_lamport::CommRegistry::instance().find(comm);
  ASSERT_NE(entry, nullptr) << "the communicator was never published";
  EXPECT_EQ(nccl_lamport::lamportAsyncError(*entry), ncclRemoteError) << "not reported failed: " << entry->reason;
}

// The same gone peer seen earlier: NCCL's enqueue of round 1 never finishes (ncclGroupEnd said
// ncclInProgress, and the communicator stays busy). The stream is then not waited for (that
// would take a second full timeout) and round 2 never issued.
TEST(SetupRounds, ARoundOneEnqueueGiveUpEndsTheSetUpWithTheCommunicatorFailed) {
  ncclComm_t comm = fakeComm(0);
  ASSERT_NE(comm, nullptr);
  auto control = std::make_shared<SetupControl>();
  auto device = std::make_shared<StandInDevice>();
  device->finishes[0] = device->finishes[1] = false;
  gBusyFromGroupEnd.store(comm);
  fakeSetHelperCallHook(busyFromGroupEnd);
  EXPECT_TRUE(setUpWithin5s({comm}, control, device))
      << "round 1's enqueue gave up after " << setup_test::kTimeoutMs << " ms, but the set-up did not end";
  fakeSetHelperCallHook(nullptr);
  gBusyFromGroupEnd.store(nullptr);
  expectEndedWithoutRoundTwo(comm, *device);
  cleanUp(comm, control);
}

// NCCL refuses round 1's all-gather on this communicator (here: busy, ncclInvalidArgument): it is
// not part of the group, so the peers never get this rank's record, and the rank must not wait
// for its stream nor run round 2 either.
TEST(SetupRounds, ARoundOneAllGatherNcclRefusedEndsTheSetUpWithTheCommunicatorFailed) {
  ncclComm_t comm = fakeComm(0);
  ASSERT_NE(comm, nullptr);
  auto control = std::make_shared<SetupControl>();
  auto device = std::make_shared<StandInDevice>();
  device->finishes[0] = device->finishes[1] = false;
  device->onStep = [](const char* step, int round, SetupState& s) {
    if (round == 0 && strcmp(step, "upload") == 0) fakeCommBusyFor(s.comm, 3600 * 1000);
  };
  EXPECT_TRUE(setUpWithin5s({comm}, control, device)) << "the set-up did not end after NCCL refused round 1";
  expectEndedWithoutRoundTwo(comm, *device);
  cleanUp(comm, control);
}

}  // namespace
