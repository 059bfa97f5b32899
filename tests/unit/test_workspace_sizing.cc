// The bounds of a rank's side of the set-up that come from the knobs (plugin/comm/workspace_mapping.h):
// the slot is never more than the workspace cap holds nor more than the kernels take, so a large
// crossover knob shrinks to fit (README, NCCL_LAMPORT_WORKSPACE_MAX_BYTES) instead of allocating a
// workspace the kernels refuse; the descriptor exchange with the peers is bounded by
// NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS. No GPU: arithmetic on the knobs.
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "common/config.h"
#include "kernels/lamport_layout.h"
#include "plugin/comm/workspace_mapping.h"
#include "tuner/routing.h"

namespace {

constexpr size_t kGiB = size_t{1} << 30;

// NCCL_LAMPORT_ONESHOT_MAX_BYTES=4G NCCL_LAMPORT_WORKSPACE_MAX_BYTES=16G on 2 ranks: 3 slots of
// 4 GiB fit the cap, but a 4 GiB slot is 16 bytes over the kernels' limit; before, the rank
// allocated the 12 GiB and then left the communicator on NCCL.
TEST(WorkspaceSizing, ALargeCrossoverShrinksToWhatTheKernelsTake) {
  for (int nRanks : {2, 3}) {
    const size_t slot = nccl_lamport::proposedSlotBytes(nRanks, 90, 4 * kGiB, 16 * kGiB);
    EXPECT_GT(slot, 0u) << nRanks << " ranks";
    EXPECT_LE(slot, nccl_lamport::kLamportMaxSlotBytes) << nRanks << " ranks";
    EXPECT_EQ(slot % nccl_lamport::kLamportVectorBytes, 0u) << nRanks << " ranks";
    EXPECT_LE(nccl_lamport::LamportLayout({nRanks, slot}).totalBytes(), 16 * kGiB) << nRanks << " ranks";
  }
  // A crossover that is no multiple of 16 is rounded up, still within the kernels' limit.
  EXPECT_LE(nccl_lamport::proposedSlotBytes(2, 90, 4 * kGiB - 3, 64 * kGiB), nccl_lamport::kLamportMaxSlotBytes);
  EXPECT_LE(nccl_lamport::maxSlotBytesForCap(2, 64 * kGiB), nccl_lamport::kLamportMaxSlotBytes);
}

// The cap still wins where it is the smaller bound, and a cap with no room leaves no slot.
TEST(WorkspaceSizing, TheCapStillBoundsTheSlot) {
  EXPECT_EQ(nccl_lamport::proposedSlotBytes(2, 90, 4 * kGiB, size_t{64} << 20),
            nccl_lamport::maxSlotBytesForCap(2, size_t{64} << 20));
  EXPECT_LE(nccl_lamport::LamportLayout({2, nccl_lamport::maxSlotBytesForCap(2, size_t{64} << 20)}).totalBytes(),
            size_t{64} << 20);
  EXPECT_EQ(nccl_lamport::proposedSlotBytes(2, 90, 0, 200), 0u);
}

// One peer's descriptor fetch (or serve) during set-up is bounded like the rest of the
// host-local meeting, NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS (10 s by default), not a minute per peer
// inside NCCL's init.
TEST(WorkspaceMapping, TheFdExchangeIsBoundedByTheRendezvousTimeout) {
  nccl_lamport::Config config;
  EXPECT_EQ(nccl_lamport::fdExchangeTimeoutMs(config), 10000);
  config.rendezvousTimeoutMs = 1234;
  EXPECT_EQ(nccl_lamport::fdExchangeTimeoutMs(config), 1234);
  config.rendezvousTimeoutMs = uint64_t{30} * 24 * 3600 * 1000;  // the knob's largest value
  EXPECT_EQ(nccl_lamport::fdExchangeTimeoutMs(config), INT_MAX);
}

// A launch cap of maxCtas blocks (config.maxCTAs / NCCL_MAX_CTAS) bounds the slot, and so the
// crossover every rank agrees on (the minimum of the proposals), at what that many blocks carry.
TEST(WorkspaceSizing, ACtaCapShrinksTheSlotToWhatItsBlocksCarry) {
  constexpr size_t kCap = size_t{50} << 20;
  const size_t uncapped = nccl_lamport::proposedSlotBytes(2, 90, 0, kCap);
  EXPECT_EQ(nccl_lamport::proposedSlotBytes(2, 90, 0, kCap, 0), uncapped);
  EXPECT_EQ(nccl_lamport::proposedSlotBytes(2, 90, 0, kCap, 8), nccl_lamport::cappedOneShotMaxBytes(8));
  EXPECT_EQ(nccl_lamport::cappedOneShotMaxBytes(8), size_t{128} << 10);
  EXPECT_EQ(nccl_lamport::proposedSlotBytes(2, 90, 0, kCap, 1 << 20), uncapped);  // a cap above the need
  EXPECT_EQ(nccl_lamport::proposedSlotBytes(2, 90, 4096, kCap, 8), 4096u);        // a lower override stays
}

}  // namespace
