// The routing policy (tuner/routing.h): which allreduces go to the Lamport one-shot kernel.
// Every input is a value identical on every rank, so these tables are the whole contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/lamport_allreduce.h"
#include "tuner/routing.h"

namespace nccl_lamport {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kSizeMax = std::numeric_limits<size_t>::max();

RoutingTable tableOf(size_t oneShotMaxBytes) {
  RoutingTable table;
  table.oneShotMaxBytes = oneShotMaxBytes;
  return table;
}

AllReducePath route(const RoutingTable& table, ncclDataType_t type, ncclRedOp_t op, size_t count,
                    int nRanks = 2, bool eligible = true) {
  return routeAllReduce(table, eligible, nRanks, type, op, count);
}

bool isSupportedType(ncclDataType_t type) {
  return type == ncclFloat32 || type == ncclFloat16 || type == ncclBfloat16;
}

TEST(RoutingTest, ElementSizes) {
  EXPECT_EQ(lamportElementSize(ncclFloat32), 4u);
  EXPECT_EQ(lamportElementSize(ncclFloat), 4u);
  EXPECT_EQ(lamportElementSize(ncclFloat16), 2u);
  EXPECT_EQ(lamportElementSize(ncclHalf), 2u);
  EXPECT_EQ(lamportElementSize(ncclBfloat16), 2u);
  EXPECT_EQ(lamportElementSize(ncclInt8), 0u);
  EXPECT_EQ(lamportElementSize(ncclUint8), 0u);
  EXPECT_EQ(lamportElementSize(ncclInt32), 0u);
  EXPECT_EQ(lamportElementSize(ncclUint32), 0u);
  EXPECT_EQ(lamportElementSize(ncclInt64), 0u);
  EXPECT_EQ(lamportElementSize(ncclUint64), 0u);
  EXPECT_EQ(lamportElementSize(ncclFloat64), 0u);
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
  EXPECT_EQ(lamportElementSize(ncclFloat8e4m3), 0u);
  EXPECT_EQ(lamportElementSize(ncclFloat8e5m2), 0u);
#endif
  EXPECT_EQ(lamportElementSize(static_cast<ncclDataType_t>(-1)), 0u);
  EXPECT_EQ(lamportElementSize(static_cast<ncclDataType_t>(1000)), 0u);
}

// The one NCCL -> kernel datatype mapping, and element sizes from the kernels' own table.
TEST(RoutingTest, DataTypeMapping) {
  LamportDataType type = LamportDataType::kFloat32;
  ASSERT_TRUE(lamportDataTypeOf(ncclFloat16, &type));
  EXPECT_EQ(type, LamportDataType::kFloat16);
  ASSERT_TRUE(lamportDataTypeOf(ncclBfloat16, &type));
  EXPECT_EQ(type, LamportDataType::kBFloat16);
  ASSERT_TRUE(lamportDataTypeOf(ncclFloat32, &type));
  EXPECT_EQ(type, LamportDataType::kFloat32);
  type = LamportDataType::kBFloat16;
  EXPECT_FALSE(lamportDataTypeOf(ncclInt32, &type));
  EXPECT_FALSE(lamportDataTypeOf(ncclFloat64, &type));
  EXPECT_EQ(type, LamportDataType::kBFloat16);  // untouched
  EXPECT_EQ(lamportElementBytes(LamportDataType::kFloat32), 4u);
  EXPECT_EQ(lamportElementBytes(LamportDataType::kFloat16), 2u);
  EXPECT_EQ(lamportElementBytes(LamportDataType::kBFloat16), 2u);
  EXPECT_EQ(lamportElementBytes(static_cast<LamportDataType>(9)), 0u);
}

TEST(RoutingTest, EveryDatatype) {
  const RoutingTable table = tableOf(64 * kKiB);
  for (int t = 0; t < static_cast<int>(ncclNumTypes); ++t) {
    const ncclDataType_t type = static_cast<ncclDataType_t>(t);
    const AllReducePath expected =
        isSupportedType(type) ? AllReducePath::kLamportOneShot : AllReducePath::kNccl;
    EXPECT_EQ(route(table, type, ncclSum, 16), expected) << "datatype " << t;
    EXPECT_EQ(route(table, type, ncclAvg, 16), expected) << "datatype " << t;
  }
  EXPECT_EQ(route(table, ncclInt32, ncclSum, 16), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat64, ncclSum, 16), AllReducePath::kNccl);
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
  EXPECT_EQ(route(table, ncclFloat8e4m3, ncclSum, 16), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat8e5m2, ncclSum, 16), AllReducePath::kNccl);
