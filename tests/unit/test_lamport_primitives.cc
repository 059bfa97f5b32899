// CPU tests of the host-visible Lamport logic: sentinel test, sanitizing, conversions, unaligned
// accesses, workspace layout and the three-buffer rotation (kernels/lamport_primitives.cuh,
// kernels/lamport_layout.h). No GPU, no CUDA headers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/lamport_layout.h"
#include "kernels/lamport_primitives.cuh"

namespace nccl_lamport {
namespace {

LamportVec vec(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return LamportVec{{a, b, c, d}}; }

// ---------------------------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------------------------

TEST(LamportSentinel, OnlyTheExactPatternIsEmpty) {
  EXPECT_TRUE(lamportWordIsEmpty(0x80000000u));
  EXPECT_EQ(kLamportEmptyWord, 0x80000000u);
  // Near misses, including the patterns an ftz float compare would call "-0.0".
  for (uint32_t w : {0x00000000u, 0x80000001u, 0x80010000u, 0x80018001u, 0x807fffffu, 0x00008000u,
                     0x80008000u, 0x7fffffffu, 0xffffffffu, 0x7fc00000u, 0xff800000u,
                     0x00800000u, 0x80800000u}) {
    EXPECT_FALSE(lamportWordIsEmpty(w)) << std::hex << w;
  }
}

TEST(LamportSentinel, NegativeBf16SubnormalsAreNotEmpty) {
  // Every word whose high half is a negative bf16 subnormal (0x8001..0x807f), whatever the low half:
  // as fp32 these are negative subnormals, equal to -0.0 under flush-to-zero.
  for (uint32_t hi = 0x8001u; hi <= 0x807fu; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x8000u, 0x8001u, 0x7fffu, 0xffffu}) {
      const uint32_t w = (hi << 16) | lo;
      EXPECT_FALSE(lamportWordIsEmpty(w)) << std::hex << w;
      EXPECT_FALSE(lamportVecHasEmpty(vec(w, w, w, w))) << std::hex << w;
    }
  }
  // fp32 negative subnormals as well.
  for (uint32_t m : {1u, 2u, 0x3fffffu, 0x400000u, 0x7fffffu}) {
    EXPECT_FALSE(lamportWordIsEmpty(0x80000000u | m));
  }
}

TEST(LamportSentinel, EveryWordOfTheVectorIsChecked) {
  EXPECT_TRUE(lamportVecHasEmpty(lamportEmptyVec()));
  for (int i = 0; i < 4; ++i) {
    LamportVec v = vec(1, 2, 3, 4);
    EXPECT_FALSE(lamportVecHasEmpty(v));
    v.w[i] = kLamportEmptyWord;
    EXPECT_TRUE(lamportVecHasEmpty(v)) << "word " << i;
  }
  const LamportVec empty = lamportEmptyVec();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(empty.w[i], kLamportEmptyWord);
}

// ---------------------------------------------------------------------------------------------
// Sanitize
// ---------------------------------------------------------------------------------------------

TEST(LamportSanitize, Fp32NegativeZeroBecomesPositiveZero) {
  EXPECT_EQ(LamportFp32Codec::sanitizeWord(0x80000000u), 0u);
  // NaN, Inf, subnormals, ordinary values and +0 pass through unchanged.
  for (uint32_t w : {0x00000000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u, 0xff800000u,
                     0x00000001u, 0x80000001u, 0x807fffffu, 0xbf800000u, 0x3f800000u}) {
    EXPECT_EQ(LamportFp32Codec::sanitizeWord(w), w) << std::hex << w;
  }
}

TEST(LamportSanitize, SixteenBitNegativeZeroClearedPerElement) {
  for (auto sanitize : {&LamportFp16Codec::sanitizeWord, &LamportBf16Codec::sanitizeWord}) {
    EXPECT_EQ(sanitize(0x80000000u), 0x00000000u);  // (-0, +0): the sentinel itself
    EXPECT_EQ(sanitize(0x80008000u), 0x00000000u);  // (-0, -0)
    EXPECT_EQ(sanitize(0x00008000u), 0x00000000u);  // (+0, -0)
    EXPECT_EQ(sanitize(0x80001234u), 0x00001234u);
    EXPECT_EQ(sanitize(0x12348000u), 0x12340000u);
    // NaN (fp16 0x7e00, bf16 0x7fc0), Inf, negative subnormals, -1: unchanged.
    for (uint32_t w : {0x7e00fc00u, 0x7fc0ff80u, 0x7c00fc00u, 0x7f80ff80u, 0x80018001u,
                       0x80010000u, 0x0000807fu, 0xbc00bf80u, 0x7fff7fffu, 0xffffffffu}) {
      EXPECT_EQ(sanitize(w), w) << std::hex << w;
    }
  }
}

