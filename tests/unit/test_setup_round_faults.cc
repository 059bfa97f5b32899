// Host memory running out on the set-up thread while it runs the exchange rounds
// (plugin/comm/exchange_rounds.h), with the stand-in device of tests/unit/stand_in_round_device.h,
// which, unlike the stand-in NCCL alone, gives every state exchange buffers: each C++ allocation
// of the set-up fails in turn (the program's operator new, tests/shim/alloc_faults.cc). A rank
// may leave before round 1 (its peers' round 1 gives up on it, as on a peer gone) but never
// between the rounds: round 2 has no deadline, and its peers would wait in it for ever.
// SKIPPED where a sanitizer's runtime owns operator new.
#include <gtest/gtest.h>
#include <nccl.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/setup_control.h"
#include "plugin/comm/workspace_setup.h"
#include "tests/shim/alloc_faults.h"
#include "tests/unit/setup_test_support.h"
#include "tests/unit/stand_in_round_device.h"

namespace {

using setup_test::StandInDevice;

constexpr int kMaxSweep = 200;

/** setupWorkspaces(comms) over the stand-in device on a thread of its own whose k-th C++
 *  allocation throws (k <= 0: none armed at the start; the device's onStep may arm one); returns
 *  whether the armed allocation was reached, with the rounds each state took part in. */
bool setUpFailingAllocation(int k, std::vector<ncclComm_t> comms, StandInDevice& device) {
  auto control = std::make_shared<nccl_lamport::SetupControl>();
  const auto fired = setup_test::within<bool>(std::chrono::seconds(5), [&] {
    allocFaultArm(k);
    try {
      nccl_lamport::SetupOptions options;
      options.nonBlocking = true;
      options.control = control.get();
      options.device = &device;
      nccl_lamport::setupWorkspaces(comms, options);
    } catch (...) {  // runBatch's catch (plugin/comm/deferred_setup.cc) takes this in the product
    }
    const bool reached = allocFaultFired() != 0;
    allocFaultArm(0);
    return reached;
  });
  EXPECT_TRUE(fired.has_value()) << "allocation " << k << " failing: the set-up did not end within 5 s";
  for (ncclComm_t comm : comms) nccl_lamport::CommRegistry::instance().remove(comm);
  return fired.value_or(false);
}

TEST(SetupRoundFaults, NoAllocationFailureStopsARankBetweenTheRounds) {
  if (!allocFaultsAvailable()) GTEST_SKIP() << "a sanitizer's runtime owns operator new: no failure can be injected";
  ncclComm_t comm = setup_test::fakeComm(0);
  ASSERT_NE(comm, nullptr);
  fakeCommBusyFor(comm, 0);  // ready now (also what links the stand-in: its pnccl* are found by name)
  int k = 1;
  int withoutRounds = 0;
  for (; k <= kMaxSweep; ++k) {
    StandInDevice device;
    const bool reached = setUpFailingAllocation(k, {comm}, device);
    const int first = device.uploads[0].load(), second = device.uploads[1].load();
    ASSERT_EQ(first, second) << "allocation " << k << " failing: the rank took part in round 1 " << first
                             << " time(s) and in round 2 " << second << " time(s); its peers wait in round 2 for ever";
    ASSERT_LE(first, 1) << "allocation " << k;
    if (first == 0) ++withoutRounds;
    if (!reached) break;
  }
  ASSERT_LE(k, kMaxSweep) << "the sweep never got past the set-up's last allocation";
  // Guards the sweep itself: a set-up over the stand-in allocates before, in and after its rounds.
  EXPECT_GE(k - 1, 4) << "only " << k - 1 << " allocation(s) failed in turn";
  EXPECT_LT(withoutRounds, k - 1) << "no failing allocation was reached once the rounds had begun";
  std::printf("each of the %d allocation(s) of the set-up failed in turn; %d of them before round 1\n", k - 1,
              withoutRounds);
}

/** The stand-in device, but `noBuffers` has no exchange buffers and no reason yet (both of its
 *  texts failed for want of memory), so the rounds would be the first to write one. */
class OneWithoutBuffers : public StandInDevice {
 public:
  ncclComm_t noBuffers = nullptr;
  bool hasBuffers(const nccl_lamport::SetupState& s) override {
    if (s.comm != noBuffers) return true;
    std::string().swap(const_cast<nccl_lamport::SetupState&>(s).why);  // empty, without capacity
    return false;
  }
};

// Found by a review: a batch member without buffers got its reason written after round 1, and
// that allocation failing took its sibling out of round 2.
TEST(SetupRoundFaults, ASiblingWithoutBuffersCannotTakeTheOthersOutOfRoundTwo) {
  if (!allocFaultsAvailable()) GTEST_SKIP() << "a sanitizer's runtime owns operator new: no failure can be injected";
  ncclComm_t a = setup_test::fakeComm(0), b = setup_test::fakeComm(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  fakeCommBusyFor(a, 0);
  fakeCommBusyFor(b, 0);
  OneWithoutBuffers device;
  device.noBuffers = a;
  // From round 1's upload on, the set-up thread's next allocation fails.
  device.onStep = [](const char* step, int round, nccl_lamport::SetupState&) {
    if (round == 0 && std::string(step) == "upload") allocFaultArm(1);
  };
  const bool fired = setUpFailingAllocation(0, {a, b}, device);
  EXPECT_TRUE(fired) << "no allocation was reached after round 1's upload: the test no longer covers the path";
  EXPECT_EQ(device.uploads[0].load(), 1);
  EXPECT_EQ(device.uploads[1].load(), device.uploads[0].load())
      << "b took part in round 1 but not in round 2: its peers wait in round 2 for ever";
}

}  // namespace