#endif
  EXPECT_EQ(route(table, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, 16),
            AllReducePath::kNccl);
  EXPECT_EQ(route(table, static_cast<ncclDataType_t>(-3), ncclSum, 16), AllReducePath::kNccl);
}

TEST(RoutingTest, Ops) {
  const RoutingTable table = tableOf(64 * kKiB);
  EXPECT_TRUE(lamportSupportsOp(ncclSum));
  EXPECT_TRUE(lamportSupportsOp(ncclAvg));
  EXPECT_FALSE(lamportSupportsOp(ncclProd));
  EXPECT_FALSE(lamportSupportsOp(ncclMax));
  EXPECT_FALSE(lamportSupportsOp(ncclMin));
  for (ncclDataType_t type : {ncclFloat32, ncclFloat16, ncclBfloat16}) {
    EXPECT_EQ(route(table, type, ncclSum, 1), AllReducePath::kLamportOneShot);
    EXPECT_EQ(route(table, type, ncclAvg, 1), AllReducePath::kLamportOneShot);
    EXPECT_EQ(route(table, type, ncclProd, 1), AllReducePath::kNccl);
    EXPECT_EQ(route(table, type, ncclMax, 1), AllReducePath::kNccl);
    EXPECT_EQ(route(table, type, ncclMin, 1), AllReducePath::kNccl);
    // ncclRedOpCreatePreMulSum hands out values from ncclNumOps upwards: custom ops go to NCCL.
    EXPECT_EQ(route(table, type, static_cast<ncclRedOp_t>(ncclNumOps), 1), AllReducePath::kNccl);
    EXPECT_EQ(route(table, type, static_cast<ncclRedOp_t>(ncclNumOps + 7), 1),
              AllReducePath::kNccl);
    EXPECT_EQ(route(table, type, ncclMaxRedOp, 1), AllReducePath::kNccl);
    EXPECT_EQ(route(table, type, static_cast<ncclRedOp_t>(-1), 1), AllReducePath::kNccl);
  }
}

TEST(RoutingTest, SingleRankZeroCountAndIneligibleCommGoToNccl) {
  const RoutingTable table = tableOf(64 * kKiB);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, 16, /*nRanks=*/1), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, 16, /*nRanks=*/0), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, 16, /*nRanks=*/-2), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, 0), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, 16, 2, /*eligible=*/false), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, 16, 8), AllReducePath::kLamportOneShot);
}

TEST(RoutingTest, CrossoverIsInclusive) {
  const RoutingTable table = tableOf(64 * kKiB);
  // float32: 16384 elements = exactly 64 KiB.
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, 16384), AllReducePath::kLamportOneShot);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, 16385), AllReducePath::kNccl);
  // 16-bit types: 32768 elements = exactly 64 KiB.
  for (ncclDataType_t type : {ncclFloat16, ncclBfloat16}) {
    EXPECT_EQ(route(table, type, ncclSum, 32768), AllReducePath::kLamportOneShot);
    EXPECT_EQ(route(table, type, ncclSum, 32769), AllReducePath::kNccl);
  }
  // A crossover that is not a multiple of the element size: 10 bytes holds 2 floats, not 3.
  const RoutingTable odd = tableOf(10);
  EXPECT_EQ(route(odd, ncclFloat32, ncclSum, 2), AllReducePath::kLamportOneShot);
  EXPECT_EQ(route(odd, ncclFloat32, ncclSum, 3), AllReducePath::kNccl);
  EXPECT_EQ(route(odd, ncclBfloat16, ncclSum, 5), AllReducePath::kLamportOneShot);
  EXPECT_EQ(route(odd, ncclBfloat16, ncclSum, 6), AllReducePath::kNccl);
  // Smaller than one element: nothing fits.
  const RoutingTable tiny = tableOf(3);
  EXPECT_EQ(route(tiny, ncclFloat32, ncclSum, 1), AllReducePath::kNccl);
  EXPECT_EQ(route(tiny, ncclFloat16, ncclSum, 1), AllReducePath::kLamportOneShot);
  // An empty table sends everything to NCCL.
  const RoutingTable empty = tableOf(0);
  EXPECT_EQ(route(empty, ncclFloat16, ncclSum, 1), AllReducePath::kNccl);
}