TEST(LamportSanitize, NoSanitizedWordIsTheSentinel) {
  using Fn = uint32_t (*)(uint32_t);
  for (Fn sanitize : {Fn(&LamportFp32Codec::sanitizeWord), Fn(&LamportFp16Codec::sanitizeWord),
                      Fn(&LamportBf16Codec::sanitizeWord)}) {
    // Every high half with every "dangerous" low half, and every low half with every such high.
    for (uint32_t a = 0; a <= 0xffffu; ++a) {
      for (uint32_t b : {0x0000u, 0x8000u, 0x0001u, 0x8001u, 0xffffu}) {
        EXPECT_NE(sanitize((a << 16) | b), kLamportEmptyWord);
        EXPECT_NE(sanitize((b << 16) | a), kLamportEmptyWord);
      }
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) ASSERT_NE(sanitize(rng()), kLamportEmptyWord);
  }
}

TEST(LamportSanitize, SixteenBitElementsOtherwiseUnchanged) {
  for (uint32_t a = 0; a <= 0xffffu; ++a) {
    const uint32_t w = (a << 16) | (a ^ 0x5a5au);
    const uint32_t s = lamportSanitizeWord16(w);
    const uint32_t hi = w >> 16, lo = w & 0xffffu;
    EXPECT_EQ(s >> 16, hi == 0x8000u ? 0u : hi);
    EXPECT_EQ(s & 0xffffu, lo == 0x8000u ? 0u : lo);
  }
}

TEST(LamportSanitize, VectorSanitizeTouchesEveryWord) {
  const LamportVec v = lamportSanitize<LamportFp32Codec>(lamportEmptyVec());
  EXPECT_FALSE(lamportVecHasEmpty(v));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v.w[i], 0u);
  const LamportVec h = lamportSanitize<LamportBf16Codec>(vec(0x80008000u, 1, 0x80000000u, 2));
  EXPECT_EQ(h.w[0], 0u);
  EXPECT_EQ(h.w[1], 1u);
  EXPECT_EQ(h.w[2], 0u);
  EXPECT_EQ(h.w[3], 2u);
}

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

bool halfIsNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16IsNan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

TEST(LamportConvert, HalfRoundTripsEveryPattern) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = lamportHalfToFloat(static_cast<uint16_t>(h));
    if (halfIsNan(static_cast<uint16_t>(h))) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(halfIsNan(lamportFloatToHalf(f)));
    } else {
      EXPECT_EQ(lamportFloatToHalf(f), h) << std::hex << h;
    }
  }
  EXPECT_EQ(lamportHalfToFloat(0x3c00u), 1.0f);
  EXPECT_EQ(lamportHalfToFloat(0x7bffu), 65504.0f);
  EXPECT_EQ(lamportHalfToFloat(0x0001u), std::ldexp(1.0f, -24));
  EXPECT_EQ(lamportHalfToFloat(0x8001u), -std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(lamportHalfToFloat(0xfc00u)));
  EXPECT_TRUE(std::signbit(lamportHalfToFloat(0x8000u)));
}

TEST(LamportConvert, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(lamportFloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);      // tie -> even
  EXPECT_EQ(lamportFloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);  // tie -> even (up)
  EXPECT_EQ(lamportFloatToHalf(65519.0f), 0x7bffu);
  EXPECT_EQ(lamportFloatToHalf(65520.0f), 0x7c00u);  // tie between 65504 and 2^16 -> Inf
  EXPECT_EQ(lamportFloatToHalf(-1e10f), 0xfc00u);
  EXPECT_EQ(lamportFloatToHalf(std::ldexp(1.0f, -25)), 0x0000u);       // tie -> 0
  EXPECT_EQ(lamportFloatToHalf(std::ldexp(1.5f, -25)), 0x0001u);       // 0.75 ulp -> 1
  EXPECT_EQ(lamportFloatToHalf(std::ldexp(1.5f, -24)), 0x0002u);       // 1.5 ulp tie -> 2
  EXPECT_EQ(lamportFloatToHalf(std::ldexp(2.5f, -24)), 0x0002u);       // 2.5 ulp tie -> 2
  EXPECT_EQ(lamportFloatToHalf(std::ldexp(1023.5f, -24)), 0x0400u);    // rounds up to normal
  EXPECT_EQ(lamportFloatToHalf(-0.0f), 0x8000u);
  EXPECT_EQ(lamportFloatToHalf(1e-30f), 0x0000u);
  EXPECT_TRUE(halfIsNan(lamportFloatToHalf(std::nanf(""))));
  // Property: the result is a nearest fp16 value, ties to even, over random fp32 inputs.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> expo(-26.0f, 16.5f);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::exp2(expo(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
    const uint16_t h = lamportFloatToHalf(f);
    const double err = std::fabs(static_cast<double>(lamportHalfToFloat(h)) - f);
    if (std::isinf(lamportHalfToFloat(h))) {
      ASSERT_GE(std::fabs(f), 65520.0f);
      continue;
    }
    for (int d : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + d);
      if ((n & 0x7fffu) > 0x7bffu || ((h & 0x7fffu) == 0 && d < 0)) continue;
      const double errN = std::fabs(static_cast<double>(lamportHalfToFloat(n)) - f);
      ASSERT_TRUE(err < errN || (err == errN && (h & 1u) == 0)) << f << " -> " << std::hex << h;
    }
  }
}

