// nccl-lamport-bench correctness: the inputs every rank can regenerate for every rank, the fp64
// host reference, the tolerances, ulp distances and the output hash. Host code only, no CUDA.
//
// Inputs. Element i of rank r for one message size is a pure function of (run seed, r, bytes, i)
// (a counter-based generator), so any rank can rebuild any rank's input without storing it and
// the reference is computed one element at a time. Values lie in [-1, 1) and are exactly
// representable in the datatype (they are rounded to it before anyone uses them).
//
// Reference. ref_i = sum over ranks of x_ri, in double (exact for every dtype and up to 2^29
// ranks, since the inputs have at most 24 significant bits and magnitude < 1); for avg, / nRanks.
// S_i = sum over ranks of |x_ri| (for avg, / nRanks): the scale of the rounding error.
//
// Tolerances (an element is wrong when |out - ref| > tol, or out is NaN). k = nRanks for sum,
// nRanks + 1 for avg (one more rounding: the scaling by 1/nRanks).
//   nccl-lamport:  tol = ulp_dtype(|ref|) + k * 2^-24 * S
//     The Lamport kernel accumulates in fp32 in rank order (nRanks - 1 fp32 roundings, each within
//     2^-24 of the running magnitude <= S; avg adds the scaling) and converts to the datatype
//     once (half an ulp of the result; one ulp leaves room for the fp32 error moving the result
//     across a rounding boundary). For sum this is exactly 1 ulp + nRanks * 2^-24 * sum|x_i|.
//   stock NCCL:    tol = ulp_dtype(|ref|) + k * max(2^-24, 2^-p) * S,  p = dtype precision
//     NCCL reduces fp16/bf16 in the element type itself (each ring/tree step rounds to the dtype,
//     2^-p relative: p = 8 for bf16, 11 for fp16) and pre-scales avg by a rounded 1/nRanks; with
//     the fp32 bound it would fail for bf16 from 3 ranks on. For fp32 both bounds are the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/bench_options.h"

namespace nccl_lamport::bench {

// ---- datatype conversions (round to nearest even; NaN stays NaN; no CUDA headers needed) ----
[[nodiscard]] float bf16BitsToFloat(uint16_t bits);
[[nodiscard]] uint16_t floatToBf16Bits(float value);
[[nodiscard]] float halfBitsToFloat(uint16_t bits);
[[nodiscard]] uint16_t floatToHalfBits(float value);

/** Element i of a buffer of dtype, widened to double. */
[[nodiscard]] double loadElement(const void* data, size_t i, DType dtype);
/** Stores value (already representable in float) into element i, rounded to the dtype. */
void storeElement(void* data, size_t i, DType dtype, float value);
/** value rounded to the dtype and widened back. */
[[nodiscard]] float roundToDType(float value, DType dtype);

// ---- inputs ----
/** The seed of rank's input stream for one message size of one run. */
[[nodiscard]] uint64_t inputSeed(uint64_t runSeed, int rank, size_t bytes);
/** Element i of the stream: in [-1, 1), exactly representable in dtype. */
[[nodiscard]] float inputValue(uint64_t seed, size_t i, DType dtype);
/** Writes count elements of the stream into data (count * elementSize(dtype) bytes). */
void fillInput(void* data, size_t count, DType dtype, uint64_t seed);

// ---- reference and tolerances ----
/** Precision in bits, implicit bit included: bf16 8, fp16 11, fp32 24. */
[[nodiscard]] int precisionBits(DType dtype);
/** The spacing of dtype values at magnitude (subnormal spacing below the normal range). */
[[nodiscard]] double ulpAt(double magnitude, DType dtype);

/** Which bound to apply (see the file comment). */
enum class Bound { kLamport, kNccl };
[[nodiscard]] double tolerance(Bound bound, double refValue, double absSum, int nRanks,
                               DType dtype, ReduceOp op);

/** The exact result of element i and its error scale. */
struct ExactElement {
  double value = 0;   // ref_i
  double absSum = 0;  // S_i
};

/** What the inputs of one (run, message size) are. */
struct InputModel {
  uint64_t runSeed = 0;
  size_t bytes = 0;
  int nRanks = 1;
  DType dtype = DType::kBf16;
  ReduceOp op = ReduceOp::kSum;
};
[[nodiscard]] ExactElement exactElement(const InputModel& model, size_t i);

// ---- comparison ----
/** ulpDistance's answer when exactly one side is NaN (or they are different NaNs). */
constexpr uint64_t kUlpNaN = UINT64_MAX;
/**
 * Number of representable dtype values between a and b (bit patterns of element i); +0 and -0
 * are 0 apart; two identical bit patterns are 0 apart even if NaN.
 */
[[nodiscard]] uint64_t ulpDistance(const void* a, const void* b, size_t i, DType dtype);

/** Result of checking one call's outputs of both paths against the reference. */
struct CheckSummary {
  uint64_t wrongNccl = 0;
  uint64_t wrongLamport = 0;
  uint64_t maxUlpLamportVsNccl = 0;  // kUlpNaN when a NaN differs
  std::string firstError;            // "lamport[12]: got 1.5, expected 1.25 +- 0.0078" or empty
};

/** Checks count elements of the stock-NCCL output and the plugin output of one call. */
[[nodiscard]] CheckSummary checkOutputs(const InputModel& model, size_t count,
                                        const void* ncclOut, const void* lamportOut);

/** FNV-1a, 64 bit, over bytes. */
[[nodiscard]] uint64_t fnv1a64(const void* data, size_t bytes);

}  // namespace nccl_lamport::bench
