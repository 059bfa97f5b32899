#include "bench/correctness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace nccl_lamport::bench {

namespace {

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float bitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t loadBits(const void* data, size_t i, DType dtype) {
  if (dtype == DType::kFp32) {
    uint32_t bits;
    std::memcpy(&bits, static_cast<const char*>(data) + i * 4, 4);
    return bits;
  }
  uint16_t bits;
  std::memcpy(&bits, static_cast<const char*>(data) + i * 2, 2);
  return bits;
}

bool isNanBits(uint64_t bits, DType dtype) {
  switch (dtype) {
    case DType::kBf16: return (bits & 0x7fff) > 0x7f80;
    case DType::kFp16: return (bits & 0x7fff) > 0x7c00;
    case DType::kFp32: return (bits & 0x7fffffff) > 0x7f800000;
  }
  return false;
}

// Sign-magnitude bit pattern -> integer that orders like the values (+0 and -0 both 0).
int64_t orderedBits(uint64_t bits, DType dtype) {
  const int width = dtype == DType::kFp32 ? 32 : 16;
  const uint64_t sign = uint64_t{1} << (width - 1);
  const int64_t magnitude = static_cast<int64_t>(bits & (sign - 1));
  return (bits & sign) != 0 ? -magnitude : magnitude;
}

// ref and S of element i, given every rank's seed.
ExactElement exactFromSeeds(const std::vector<uint64_t>& seeds, size_t i, DType dtype,
                            ReduceOp op) {
  ExactElement e;
  for (uint64_t seed : seeds) {
    const double x = inputValue(seed, i, dtype);
    e.value += x;
    e.absSum += std::fabs(x);
  }
  if (op == ReduceOp::kAvg) {
    e.value /= static_cast<double>(seeds.size());
    e.absSum /= static_cast<double>(seeds.size());
  }
  return e;
}

std::vector<uint64_t> rankSeeds(const InputModel& model) {
  std::vector<uint64_t> seeds(static_cast<size_t>(std::max(model.nRanks, 1)));
  for (int r = 0; r < static_cast<int>(seeds.size()); ++r) {
    seeds[r] = inputSeed(model.runSeed, r, model.bytes);
  }
  return seeds;
}

}  // namespace

float bf16BitsToFloat(uint16_t bits) { return bitsFloat(static_cast<uint32_t>(bits) << 16); }

uint16_t floatToBf16Bits(float value) {
  uint32_t x = floatBits(value);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even; overflow carries into Inf correctly
  return static_cast<uint16_t>(x >> 16);
}

float halfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return bitsFloat(sign | 0x7f800000 | (mantissa << 13));
  return bitsFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t floatToHalfBits(float value) {
  uint32_t x = floatBits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (x >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // >= 65520 rounds to Inf
  if (x < 0x38800000) {
    // Below 2^-14: a subnormal (or zero) half, in units of 2^-24. The multiply is exact; the
    // rounding of nearbyint is the current mode, round to nearest even by default. 1024 units
    // is the smallest normal, whose encoding 0x400 is what the sum gives.
    const float units = std::nearbyint(bitsFloat(x) * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
  }
  const uint32_t mantissa = x & 0x7fffff;
  const uint32_t exponent = (x >> 23) - 127 + 15;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1) != 0)) ++half;  // carry into exponent is right
  return static_cast<uint16_t>(sign | half);
}

double loadElement(const void* data, size_t i, DType dtype) {
  const uint64_t bits = loadBits(data, i, dtype);
  switch (dtype) {
    case DType::kBf16: return bf16BitsToFloat(static_cast<uint16_t>(bits));
    case DType::kFp16: return halfBitsToFloat(static_cast<uint16_t>(bits));
    case DType::kFp32: return bitsFloat(static_cast<uint32_t>(bits));
  }
  return 0;
}

void storeElement(void* data, size_t i, DType dtype, float value) {
  char* base = static_cast<char*>(data);
  if (dtype == DType::kFp32) {
    std::memcpy(base + i * 4, &value, 4);
    return;
  }
  const uint16_t bits = dtype == DType::kBf16 ? floatToBf16Bits(value) : floatToHalfBits(value);
  std::memcpy(base + i * 2, &bits, 2);
}

float roundToDType(float value, DType dtype) {
  switch (dtype) {
    case DType::kBf16: return bf16BitsToFloat(floatToBf16Bits(value));
    case DType::kFp16: return halfBitsToFloat(floatToHalfBits(value));
    case DType::kFp32: return value;
  }
  return value;
}

uint64_t inputSeed(uint64_t runSeed, int rank, size_t bytes) {
  return splitmix64(runSeed ^ splitmix64(static_cast<uint64_t>(rank) * 0x100000001B3ull +
                                         splitmix64(static_cast<uint64_t>(bytes))));
}