TEST(LamportConvert, Bf16RoundTripsAndRounds) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = lamportBf16ToFloat(static_cast<uint16_t>(h));
    if (bf16IsNan(static_cast<uint16_t>(h))) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(bf16IsNan(lamportFloatToBf16(f)));
    } else {
      EXPECT_EQ(lamportFloatToBf16(f), h) << std::hex << h;
    }
  }
  EXPECT_EQ(lamportFloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80u);      // tie -> even
  EXPECT_EQ(lamportFloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82u);  // tie -> even (up)
  EXPECT_TRUE(bf16IsNan(lamportFloatToBf16(lamportBitsToFloat(0x7f800001u))));  // not Inf
  EXPECT_EQ(lamportFloatToBf16(lamportBitsToFloat(0x7f7fffffu)), 0x7f80u);      // rounds to Inf
}

TEST(LamportCodec, PackUnpackElementOrder) {
  // Element 0 is the low half of word 0 (little-endian memory order).
  const float in[8] = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 8.0f, 65504.0f, 0.0f};
  const LamportVec h = LamportFp16Codec::pack(in);
  EXPECT_EQ(h.w[0], 0xc0003c00u);
  float out[8];
  LamportFp16Codec::unpack(h, out);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], in[i]);
  const LamportVec b = LamportBf16Codec::pack(in);
  EXPECT_EQ(b.w[0], 0xc0003f80u);
  LamportBf16Codec::unpack(b, out);
  for (int i = 0; i < 8; ++i) {
    if (i != 6) {  // 65504 is not a bf16 value
      EXPECT_EQ(out[i], in[i]);
    }
  }
  const float in4[4] = {1.0f, -1.0f, std::ldexp(1.0f, -140), -3.5f};
  float out4[4];
  LamportFp32Codec::unpack(LamportFp32Codec::pack(in4), out4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out4[i], in4[i]);
}

// ---------------------------------------------------------------------------------------------
// Unaligned / partial accesses
// ---------------------------------------------------------------------------------------------

TEST(LamportBytes, AccessWidthIsLargestCommonPowerOfTwo) {
  alignas(16) uint8_t buf[64];
  EXPECT_EQ(lamportAccessWidth(buf, 16), 16u);
  EXPECT_EQ(lamportAccessWidth(buf, 8), 8u);
  EXPECT_EQ(lamportAccessWidth(buf, 6), 2u);
  EXPECT_EQ(lamportAccessWidth(buf + 4, 16), 4u);
  EXPECT_EQ(lamportAccessWidth(buf + 2, 16), 2u);
  EXPECT_EQ(lamportAccessWidth(buf + 8, 12), 4u);
  EXPECT_EQ(lamportAccessWidth(buf + 1, 16), 1u);
  EXPECT_EQ(lamportAccessWidth(buf, 3), 1u);
}

