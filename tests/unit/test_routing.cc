// The routing policy (tuner/routing.h): which allreduces go to the Lamport one-shot kernel.
// Every input is a value identical on every rank, so these tables are the whole contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>

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
