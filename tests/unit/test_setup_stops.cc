// Communicators created together share one set-up (one grouped exchange). Aborting or revoking
// one of them stops the set-up for that one only (SetupControl::stop): the others take part in
// both rounds with their peers, whose exchange would otherwise wait for them (before round 2 was
// issued) or publish them ON while this rank dropped them (after), a hang either way. No NCCL
// call reaches the stopped one afterwards. Stand-in NCCL and stand-in device side, as
// tests/unit/test_setup_rounds.cc.
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/setup_control.h"
#include "tests/unit/setup_test_support.h"
#include "tests/unit/stand_in_round_device.h"

namespace {

using nccl_lamport::SetupControl;
using nccl_lamport::SetupState;
using setup_test::fakeComm;
using setup_test::StandInDevice;

/** What the stand-in NCCL saw from the set-up's thread, per communicator of the test. */
struct Seen {
  std::atomic<ncclComm_t> sibling{nullptr}, stopped{nullptr};
  std::atomic<bool> stopDone{false};
  std::atomic<int> siblingAllGathers{0}, stoppedAllGathers{0}, callsAfterStop{0};
};
Seen gSeen;

void countCalls(const char* function, ncclComm_t comm) {
  if (comm == nullptr) return;
  const bool allGather = strcmp(function, "ncclAllGather") == 0;
  if (comm == gSeen.sibling.load() && allGather) ++gSeen.siblingAllGathers;
  if (comm == gSeen.stopped.load()) {
    if (allGather) ++gSeen.stoppedAllGathers;
    if (gSeen.stopDone.load()) ++gSeen.callsAfterStop;
  }
}

/** As cancelDeferredSetup does for an aborted communicator. */
void stopComm(SetupControl& control, ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(control.ncclMutex);
  control.stop(comm);
  gSeen.stopDone.store(true);
}

/** Sets up {sibling, stopped}, stops the second when the sibling reaches device step stopStep of
 *  round stopRound (0, 1), and checks what every such stop must leave. */
void setUpAndStopOne(int stopRound, const char* stopStep, int finishAfterMs) {
  ncclComm_t sibling = fakeComm(0);
  ncclComm_t stopped = fakeComm(0);
  ASSERT_NE(sibling, nullptr);
  ASSERT_NE(stopped, nullptr);
  gSeen.stopDone.store(false);
  gSeen.siblingAllGathers.store(0);
  gSeen.stoppedAllGathers.store(0);
  gSeen.callsAfterStop.store(0);
  gSeen.sibling.store(sibling);
  gSeen.stopped.store(stopped);
  fakeSetHelperCallHook(countCalls);
  auto control = std::make_shared<SetupControl>(std::vector<ncclComm_t>{sibling, stopped});
  auto device = std::make_shared<StandInDevice>();
  device->finishAfterMs[1] = finishAfterMs;
  device->onStep = [control, sibling, stopped, stopRound, stopStep](const char* step, int round, SetupState& s) {
    if (s.comm == sibling && round == stopRound && strcmp(step, stopStep) == 0) stopComm(*control, stopped);
  };
  EXPECT_TRUE(setup_test::setUpWithin5s({sibling, stopped}, control, device));
  fakeSetHelperCallHook(nullptr);
  EXPECT_TRUE(gSeen.stopDone.load()) << "the test never stopped the communicator";
  EXPECT_EQ(gSeen.siblingAllGathers.load(), 2) << "the sibling did not take part in both rounds";
  EXPECT_EQ(gSeen.callsAfterStop.load(), 0) << "NCCL was called on the stopped communicator";
  const auto entry = nccl_lamport::CommRegistry::instance().find(sibling);
  EXPECT_NE(entry, nullptr) << "the sibling was not published: it stays 'in progress' on this rank only";
  if (entry != nullptr) {
    EXPECT_EQ(entry->reason.find("exchange failed"), std::string::npos) << entry->reason;
  }
  EXPECT_EQ(nccl_lamport::CommRegistry::instance().find(stopped), nullptr) << "the stopped communicator was published";
  {
    std::lock_guard<std::mutex> lock(control->ncclMutex);  // let a set-up still waiting (failed test) end
    control->cancelled.store(true);
  }
  nccl_lamport::CommRegistry::instance().remove(sibling);
  nccl_lamport::CommRegistry::instance().remove(stopped);
}

// Before round 2 is issued (at the sibling's round-2 upload): the sibling's peers will wait for
// its round-2 word.
TEST(SetupStops, StoppingOneBeforeRoundTwoLeavesItsSiblingInRoundTwo) {
  setUpAndStopOne(/*stopRound=*/1, "upload", /*finishAfterMs=*/0);
  EXPECT_EQ(gSeen.stoppedAllGathers.load(), 1) << "round 2 was issued on the stopped communicator";
}

// After round 2 was issued, while the sibling waits for it: the sibling's peers publish from the
// words they got, so this rank must publish the sibling from the same words.
TEST(SetupStops, StoppingOneAfterRoundTwoWasIssuedLetsItsSiblingFinish) {
  setUpAndStopOne(/*stopRound=*/1, "wait", /*finishAfterMs=*/50);
}

}  // namespace