TEST(LamportBytes, LoadAndStoreAnyOffsetAnyLength) {
  alignas(16) uint8_t src[64];
  for (int i = 0; i < 64; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  for (int offset = 0; offset < 32; ++offset) {
    for (int nbytes = 1; nbytes <= 16; ++nbytes) {
      const LamportVec v = lamportLoadBytes(src + offset, nbytes);
      uint8_t expect[16] = {};
      std::memcpy(expect, src + offset, nbytes);  // bytes past nbytes read as 0
      ASSERT_EQ(std::memcmp(&v, expect, 16), 0) << "offset " << offset << " nbytes " << nbytes;

      alignas(16) uint8_t dst[64];
      std::memset(dst, 0xee, sizeof dst);
      lamportStoreBytes(dst + offset, v, nbytes);
      for (int i = 0; i < 64; ++i) {
        const bool inside = i >= offset && i < offset + nbytes;
        ASSERT_EQ(dst[i], inside ? src[i] : 0xee) << "offset " << offset << " nbytes " << nbytes;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Layout
// ---------------------------------------------------------------------------------------------

// The slot arithmetic is defined once (lamportSlotIndex); the kernel's addressing and the host
// layout both go through it. Written out: slot = sender below the receiver, sender - 1 above.
TEST(LamportLayoutTest, SlotIndexIsTheOneSlotArithmetic) {
  EXPECT_EQ(lamportSlotIndex(3, 0), 0);
  EXPECT_EQ(lamportSlotIndex(3, 2), 2);
  EXPECT_EQ(lamportSlotIndex(3, 4), 3);
  EXPECT_EQ(lamportSlotIndex(0, 1), 0);
  const LamportLayout layout{8, 4096};
  for (int receiver = 0; receiver < 8; ++receiver) {
    for (int sender = 0; sender < 8; ++sender) {
      if (sender == receiver) continue;
      EXPECT_EQ(layout.slotOffset(1, receiver, sender),
                layout.bufferOffset(1) + static_cast<size_t>(lamportSlotIndex(receiver, sender)) * 4096);
    }
  }
}

TEST(LamportLayoutTest, RegionsNeverOverlap) {
  static_assert(sizeof(LamportDeviceState) <= kLamportControlBytes, "state must fit");
  static_assert(kLamportControlBytes % kLamportVectorBytes == 0, "buffers must stay aligned");
  for (int nRanks : {2, 3, 4, 5, 7, 8, 16, 72}) {
    for (size_t slotBytes : {size_t{16}, size_t{4096}, size_t{1} << 20}) {
      const LamportLayout layout{nRanks, slotBytes};
      std::vector<std::pair<size_t, size_t>> regions = {{0, kLamportControlBytes}};
      for (int b = 0; b < kLamportBufferCount; ++b) {
        EXPECT_EQ(layout.bufferOffset(b), kLamportControlBytes + b * layout.bufferBytes());
        for (int receiver = 0; receiver < nRanks; ++receiver) {
          std::set<size_t> offsets;
          for (int sender = 0; sender < nRanks; ++sender) {
            if (sender == receiver) continue;
            const size_t off = layout.slotOffset(b, receiver, sender);
            EXPECT_EQ(off % kLamportVectorBytes, 0u);
            EXPECT_GE(off, layout.bufferOffset(b));
            EXPECT_LE(off + slotBytes, layout.bufferOffset(b) + layout.bufferBytes());
            offsets.insert(off);
            if (receiver == 0) regions.push_back({off, off + slotBytes});
          }
          EXPECT_EQ(offsets.size(), static_cast<size_t>(nRanks - 1)) << "distinct slots";
        }
      }
      std::sort(regions.begin(), regions.end());
      for (size_t i = 1; i < regions.size(); ++i) {
        EXPECT_LE(regions[i - 1].second, regions[i].first) << "nRanks " << nRanks;
      }
      EXPECT_EQ(regions.back().second, layout.totalBytes());
      EXPECT_EQ(layout.totalBytes() % kLamportVectorBytes, 0u);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Rotation
// ---------------------------------------------------------------------------------------------

TEST(LamportRotation, ClearedBufferIsNeverCurrentOrNext) {
  uint32_t idx = 0;
  for (int round = 0; round < 3000; ++round) {
    const uint32_t next = lamportNextBuffer(idx);  // where a peer one round ahead writes
    const uint32_t clear = lamportBufferToClear(idx);
    ASSERT_LT(idx, static_cast<uint32_t>(kLamportBufferCount));
    ASSERT_NE(clear, idx);
    ASSERT_NE(clear, next);
    ASSERT_NE(next, idx);
    // The buffer cleared now is the one the previous round used.
    if (round > 0) {
      ASSERT_EQ(lamportNextBuffer(clear), idx);
    }
    idx = next;
  }
  EXPECT_EQ(lamportNextBuffer(lamportNextBuffer(lamportNextBuffer(1))), 1u);
}

/**
 * Host model of the whole protocol: nRanks ranks, each with its own workspace of 32-bit words laid
 * out by LamportLayout, run by a random scheduler one store / one clear store / one poll at a time
 * (so a fast rank can run a full round ahead of a slow one). Sizes change every round. Returns an
 * empty string on success, else what went wrong (stale data read, or no rank can move).
 */
std::string runRotationModel(int nRanks, int rounds, uint32_t seed,
                             const std::function<uint32_t(uint32_t)>& next,
                             const std::function<uint32_t(uint32_t)>& toClear) {
  constexpr size_t kSlotWords = 16;  // 4 vectors per slot
  const LamportLayout layout{nRanks, kSlotWords * 4};
  std::mt19937 rng(seed);
  std::vector<size_t> roundWords(rounds);
  for (auto& w : roundWords) w = 4 * (1 + rng() % 4);  // 1..4 vectors, same on every rank

  struct Rank {
    std::vector<uint32_t> mem;
    uint32_t bufferIndex = 0, dirtyWords = 0;
    int round = 0, phase = 0;  // 0 publish, 1 clear, 2 poll
    size_t step = 0;
  };
  std::vector<Rank> ranks(nRanks);
  for (auto& r : ranks) {
    r.mem.assign(layout.totalBytes() / 4, kLamportEmptyWord);
    std::fill(r.mem.begin(), r.mem.begin() + kLamportControlBytes / 4, 0u);
  }
  auto value = [](int round, int sender, size_t word) {
    return static_cast<uint32_t>((round + 1) * 4096 + sender * 64 + word);  // never the sentinel
  };
  auto wordAt = [&](int receiver, uint32_t buffer, int sender, size_t word) -> uint32_t& {
    return ranks[receiver].mem[layout.slotOffset(buffer, receiver, sender) / 4 + word];
  };

  int finished = 0;
  while (finished < nRanks) {
    // Pick a rank that can move; a rank waiting on data it has not got cannot.
    std::vector<int> movable;
    for (int r = 0; r < nRanks; ++r) {
      Rank& k = ranks[r];
      if (k.round >= rounds) continue;
      if (k.phase == 2) {
        const int sender = static_cast<int>(k.step / roundWords[k.round]);
        const size_t word = k.step % roundWords[k.round];
        const int s = sender >= r ? sender + 1 : sender;
        if (wordAt(r, k.bufferIndex, s, word) == kLamportEmptyWord) continue;
      }
      movable.push_back(r);
    }
    if (movable.empty()) return "deadlock: every rank waits for data that never comes";
    const int r = movable[rng() % movable.size()];
    Rank& k = ranks[r];
    const size_t words = roundWords[k.round];
    if (k.phase == 0) {  // publish one word to one peer
      const int peer = static_cast<int>(k.step / words);
      const size_t word = k.step % words;
      const int p = peer >= r ? peer + 1 : peer;
      wordAt(p, k.bufferIndex, r, word) = value(k.round, r, word);
      if (++k.step == words * (nRanks - 1)) k.phase = 1, k.step = 0;
    } else if (k.phase == 1) {  // clear one word of the previous round's buffer
      const size_t total = static_cast<size_t>(k.dirtyWords) * (nRanks - 1);
      if (total != 0) {
        const size_t slot = k.step / k.dirtyWords, word = k.step % k.dirtyWords;
        k.mem[layout.bufferOffset(toClear(k.bufferIndex)) / 4 + slot * kSlotWords + word] =
            kLamportEmptyWord;
      }
      if (total == 0 || ++k.step == total) k.phase = 2, k.step = 0;
    } else {  // the polled word has arrived: check it is this round's
      const int sender = static_cast<int>(k.step / words);
      const size_t word = k.step % words;
      const int s = sender >= r ? sender + 1 : sender;
      const uint32_t got = wordAt(r, k.bufferIndex, s, word);
      if (got != value(k.round, s, word)) {
        return "rank " + std::to_string(r) + " round " + std::to_string(k.round) +
               " read stale or foreign data";
      }
      if (++k.step == words * (nRanks - 1)) {  // round done: advance the rotation
        k.bufferIndex = next(k.bufferIndex);
        k.dirtyWords = static_cast<uint32_t>(words);
        k.phase = 0, k.step = 0;
        if (++k.round == rounds) ++finished;
      }
    }
  }
  return "";
}

TEST(LamportRotation, ThreeBufferModelNeverReadsStaleData) {
  for (int nRanks : {2, 3, 4}) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      EXPECT_EQ(runRotationModel(nRanks, 1000, seed, lamportNextBuffer, lamportBufferToClear), "")
          << "nRanks " << nRanks << " seed " << seed;
    }
  }
}

TEST(LamportRotation, ModelCatchesTwoBufferRotation) {
  // The same model with two buffers must fail: shows the model can see the hazard it rules out.
  auto next2 = [](uint32_t i) { return (i + 1) % 2; };
  auto clear2 = [](uint32_t i) { return (i + 1) % 2; };
  int failures = 0;
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    if (!runRotationModel(2, 500, seed, next2, clear2).empty()) ++failures;
  }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace nccl_lamport
