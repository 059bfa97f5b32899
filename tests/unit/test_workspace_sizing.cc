// How big a rank's Lamport workspace slot is (plugin/comm/workspace_mapping.h): never more than the
// workspace cap holds nor more than the kernels take, so a large crossover knob shrinks to fit
// (README, NCCL_LAMPORT_WORKSPACE_MAX_BYTES) instead of allocating a workspace the kernels refuse.
// No GPU: the sizing is arithmetic on the knobs.
#include <gtest/gtest.h>

#include <cstddef>

#include "kernels/lamport_layout.h"
#include "plugin/comm/workspace_mapping.h"

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

}  // namespace
