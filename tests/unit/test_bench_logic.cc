// CPU tests of nccl-lamport-bench's pure logic: option parsing, the size sweep, conversions,
// inputs, reference, tolerances, ulp distance, hash, aggregation across ranks and report formats.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/correctness.h"
#include "bench/crossover.h"
#include "bench/progress.h"
#include "bench/rank_results.h"
#include "bench/report.h"
#include "bench/stats.h"

namespace nccl_lamport::bench {
namespace {

// ---- options and sizes ----

TEST(BenchOptions, ParsesByteCountsWithBinarySuffixes) {
  size_t v = 0;
  EXPECT_TRUE(parseByteSize("8", &v));
  EXPECT_EQ(v, 8u);
  EXPECT_TRUE(parseByteSize("8K", &v));
  EXPECT_EQ(v, 8192u);
  EXPECT_TRUE(parseByteSize("8k", &v));
  EXPECT_EQ(v, 8192u);
  EXPECT_TRUE(parseByteSize("16M", &v));
  EXPECT_EQ(v, size_t{16} << 20);
  EXPECT_TRUE(parseByteSize("1G", &v));
  EXPECT_EQ(v, size_t{1} << 30);
  EXPECT_TRUE(parseByteSize("64KiB", &v));
  EXPECT_EQ(v, 65536u);
  EXPECT_TRUE(parseByteSize("64KB", &v));
  EXPECT_EQ(v, 65536u);
  EXPECT_TRUE(parseByteSize("100B", &v));
  EXPECT_EQ(v, 100u);
}

TEST(BenchOptions, RejectsBadByteCounts) {
  size_t v = 7;
  for (const char* bad : {"", "-1", "1.5K", "K", "12X", "8 K", "8KK", "8Kx", "99999999999999999999",
                          "17179869184G"}) {
    EXPECT_FALSE(parseByteSize(bad, &v)) << bad;
  }
  EXPECT_EQ(v, 7u);
}

TEST(BenchProgress, LineNamesSizeIndexAndPhase) {
  EXPECT_EQ(formatProgress(4, 22, 4096, "graph"), "nccl-lamport-bench: size 5/22: 4K bytes, graph");
  EXPECT_EQ(formatProgress(0, 1, 3000, "check"), "nccl-lamport-bench: size 1/1: 3000 bytes, check");
}

TEST(BenchProgress, OnlyOnATerminalAndNotWhenQuiet) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_FALSE(progressWanted(false, fds[1]));  // stderr redirected to a pipe or file: no line
  EXPECT_FALSE(progressWanted(true, fds[1]));
  close(fds[0]);
  close(fds[1]);
}

TEST(BenchOptions, ShortByteLabels) {
  EXPECT_EQ(formatByteSize(8), "8");
  EXPECT_EQ(formatByteSize(2048), "2K");
  EXPECT_EQ(formatByteSize(size_t{16} << 20), "16M");
  EXPECT_EQ(formatByteSize(3000), "3000");
  EXPECT_EQ(formatByteSize(0), "0");
}

TEST(BenchOptions, DefaultSweepIsPowersOfTwoFrom8BytesTo16MiB) {
  std::string error;
  const auto sizes = makeSizeList(8, size_t{16} << 20, 2.0, 2, &error);
  ASSERT_EQ(sizes.size(), 22u) << error;
  EXPECT_EQ(sizes.front().bytes, 8u);
  EXPECT_EQ(sizes.front().count, 4u);
  EXPECT_EQ(sizes.back().bytes, size_t{16} << 20);
  EXPECT_EQ(sizes.back().count, size_t{8} << 20);
  for (size_t i = 1; i < sizes.size(); ++i) EXPECT_EQ(sizes[i].bytes, 2 * sizes[i - 1].bytes);
}

TEST(BenchOptions, SweepRoundsToWholeElementsAndDropsDuplicates) {
  std::string error;
  auto sizes = makeSizeList(1, 16, 2.0, 4, &error);  // 1, 2 -> one element; 4, 8, 16
  ASSERT_EQ(sizes.size(), 3u);
  EXPECT_EQ(sizes[0].bytes, 4u);
  EXPECT_EQ(sizes[0].count, 1u);
  EXPECT_EQ(sizes[2].bytes, 16u);
  sizes = makeSizeList(1000, 5000, 1.5, 2, &error);  // 1000, 1500, 2250, 3374, 5062 > max
  ASSERT_EQ(sizes.size(), 4u);
  EXPECT_EQ(sizes[3].bytes, 3374u);
  for (const SizeSpec& s : sizes) EXPECT_EQ(s.bytes, s.count * 2);
  sizes = makeSizeList(6, 6, 2.0, 4, &error);  // odd sizes stay possible: 6 B of fp32 -> 1 element
  ASSERT_EQ(sizes.size(), 1u);
  EXPECT_EQ(sizes[0].bytes, 4u);
}

TEST(BenchOptions, SweepRejectsInvalidRanges) {
  std::string error;
  EXPECT_TRUE(makeSizeList(16, 8, 2.0, 2, &error).empty());
  EXPECT_NE(error.find("--max-bytes"), std::string::npos);
  EXPECT_TRUE(makeSizeList(8, 16, 1.0, 2, &error).empty());
  EXPECT_NE(error.find("--step-factor"), std::string::npos);
  EXPECT_TRUE(makeSizeList(0, 16, 2.0, 2, &error).empty());
  EXPECT_TRUE(makeSizeList(1, 1, 2.0, 2, &error).empty());  // less than one bf16 element
  EXPECT_TRUE(makeSizeList(1, size_t{1} << 40, 1.01, 2, &error).empty());  // > kMaxSizes sizes
  EXPECT_TRUE(makeSizeList(8, 16, 1.0 + 1e-12, 2, &error).empty());
}

TEST(BenchOptions, NamesAndAliases) {
  DType d;
  EXPECT_TRUE(parseDType("bf16", &d));
  EXPECT_EQ(d, DType::kBf16);
  EXPECT_TRUE(parseDType("half", &d));
  EXPECT_EQ(d, DType::kFp16);
  EXPECT_TRUE(parseDType("FP32", &d));
  EXPECT_EQ(d, DType::kFp32);
  EXPECT_FALSE(parseDType("int8", &d));
  ReduceOp op;
  EXPECT_TRUE(parseReduceOp("avg", &op));
  EXPECT_EQ(op, ReduceOp::kAvg);
  EXPECT_FALSE(parseReduceOp("max", &op));
  TimingMode mode;
  EXPECT_TRUE(parseTimingMode("graph", &mode));
  EXPECT_EQ(mode, TimingMode::kGraph);
  EXPECT_FALSE(parseTimingMode("all", &mode));
  EXPECT_STREQ(name(DType::kBf16), "bf16");
  EXPECT_EQ(toNccl(DType::kBf16), ncclBfloat16);
  EXPECT_EQ(toNccl(ReduceOp::kAvg), ncclAvg);
  EXPECT_EQ(elementSize(DType::kFp32), 4u);
}

TEST(BenchOptions, ShellJoinQuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(shellJoin({"nccl-lamport-bench", "--max-bytes", "16M", "--json", "/tmp/a b.json"}),
            "nccl-lamport-bench --max-bytes 16M --json '/tmp/a b.json'");
  EXPECT_EQ(shellJoin({"x", "it's", ""}), "x 'it'\\''s' ''");
}

// ---- conversions ----

TEST(Conversions, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie, to even
  EXPECT_EQ(floatToBf16Bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, to even (up)
  EXPECT_EQ(floatToBf16Bits(-2.0f), 0xc000);
  EXPECT_EQ(floatToBf16Bits(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16BitsToFloat(floatToBf16Bits(NAN))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = bf16BitsToFloat(static_cast<uint16_t>(bits));
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToBf16Bits(f), bits) << bits;
    }
  }
}

TEST(Conversions, HalfRoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(floatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);      // tie, to even (zero)
  EXPECT_EQ(floatToHalfBits(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie, to even (up)
  EXPECT_EQ(floatToHalfBits(-std::ldexp(1.0f, -14)), 0x8400);
  EXPECT_EQ(floatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, to even
  EXPECT_EQ(floatToHalfBits(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(halfBitsToFloat(floatToHalfBits(NAN))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = halfBitsToFloat(static_cast<uint16_t>(bits));
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToHalfBits(f), bits) << bits;
    }
  }
}

TEST(Conversions, LoadAndStoreElements) {
  unsigned char buffer[16];
  for (DType dtype : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    storeElement(buffer, 1, dtype, -1.5f);
    EXPECT_EQ(loadElement(buffer, 1, dtype), -1.5) << name(dtype);
  }
}

// ---- inputs and reference ----

TEST(Inputs, AreDeterministicRepresentableAndDistinctPerRankAndSize) {
  for (DType dtype : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    const uint64_t seed = inputSeed(42, 1, 4096);
    EXPECT_EQ(seed, inputSeed(42, 1, 4096));
    EXPECT_NE(seed, inputSeed(42, 0, 4096));
    EXPECT_NE(seed, inputSeed(42, 1, 8192));
    EXPECT_NE(seed, inputSeed(43, 1, 4096));
    int negative = 0;
    for (size_t i = 0; i < 4096; ++i) {
      const float v = inputValue(seed, i, dtype);
      ASSERT_GE(v, -1.0f);
      ASSERT_LE(v, 1.0f);  // bf16 rounding can reach 1.0 itself
      ASSERT_EQ(roundToDType(v, dtype), v);
      ASSERT_FALSE(v == 0.0f && std::signbit(v)) << "no -0.0 in the inputs";
      negative += v < 0 ? 1 : 0;
    }
    EXPECT_GT(negative, 1800);
    EXPECT_LT(negative, 2300);
    std::vector<unsigned char> data(4096 * elementSize(dtype));
    fillInput(data.data(), 4096, dtype, seed);
    EXPECT_EQ(loadElement(data.data(), 17, dtype), inputValue(seed, 17, dtype));
  }
}

TEST(Reference, IsTheExactSumOrAverage) {
  InputModel model{7, 256, 3, DType::kBf16, ReduceOp::kSum};
  for (size_t i = 0; i < 16; ++i) {
    double sum = 0, abs = 0;
    for (int r = 0; r < 3; ++r) {
      const double x = inputValue(inputSeed(7, r, 256), i, DType::kBf16);
      sum += x;
      abs += std::fabs(x);
    }
    const ExactElement e = exactElement(model, i);
    EXPECT_EQ(e.value, sum);
    EXPECT_EQ(e.absSum, abs);
    model.op = ReduceOp::kAvg;
    EXPECT_EQ(exactElement(model, i).value, sum / 3);
    model.op = ReduceOp::kSum;
  }
}

// ---- tolerances and ulps ----

TEST(Tolerance, UlpAtMagnitude) {
  EXPECT_EQ(ulpAt(1.0, DType::kBf16), std::ldexp(1.0, -7));
  EXPECT_EQ(ulpAt(1.99, DType::kBf16), std::ldexp(1.0, -7));
  EXPECT_EQ(ulpAt(-0.75, DType::kBf16), std::ldexp(1.0, -8));
  EXPECT_EQ(ulpAt(1.0, DType::kFp16), std::ldexp(1.0, -10));
  EXPECT_EQ(ulpAt(1.0, DType::kFp32), std::ldexp(1.0, -23));
  EXPECT_EQ(ulpAt(0.0, DType::kFp16), std::ldexp(1.0, -24));
  EXPECT_EQ(ulpAt(1e-6, DType::kFp16), std::ldexp(1.0, -24));
  EXPECT_EQ(ulpAt(0.0, DType::kFp32), std::ldexp(1.0, -149));
}

TEST(Tolerance, FormulaAsDocumented) {
  // lamport: ulp(|ref|) + k * 2^-24 * S ; nccl: ulp(|ref|) + k * max(2^-24, 2^-p) * S,
  // k = nRanks for sum, nRanks + 1 for avg
  EXPECT_EQ(tolerance(Bound::kLamport, 1.0, 4.0, 8, DType::kBf16, ReduceOp::kSum),
            std::ldexp(1.0, -7) + 8 * std::ldexp(1.0, -24) * 4.0);
  EXPECT_EQ(tolerance(Bound::kLamport, 1.0, 4.0, 8, DType::kBf16, ReduceOp::kAvg),
            std::ldexp(1.0, -7) + 9 * std::ldexp(1.0, -24) * 4.0);
  EXPECT_EQ(tolerance(Bound::kNccl, 1.0, 4.0, 8, DType::kBf16, ReduceOp::kSum),
            std::ldexp(1.0, -7) + 8 * std::ldexp(1.0, -8) * 4.0);
  EXPECT_EQ(tolerance(Bound::kNccl, 1.0, 4.0, 8, DType::kFp32, ReduceOp::kSum),
            tolerance(Bound::kLamport, 1.0, 4.0, 8, DType::kFp32, ReduceOp::kSum));
}

// Rounds to the dtype through float, as a kernel's final conversion does.
float toDType(double v, DType dtype) { return roundToDType(static_cast<float>(v), dtype); }

// Models of both implementations: nccl-lamport sums in fp32 in rank order and (avg) multiplies
// by 1/n in fp32; NCCL rounds to the dtype at every step and (avg) pre-multiplies each input by
// 1/n rounded to the dtype. Both must stay inside their documented bounds.
TEST(Tolerance, AcceptsFp32RankOrderAccumulationAndNcclStepRounding) {
  constexpr size_t kBytes = 1 << 16;
  for (DType dtype : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      for (int n : {2, 3, 6, 8}) {
        const InputModel model{99, kBytes, n, dtype, op};
        const float scale = 1.0f / static_cast<float>(n);
        const float scaleInDType = roundToDType(scale, dtype);
        for (size_t i = 0; i < 32768; ++i) {
          const ExactElement e = exactElement(model, i);
          float lamport = 0, nccl = 0;
          for (int r = 0; r < n; ++r) {
            const float x = inputValue(inputSeed(99, r, kBytes), i, dtype);
            lamport += x;  // fp32, rank order
            const float term = op == ReduceOp::kAvg ? toDType(x * scaleInDType, dtype) : x;
            nccl = toDType(nccl + term, dtype);  // rounded to the dtype at every step
          }
          if (op == ReduceOp::kAvg) lamport *= scale;
          const double gotLamport = toDType(lamport, dtype);
          ASSERT_LE(std::fabs(gotLamport - e.value),
                    tolerance(Bound::kLamport, e.value, e.absSum, n, dtype, op))
              << name(dtype) << " " << name(op) << " n=" << n << " i=" << i;
          ASSERT_LE(std::fabs(nccl - e.value), tolerance(Bound::kNccl, e.value, e.absSum, n, dtype, op))
              << name(dtype) << " " << name(op) << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(Ulp, DistanceOnBitPatterns) {
  uint16_t a[2], b[2];
  a[0] = floatToBf16Bits(1.0f);
  b[0] = static_cast<uint16_t>(a[0] + 3);
  a[1] = 0x0000;  // +0
  b[1] = 0x8000;  // -0
  EXPECT_EQ(ulpDistance(a, b, 0, DType::kBf16), 3u);
  EXPECT_EQ(ulpDistance(a, b, 1, DType::kBf16), 0u);
  b[0] = floatToBf16Bits(-1.0f);
  EXPECT_EQ(ulpDistance(a, b, 0, DType::kBf16), 2u * 0x3f80);
  b[0] = 0x7fc1;  // NaN
  EXPECT_EQ(ulpDistance(a, b, 0, DType::kBf16), kUlpNaN);
  a[0] = 0x7fc1;
  EXPECT_EQ(ulpDistance(a, b, 0, DType::kBf16), 0u);  // the same bits
  float fa = 1.0f, fb = std::nextafter(1.0f, 2.0f);
  EXPECT_EQ(ulpDistance(&fa, &fb, 0, DType::kFp32), 1u);
}

TEST(Check, CountsWrongElementsAndPoison) {
  const size_t count = 1000;
  const InputModel model{5, count * 2, 4, DType::kBf16, ReduceOp::kSum};
  std::vector<uint16_t> good(count), lamport(count), poisoned(count, 0xffff);
  for (size_t i = 0; i < count; ++i) {
    good[i] = floatToBf16Bits(static_cast<float>(exactElement(model, i).value));
  }
  CheckSummary s = checkOutputs(model, count, good.data(), good.data());
  EXPECT_EQ(s.wrongNccl, 0u);
  EXPECT_EQ(s.wrongLamport, 0u);
  EXPECT_EQ(s.maxUlpLamportVsNccl, 0u);
  EXPECT_TRUE(s.firstError.empty());

  lamport = good;
  lamport[10] = static_cast<uint16_t>(lamport[10] + 5);  // 5 ulps off: beyond 1 ulp + fp32 term
  s = checkOutputs(model, count, good.data(), lamport.data());
  EXPECT_EQ(s.wrongLamport, 1u);
  EXPECT_EQ(s.wrongNccl, 0u);
  EXPECT_EQ(s.maxUlpLamportVsNccl, 5u);
  EXPECT_NE(s.firstError.find("lamport[10]"), std::string::npos) << s.firstError;

  s = checkOutputs(model, count, poisoned.data(), poisoned.data());
  EXPECT_EQ(s.wrongNccl, count);
  EXPECT_EQ(s.wrongLamport, count);
  EXPECT_EQ(s.maxUlpLamportVsNccl, 0u);  // identical bits
  s = checkOutputs(model, count, good.data(), poisoned.data());
  EXPECT_EQ(s.maxUlpLamportVsNccl, kUlpNaN);
}

TEST(Hash, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

// ---- statistics, versions ----

TEST(Stats, MedianAndBandwidth) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_DOUBLE_EQ(algBandwidthGBs(1000000, 10), 100.0);
  EXPECT_DOUBLE_EQ(busBandwidthGBs(1000000, 10, 2), 100.0);
  EXPECT_DOUBLE_EQ(busBandwidthGBs(1000000, 10, 8), 175.0);
  EXPECT_DOUBLE_EQ(busBandwidthGBs(1000000, 10, 1), 0.0);
  EXPECT_TRUE(std::isnan(busBandwidthGBs(1000, NAN, 2)));
}

TEST(Report, VersionStrings) {
  EXPECT_EQ(ncclVersionString(22809), "2.28.9");
  EXPECT_EQ(ncclVersionString(2708), "2.7.8");
  EXPECT_EQ(ncclVersionString(0), "unknown");
  EXPECT_EQ(cudaVersionString(13000), "13.0");
  EXPECT_EQ(cudaVersionString(12080), "12.8");
  EXPECT_EQ(formatUs(NAN), "-");
  EXPECT_EQ(formatUs(2.345), "2.35");
}

// ---- aggregation and formats ----

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int r = 0; r < 2; ++r) {
      slots_.push_back(std::make_unique<RankSlot>());
      std::memset(slots_.back().get(), 0, sizeof(RankSlot));
      RankHeader& h = slots_.back()->header;
      h.started = 1;
      std::strcpy(h.gpuName, "NVIDIA H200");
      h.smMajor = 9;
      h.ncclVersion = 22809;
      h.pluginActive = 1;
      h.commInfoValid = 1;
      h.commInfo.known = 1;
      h.commInfo.eligible = 1;
      std::strcpy(h.commInfo.reason, "NVLink between all ranks");
      for (int s = 0; s < 3; ++s) {
        SizeSample& x = slots_.back()->sizes[s];
        x.bytes = 8u << s;
        x.count = 4u << s;
        x.measured = 1;
        x.checked = 1;
        x.path = ncclLamportPathOneShot;
        x.lamportCallsDelta = 1;
        x.eagerUs[kStock] = 10 + r;
        x.eagerUs[kPlugin] = 4 + r;
        x.graphUs[kStock] = 6 + r;
        x.graphUs[kPlugin] = 2 + r;
        x.hostUs[kStock] = 1;
        x.hostUs[kPlugin] = 0.5;
        x.eagerUs[kSymmetric] = x.graphUs[kSymmetric] = x.hostUs[kSymmetric] = NAN;  // as rank_body: not run
        x.hash[kPlugin] = 0x1234;
      }
    }
  }
  std::vector<const RankSlot*> view() const {
    std::vector<const RankSlot*> v;
    for (const auto& s : slots_) v.push_back(s.get());
    return v;
  }
  RunInfo info() const {
    RunInfo i;
    i.argv = {"nccl-lamport-bench", "--max-bytes", "32"};
    i.hostname = "host";
    i.timestampUtc = "2025-01-01T00:00:00Z";
    i.localGpus = 2;
    i.nRanks = 2;
    i.seed = 1;
    return i;
  }
  std::vector<std::unique_ptr<RankSlot>> slots_;
};

TEST_F(ReportTest, TakesTheMaxOverRanksAndJudgesChecks) {
  slots_[1]->sizes[1].hash[kPlugin] = 0x9999;
  slots_[0]->sizes[2].wrong[kPlugin] = 3;
  slots_[1]->sizes[2].wrong[kPlugin] = 2;
  const auto rows = aggregateRows(view(), 3);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].eagerUs[kStock], 11);
  EXPECT_EQ(rows[0].graphUs[kPlugin], 3);
  EXPECT_DOUBLE_EQ(rows[0].graphSpeedup, 7.0 / 3.0);
  EXPECT_DOUBLE_EQ(rows[0].busbwGBs, busBandwidthGBs(8, 3, 2));
  EXPECT_EQ(rows[0].path, "lamport");
  EXPECT_EQ(rows[0].check, "OK");
  EXPECT_TRUE(rows[0].ok);
  EXPECT_EQ(rows[1].check, "bit-diff across ranks");
  EXPECT_FALSE(rows[1].ok);
  EXPECT_EQ(rows[2].check, "5 wrong");
  EXPECT_FALSE(rows[2].ok);
}

TEST_F(ReportTest, FlagsIncompletePathsAndUncheckedRows) {
  slots_[1]->sizes[0].measured = 0;
  slots_[1]->sizes[1].path = ncclLamportPathNccl;
  slots_[0]->sizes[2].checked = 0;
  slots_[1]->sizes[2].checked = 0;
  slots_[0]->sizes[2].lamportCallsDelta = 0;
  const auto rows = aggregateRows(view(), 4);  // size 3: measured by nobody, left out
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].check, "incomplete (1/2 ranks)");
  EXPECT_EQ(rows[1].path, "mixed");
  EXPECT_EQ(rows[1].check, "path differs across ranks");
  EXPECT_EQ(rows[2].check, "-");
  EXPECT_TRUE(rows[2].ok);
  EXPECT_FALSE(rows[2].routeMismatch);  // counters are compared on checked calls only
}

TEST_F(ReportTest, SymmetricKernelsColumnWhereMeasuredAndNaElsewhere) {
  for (int r = 0; r < 2; ++r) {  // size 1 only: stock graph 6/7 us, symmetric 3.5 (max over ranks)
    slots_[r]->sizes[1].graphUs[kSymmetric] = 3.0 + 0.5 * r;
    slots_[r]->sizes[1].eagerUs[kSymmetric] = 5.0 + 0.5 * r;
  }
  const auto rows = aggregateRows(view(), 3);
  EXPECT_TRUE(std::isnan(rows[0].graphSymmetricSpeedup));
  EXPECT_DOUBLE_EQ(rows[1].graphUs[kSymmetric], 3.5);
  EXPECT_DOUBLE_EQ(rows[1].graphSymmetricSpeedup, 7.0 / 3.5);
  EXPECT_DOUBLE_EQ(rows[1].eagerSymmetricSpeedup, 11.0 / 5.5);
  const std::string table = formatTable(rows);
  EXPECT_NE(table.find("sym us"), std::string::npos) << table;
  EXPECT_NE(table.find("n/a"), std::string::npos) << table;  // sizes 0 and 2
  EXPECT_NE(table.find("2.00x"), std::string::npos) << table;  // 7 / 3.5
  const std::string csv = formatCsv(rows);
  EXPECT_NE(csv.find(",graph_symmetric_us,graph_symmetric_speedup\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",5.5000,2.0000,3.5000,2.0000\n"), std::string::npos) << csv;
  const nlohmann::json doc = toJson(info(), view(), rows);
  EXPECT_TRUE(doc["results"][0]["graph"]["symmetricUs"].is_null());
  EXPECT_EQ(doc["results"][1]["graph"]["symmetricUs"], 3.5);
  EXPECT_EQ(doc["results"][1]["graph"]["symmetricSpeedup"], 2.0);
  EXPECT_EQ(doc["ranks"][0]["symmetric"]["available"], false);
}

TEST_F(ReportTest, TableCsvAndJson) {
  slots_[0]->sizes[0].graphUs[kStock] = NAN;
  slots_[1]->sizes[0].graphUs[kStock] = NAN;
  const auto rows = aggregateRows(view(), 3);
  const std::string table = formatTable(rows);
  EXPECT_NE(table.find("busbw GB/s"), std::string::npos);
  EXPECT_NE(table.find("check"), std::string::npos);
  EXPECT_NE(table.find("2.20x"), std::string::npos) << table;  // eager max 11 / max 5
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2 + 3);

  const std::string header = formatHeader(info(), view());
  EXPECT_NE(header.find("2 x NVIDIA H200 (sm_90)"), std::string::npos) << header;
  EXPECT_NE(header.find(std::string("# build: ") + buildCommit() + "\n"), std::string::npos) << header;
  EXPECT_NE(header.find("NCCL 2.28.9"), std::string::npos);
  EXPECT_NE(header.find("eligible"), std::string::npos);

  const std::string csv = formatCsv(rows);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 3);
  EXPECT_EQ(csv.rfind("bytes,count,path,", 0), 0u);
  EXPECT_NE(csv.find("8,4,lamport,11.0000,5.0000,2.2000,,3.0000,"), std::string::npos) << csv;

  const nlohmann::json doc = toJson(info(), view(), rows);
  EXPECT_EQ(doc["command"], "nccl-lamport-bench --max-bytes 32");
  EXPECT_EQ(doc["nRanks"], 2);
  ASSERT_EQ(doc["results"].size(), 3u);
  EXPECT_TRUE(doc["results"][0]["graph"]["ncclUs"].is_null());
  EXPECT_EQ(doc["results"][1]["graph"]["lamportUs"], 3.0);
  EXPECT_EQ(doc["results"][0]["perRank"].size(), 2u);
  EXPECT_EQ(doc["ranks"][0]["comm"]["reason"], "NVLink between all ranks");
  EXPECT_EQ(doc["results"][2]["check"]["status"], "OK");
}

Row crossoverRow(size_t bytes, const char* path, double eagerSpeedup, double graphSpeedup) {
  Row row;
  row.bytes = bytes;
  row.path = path;
  row.eagerSpeedup = eagerSpeedup;
  row.graphSpeedup = graphSpeedup;
  return row;
}

TEST(Crossover, LargestSizeFasterAtEverySizeUpToIt) {
  const std::vector<Row> rows = {crossoverRow(8, "lamport", 2.0, 2.5), crossoverRow(1024, "lamport", 1.5, 2.0),
                                 crossoverRow(4096, "lamport", 0.9, 1.4), crossoverRow(16384, "lamport", 1.2, 1.0),
                                 crossoverRow(65536, "lamport", 1.1, 1.1)};
  const CrossoverEstimate e = estimateCrossover(rows);
  EXPECT_EQ(e.fasterUpTo[kEagerMode], 1024u);  // 4096 was slower: later wins do not count
  EXPECT_EQ(e.firstNotFaster[kEagerMode], 4096u);
  EXPECT_EQ(e.fasterUpTo[kGraphMode], 4096u);  // a tie (1.00x) is not faster
  EXPECT_EQ(e.firstNotFaster[kGraphMode], 16384u);
  EXPECT_EQ(e.firstRoutedToNccl, 0u);
  const std::string line = formatCrossover(e);
  EXPECT_NE(line.find("up to 4096 bytes (graph), 1024 bytes (eager)"), std::string::npos) << line;
  EXPECT_EQ(line.find("went to NCCL"), std::string::npos) << line;
  const nlohmann::json doc = crossoverJson(e);
  EXPECT_EQ(doc["graph"]["fasterUpToBytes"], 4096);
  EXPECT_EQ(doc["eager"]["firstNotFasterBytes"], 4096);
  EXPECT_TRUE(doc["firstRoutedToNcclBytes"].is_null());
}

TEST(Crossover, StopsWhereTheCrossoverInForceSendsCallsToNccl) {
  const std::vector<Row> rows = {crossoverRow(8, "lamport", 2.0, 2.0), crossoverRow(1024, "nccl", 1.0, 1.0),
                                 crossoverRow(4096, "lamport", 3.0, 3.0)};
  const CrossoverEstimate e = estimateCrossover(rows);
  EXPECT_EQ(e.fasterUpTo[kGraphMode], 8u);
  EXPECT_EQ(e.firstNotFaster[kGraphMode], 0u);  // never measured slower: the answer is censored
  EXPECT_EQ(e.firstRoutedToNccl, 1024u);
  EXPECT_NE(formatCrossover(e).find("NCCL_LAMPORT_ONESHOT_MAX_BYTES"), std::string::npos);
}

TEST(Crossover, TwoShotSweepCountsTwoShotRows) {
  // --tune's second sweep: sizes above the one-shot crossover take "lamport-2shot".
  const std::vector<Row> rows = {crossoverRow(512 << 10, "lamport-2shot", 1.5, 1.8),
                                 crossoverRow(1 << 20, "lamport-2shot", 1.2, 1.3),
                                 crossoverRow(2 << 20, "lamport-2shot", 1.1, 0.9),
                                 crossoverRow(4 << 20, "nccl", 1.0, 1.0)};
  EXPECT_EQ(estimateCrossover(rows).fasterUpTo[kGraphMode], 0u);  // not one-shot rows
  const CrossoverEstimate e = estimateCrossover(rows, "lamport-2shot");
  EXPECT_EQ(e.fasterUpTo[kGraphMode], size_t{1} << 20);
  EXPECT_EQ(e.fasterUpTo[kEagerMode], size_t{2} << 20);
  EXPECT_EQ(e.firstRoutedToNccl, size_t{4} << 20);
}

TEST(Crossover, UnmeasuredModesAndBrokenRows) {
  const std::vector<Row> none = {crossoverRow(8, "lamport", NAN, NAN), crossoverRow(16, "mixed", 5.0, 5.0),
                                 crossoverRow(32, "lamport", 5.0, 5.0)};
  const CrossoverEstimate e = estimateCrossover(none);
  EXPECT_EQ(e.fasterUpTo[kEagerMode], 0u);  // a "mixed" row ends the scan: that run is broken
  EXPECT_EQ(e.fasterUpTo[kGraphMode], 0u);
  EXPECT_NE(formatCrossover(e).find("up to - bytes (graph)"), std::string::npos);
  EXPECT_TRUE(crossoverJson(e)["graph"]["fasterUpToBytes"].is_null());
}

TEST_F(ReportTest, CrossoverFromAggregatedRows) {
  // Size 2 (32 bytes): rank 1's plugin graph time is slower than stock, so the max over ranks is.
  slots_[1]->sizes[2].graphUs[kPlugin] = 20;
  const CrossoverEstimate e = estimateCrossover(aggregateRows(view(), 3));
  EXPECT_EQ(e.fasterUpTo[kGraphMode], 16u);
  EXPECT_EQ(e.firstNotFaster[kGraphMode], 32u);
  EXPECT_EQ(e.fasterUpTo[kEagerMode], 32u);
}

}  // namespace
}  // namespace nccl_lamport::bench