TEST(RoutingTest, HugeCountsDoNotOverflow) {
  const RoutingTable table = tableOf(64 * kKiB);
  // count * 4 would wrap to a small number for these; the router must still say NCCL.
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, kSizeMax), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, kSizeMax / 4 + 1), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclFloat32, ncclSum, (kSizeMax / 4 + 1) + 16), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclBfloat16, ncclSum, kSizeMax / 2 + 1), AllReducePath::kNccl);
  EXPECT_EQ(route(table, ncclBfloat16, ncclSum, (size_t{1} << 63) + 8), AllReducePath::kNccl);
  // An unbounded table accepts every count that fits in size_t bytes, and no more.
  const RoutingTable unbounded = tableOf(kSizeMax);
  EXPECT_EQ(route(unbounded, ncclFloat32, ncclSum, kSizeMax / 4), AllReducePath::kLamportOneShot);
  EXPECT_EQ(route(unbounded, ncclFloat32, ncclSum, kSizeMax / 4 + 1), AllReducePath::kNccl);
}

TEST(RoutingTest, DefaultCrossovers) {
  EXPECT_EQ(defaultOneShotMaxBytes(1, 90), 0u);
  EXPECT_EQ(defaultOneShotMaxBytes(0, 90), 0u);
  size_t previous = kSizeMax;
  for (int nRanks : {2, 3, 4, 5, 8, 16, 72}) {
    const size_t bytes = defaultOneShotMaxBytes(nRanks, 90);
    EXPECT_GT(bytes, 0u) << nRanks;
    EXPECT_LE(bytes, previous) << "more ranks must never raise the crossover: " << nRanks;
    previous = bytes;
  }
}

TEST(RoutingTest, OverrideAndWorkspaceClamp) {
  const size_t builtIn = defaultOneShotMaxBytes(2, 90);
  // No override, room to spare: the built-in value.
  EXPECT_EQ(makeRoutingTable(2, 90, 0, kSizeMax).oneShotMaxBytes, builtIn);
  // The override replaces the built-in value, larger or smaller.
  EXPECT_EQ(makeRoutingTable(2, 90, 1 * kMiB, kSizeMax).oneShotMaxBytes, 1 * kMiB);
  EXPECT_EQ(makeRoutingTable(8, 90, 32 * kMiB, kSizeMax).oneShotMaxBytes, 32 * kMiB);
  EXPECT_EQ(makeRoutingTable(2, 90, 1, kSizeMax).oneShotMaxBytes, 1u);
  // The workspace clamps both.
  EXPECT_EQ(makeRoutingTable(2, 90, 0, 4 * kMiB).oneShotMaxBytes, std::min(builtIn, 4 * kMiB));
  EXPECT_EQ(makeRoutingTable(2, 90, 1024 * kMiB, 4 * kMiB).oneShotMaxBytes, 4 * kMiB);
  EXPECT_EQ(makeRoutingTable(2, 90, 1 * kMiB, 0).oneShotMaxBytes, 0u);
  // nRanks 1: nothing by default; an override still goes through the clamp, but the router
  // refuses single-rank communicators anyway.
  EXPECT_EQ(makeRoutingTable(1, 90, 0, kSizeMax).oneShotMaxBytes, 0u);
  const RoutingTable single = makeRoutingTable(1, 90, 1 * kMiB, kSizeMax);
  EXPECT_EQ(route(single, ncclFloat32, ncclSum, 16, 1), AllReducePath::kNccl);
}

}  // namespace
}  // namespace nccl_lamport