float inputValue(uint64_t seed, size_t i, DType dtype) {
  const uint64_t h = splitmix64(seed + static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull);
  const int32_t k = static_cast<int32_t>(h >> 40) - (1 << 23);  // 24 random bits, centred
  const float value = std::ldexp(static_cast<float>(k), -23);   // exact: [-1, 1)
  return roundToDType(value, dtype);
}

void fillInput(void* data, size_t count, DType dtype, uint64_t seed) {
  for (size_t i = 0; i < count; ++i) storeElement(data, i, dtype, inputValue(seed, i, dtype));
}

int precisionBits(DType dtype) {
  switch (dtype) {
    case DType::kBf16: return 8;
    case DType::kFp16: return 11;
    case DType::kFp32: return 24;
  }
  return 24;
}

double ulpAt(double magnitude, DType dtype) {
  const int p = precisionBits(dtype);
  const int minNormalExponent = dtype == DType::kFp16 ? -14 : -126;  // floor(log2(min normal))
  magnitude = std::fabs(magnitude);
  if (!(magnitude >= std::ldexp(1.0, minNormalExponent))) {
    return std::ldexp(1.0, minNormalExponent - (p - 1));  // subnormal spacing (also for 0, NaN)
  }
  if (std::isinf(magnitude)) return magnitude;
  int exponent = 0;
  (void)std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  return std::ldexp(1.0, exponent - 1 - (p - 1));
}

double tolerance(Bound bound, double refValue, double absSum, int nRanks, DType dtype,
                 ReduceOp op) {
  double unitRoundoff = std::ldexp(1.0, -24);
  if (bound == Bound::kNccl) unitRoundoff = std::max(unitRoundoff, std::ldexp(1.0, -precisionBits(dtype)));
  const int roundings = nRanks + (op == ReduceOp::kAvg ? 1 : 0);
  return ulpAt(refValue, dtype) + static_cast<double>(roundings) * unitRoundoff * absSum;
}

ExactElement exactElement(const InputModel& model, size_t i) {
  return exactFromSeeds(rankSeeds(model), i, model.dtype, model.op);
}

uint64_t ulpDistance(const void* a, const void* b, size_t i, DType dtype) {
  const uint64_t bitsA = loadBits(a, i, dtype);
  const uint64_t bitsB = loadBits(b, i, dtype);
  if (bitsA == bitsB) return 0;
  if (isNanBits(bitsA, dtype) || isNanBits(bitsB, dtype)) return kUlpNaN;
  const int64_t oa = orderedBits(bitsA, dtype);
  const int64_t ob = orderedBits(bitsB, dtype);
  return static_cast<uint64_t>(oa > ob ? oa - ob : ob - oa);
}

CheckSummary checkOutputs(const InputModel& model, size_t count, const void* ncclOut,
                          const void* lamportOut) {
  CheckSummary summary;
  const std::vector<uint64_t> seeds = rankSeeds(model);
  auto describe = [&](const char* who, size_t i, double got, const ExactElement& e, double tol) {
    char line[256];
    std::snprintf(line, sizeof(line), "%s[%zu]: got %.9g, expected %.9g +- %.3g", who, i, got,
                  e.value, tol);
    summary.firstError = line;
  };
  for (size_t i = 0; i < count; ++i) {
    const ExactElement e = exactFromSeeds(seeds, i, model.dtype, model.op);
    const double gotNccl = loadElement(ncclOut, i, model.dtype);
    const double gotLamport = loadElement(lamportOut, i, model.dtype);
    const double tolNccl =
        tolerance(Bound::kNccl, e.value, e.absSum, model.nRanks, model.dtype, model.op);
    const double tolLamport =
        tolerance(Bound::kLamport, e.value, e.absSum, model.nRanks, model.dtype, model.op);
    // Written as !(x <= tol) so that a NaN (the 0xFF poison included) counts as wrong.
    if (!(std::fabs(gotLamport - e.value) <= tolLamport)) {
      if (summary.wrongLamport == 0) describe("lamport", i, gotLamport, e, tolLamport);
      ++summary.wrongLamport;
    }
    if (!(std::fabs(gotNccl - e.value) <= tolNccl)) {
      if (summary.wrongNccl == 0 && summary.wrongLamport == 0) describe("nccl", i, gotNccl, e, tolNccl);
      ++summary.wrongNccl;
    }
    summary.maxUlpLamportVsNccl =
        std::max(summary.maxUlpLamportVsNccl, ulpDistance(lamportOut, ncclOut, i, model.dtype));
  }
  return summary;
}

uint64_t fnv1a64(const void* data, size_t bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace nccl_lamport::bench