namespace nccl_lamport {
namespace {

RoutingTable tableOf(size_t oneShotMaxBytes, size_t twoShotMaxBytes) {
  RoutingTable table;
  table.oneShotMaxBytes = oneShotMaxBytes;
  table.twoShotMaxBytes = twoShotMaxBytes;
  return table;
}

TEST(RoutingTwoShotTest, OneShotThenTwoShotThenNccl) {
  const RoutingTable table = tableOf(256 * kKiB, 1 * kMiB);
  for (int nRanks : {4, 5, 8, 72}) {
    EXPECT_EQ(route(table, ncclBfloat16, ncclSum, 128 * 1024, nRanks), AllReducePath::kLamportOneShot);
    EXPECT_EQ(route(table, ncclBfloat16, ncclSum, 128 * 1024 + 1, nRanks), AllReducePath::kLamportTwoShot);
    EXPECT_EQ(route(table, ncclBfloat16, ncclAvg, 512 * 1024, nRanks), AllReducePath::kLamportTwoShot);
    EXPECT_EQ(route(table, ncclBfloat16, ncclSum, 512 * 1024 + 1, nRanks), AllReducePath::kNccl);
    EXPECT_EQ(route(table, ncclFloat32, ncclSum, 256 * 1024, nRanks), AllReducePath::kLamportTwoShot);
    EXPECT_EQ(route(table, ncclFloat32, ncclMax, 256 * 1024, nRanks), AllReducePath::kNccl);
    EXPECT_EQ(route(table, ncclInt32, ncclSum, 256 * 1024, nRanks), AllReducePath::kNccl);
    EXPECT_EQ(route(table, ncclFloat32, ncclSum, 256 * 1024, nRanks, /*eligible=*/false), AllReducePath::kNccl);
  }
  // Never two-shot below 4 ranks, whatever the table says.
  for (int nRanks : {2, 3}) {
    EXPECT_EQ(route(table, ncclBfloat16, ncclSum, 128 * 1024 + 1, nRanks), AllReducePath::kNccl);
  }
  EXPECT_EQ(route(tableOf(256 * kKiB, 0), ncclBfloat16, ncclSum, 128 * 1024 + 1, 8), AllReducePath::kNccl);
}

TEST(RoutingTwoShotTest, CapacityMatchesTheKernelsChunkRule) {
  // The kernel needs 2 * ceil(vectors / nRanks) * 16 <= slotBytes (kernels/lamport_twoshot.cuh).
  for (int nRanks : {2, 3, 4, 5, 8, 72}) {
    for (size_t slot : {size_t{16}, size_t{32}, size_t{48}, 1000 * size_t{16}, 256 * kKiB, 16 * kMiB}) {
      const size_t capacity = twoShotCapacityBytes(nRanks, slot);
      auto fits = [&](size_t bytes) {
        const size_t vectors = (bytes + 15) / 16;
        return 2 * ((vectors + nRanks - 1) / nRanks) * 16 <= slot;
      };
      if (capacity > 0) EXPECT_TRUE(fits(capacity)) << nRanks << " ranks, slot " << slot;
      EXPECT_FALSE(fits(capacity + 16 * static_cast<size_t>(nRanks))) << nRanks << " ranks, slot " << slot;
    }
  }
  EXPECT_EQ(twoShotCapacityBytes(8, 256 * kKiB), 1 * kMiB);
  EXPECT_EQ(twoShotCapacityBytes(1, 256 * kKiB), 0u);
}

TEST(RoutingTwoShotTest, AgreedBoundIsOffByDefaultClampedAndAboveTheOneShot) {
  EXPECT_EQ(defaultTwoShotMaxBytes(8, 90), 0u) << "off until measured (SPEC 6)";
  EXPECT_EQ(agreedTwoShotMaxBytes(8, 90, 0, 256 * kKiB, 256 * kKiB), 0u);
  EXPECT_EQ(agreedTwoShotMaxBytes(8, 90, 8 * kMiB, 256 * kKiB, 256 * kKiB), 1 * kMiB) << "clamped to the slot";
  EXPECT_EQ(agreedTwoShotMaxBytes(4, 90, 768 * kKiB, 256 * kKiB, 256 * kKiB), 512 * kKiB);
  EXPECT_EQ(agreedTwoShotMaxBytes(8, 90, 512 * kKiB, 256 * kKiB, 4 * kMiB), 512 * kKiB);
  EXPECT_EQ(agreedTwoShotMaxBytes(8, 90, 128 * kKiB, 256 * kKiB, 4 * kMiB), 0u) << "not above the one-shot";
  EXPECT_EQ(agreedTwoShotMaxBytes(2, 90, 8 * kMiB, 256 * kKiB, 4 * kMiB), 0u);
  EXPECT_EQ(agreedTwoShotMaxBytes(3, 90, 8 * kMiB, 256 * kKiB, 4 * kMiB), 0u);
}

}  // namespace
}  // namespace nccl_lamport

namespace nccl_lamport {
namespace {

// Breaker sweep (routing review): whatever path routeAllReduce picks on a communicator's agreed
// table (settleVerdict: oneShotMaxBytes = agreed slot, twoShotMaxBytes = agreedTwoShotMaxBytes),
// the call passes the launcher's own checks (kernels/lamport_launch.cu, argsValid): one-shot
// count <= slot / elem; two-shot 2 * ceil(vectors / nRanks) * 16 <= slot and at most 2^31 vectors.
// Covers non-power-of-two ranks, fp16/bf16 byte counts that are no multiple of 16, knob extremes
// (1, 15, 16, 17, just around the capacity, huge) and counts smaller than nRanks.
bool kernelAccepts(AllReducePath path, int nRanks, size_t slot, size_t elem, size_t count) {
  if (slot == 0 || slot % 16 != 0 || slot > UINT32_MAX - 15) return false;
  if (path == AllReducePath::kLamportOneShot) return count <= slot / elem;
  const size_t vectors = (count * elem + 15) / 16;
  const size_t chunk = (vectors + nRanks - 1) / nRanks;
  return count <= (size_t{1} << 31) * 16 / elem && 2 * chunk * 16 <= slot;
}

TEST(RoutingSweep, EveryRoutedCallFitsTheAgreedSlot) {
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat16, ncclBfloat16};
  for (int nRanks : {2, 3, 4, 5, 6, 7, 8, 9, 16, 72}) {
    for (size_t slot : {size_t{16}, size_t{32}, size_t{48}, size_t{64}, size_t{80}, size_t{4080}, 256 * kKiB,
                        512 * kKiB + 16, 16 * kMiB, 256 * kMiB}) {
      const size_t cap = twoShotCapacityBytes(nRanks, slot);
      for (size_t twoShotKnob : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, slot, slot + 1, cap - 1 + (cap == 0),
                                 cap, cap + 1, cap + 16, kSizeMax}) {
        RoutingTable table;
        table.oneShotMaxBytes = slot;
        table.twoShotMaxBytes = agreedTwoShotMaxBytes(nRanks, 90, twoShotKnob, slot, slot);
        for (ncclDataType_t type : types) {
          const size_t elem = lamportElementSize(type);
          std::vector<size_t> counts;
          for (size_t c = 1; c <= 3 * static_cast<size_t>(nRanks) + 3; ++c) counts.push_back(c);
          for (size_t bound : {table.oneShotMaxBytes, table.twoShotMaxBytes}) {
            for (size_t d = 0; d < 3; ++d) {
              counts.push_back(bound / elem + d);
              if (bound / elem >= d) counts.push_back(bound / elem - d);
            }
          }
          for (size_t count : counts) {
            for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
              const AllReducePath path = routeAllReduce(table, true, nRanks, type, op, count);
              if (path == AllReducePath::kNccl) continue;
              EXPECT_TRUE(kernelAccepts(path, nRanks, slot, elem, count))
                  << "nRanks " << nRanks << " slot " << slot << " knob " << twoShotKnob << " type " << type
                  << " count " << count << " path " << static_cast<int>(path);
              if (path == AllReducePath::kLamportTwoShot) EXPECT_GE(nRanks, kTwoShotMinRanks);
            }
          }
        }
      }
    }
  }
}

// The two-shot bound stays under the launcher's 2^31-vector limit (argsValid: the kernel counts
// vectors in uint32_t), not only under the slot. Reachable only with more than 16 ranks, a slot
// near the 4 GiB layout limit and NCCL_LAMPORT_TWOSHOT_MAX_BYTES >= 32 GiB: a routed call was then
// refused by the launcher (ncclUnhandledCudaError instead of NCCL's answer). Failed before the fix
// of session 14 (tuner/routing.cc, twoShotCapacityBytes).
TEST(RoutingSweep, TwoShotBoundStaysUnderTheLaunchersVectorLimit) {
  const size_t largestSlot = (size_t{UINT32_MAX} - 15) / 16 * 16;  // layoutValid's limit
  for (int nRanks : {17, 32, 72}) {
    const size_t bound = agreedTwoShotMaxBytes(nRanks, 90, kSizeMax, largestSlot, largestSlot);
    for (ncclDataType_t type : {ncclFloat32, ncclFloat16, ncclBfloat16}) {
      const size_t elem = lamportElementSize(type);
      EXPECT_LE(bound / elem, (size_t{1} << 31) * 16 / elem) << nRanks << " ranks, type " << type;
    }
  }
}

// The one-shot knob as prepareLocal applies it: min(knob or built-in, capSlot), rounded up to 16.
// capSlot is a multiple of 16 (maxSlotBytesForCap), so the rounding never passes the clamp.
TEST(RoutingSweep, RoundingUpNeverPassesTheWorkspaceClamp) {
  for (int nRanks : {2, 3, 5, 7, 8}) {
    for (size_t capSlot : {size_t{0}, size_t{16}, size_t{32}, 4 * kKiB, 256 * kKiB, 21 * kMiB + 16}) {
      for (size_t knob : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, capSlot - 1 + (capSlot == 0),
                          capSlot, capSlot + 1, kSizeMax}) {
        const size_t max = makeRoutingTable(nRanks, 90, knob, capSlot).oneShotMaxBytes;
        const size_t slot = (max + 15) / 16 * 16;
        EXPECT_LE(slot, capSlot) << nRanks << " " << capSlot << " " << knob;
        EXPECT_GE(slot, max);
      }
    }
  }
}

}  // namespace
}  // namespace nccl_lamport
