// Lamport primitives: the empty sentinel, its bit-exact test, input sanitizing, the 16-byte
// vector type with its volatile/unaligned accesses, and fp16/bf16 <-> fp32 conversion.
//
// Everything except the PTX accessors is __host__ __device__ and compiles with a plain C++17
// compiler (no CUDA headers), so tests/unit/test_lamport_primitives.cc checks on the CPU exactly the
// logic the kernels run. CUDA-only parts are under `#if defined(__CUDACC__)`.
//
// The protocol in one paragraph (the Lamport scheme of TensorRT-LLM's and FlashInfer's one-shot
// allreduce): every word of a receive slot holds the "empty" sentinel until a peer's store lands
// there. A receiver polls its local slot with 16-byte volatile loads until no 32-bit word is the
// sentinel, so the data itself is the flag: no fences and no separate flag store on the data
// path. That only works if no word of real data can equal the sentinel, which is why inputs are
// sanitized before they are published.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/lamport_layout.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace nccl_lamport {

// ---------------------------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------------------------

/**
 * The empty marker: 0x80000000 in every 32-bit word, i.e. fp32 -0.0. For fp16/bf16 data a word is
 * a pair of elements; 0x80000000 is then (-0.0, +0.0) in (high, low) order, which sanitizing makes
 * impossible too (the high element can no longer be 0x8000).
 */
constexpr uint32_t kLamportEmptyWord = 0x80000000u;

/**
 * True if the word is the sentinel. Integer compare on purpose.
 *
 * WARNING: never write this as a float test (`x == 0.0f && signbit(x)`). nvcc emits
 * `setp.eq.f32.ftz` for such compares on some paths, and with flush-to-zero every fp32 subnormal
 * compares equal to zero: a word holding two negative bf16 values such as 0x8001'0000 (a negative
 * bf16 subnormal in the high half) would read as "empty" forever and the poll would hang.
 */
LAMPORT_HD constexpr bool lamportWordIsEmpty(uint32_t word) { return word == kLamportEmptyWord; }

/** One 16-byte vector: the unit of every publish, poll and clear. Little-endian byte order. */
struct alignas(16) LamportVec {
  uint32_t w[4];
};

LAMPORT_HD constexpr LamportVec lamportEmptyVec() {
  return LamportVec{{kLamportEmptyWord, kLamportEmptyWord, kLamportEmptyWord, kLamportEmptyWord}};
}

/**
 * True while any 32-bit word of v is still the sentinel. Every word is tested because PTX gives no
 * single-copy atomicity for 16-byte stores: a poll can observe a peer's vector half written.
 */
LAMPORT_HD inline bool lamportVecHasEmpty(const LamportVec& v) {
  // Bitwise | instead of || keeps it branch-free; the compare stays an integer compare.
  return lamportWordIsEmpty(v.w[0]) | lamportWordIsEmpty(v.w[1]) | lamportWordIsEmpty(v.w[2]) |
         lamportWordIsEmpty(v.w[3]);
}

// ---------------------------------------------------------------------------------------------
// Scalar conversions (host versions in software, device versions through the CUDA intrinsics;
// both round to nearest even and keep NaN a NaN)
// ---------------------------------------------------------------------------------------------

LAMPORT_HD inline float lamportBitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

LAMPORT_HD inline uint32_t lamportFloatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

/** bf16 is the high half of an fp32: the conversion to fp32 is exact and needs no rounding. */
LAMPORT_HD inline float lamportBf16ToFloat(uint16_t h) {
  return lamportBitsToFloat(static_cast<uint32_t>(h) << 16);
}

LAMPORT_HD inline uint16_t lamportFloatToBf16(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  const uint32_t x = lamportFloatToBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN: keep sign and payload, make quiet
  }
  const uint32_t roundingBias = 0x7fffu + ((x >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>((x + roundingBias) >> 16);
#endif
}

LAMPORT_HD inline float lamportHalfToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) {  // Inf / NaN (NaN made quiet, payload kept)
    return lamportBitsToFloat(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
  }
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in fp32
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
    return lamportBitsToFloat(sign | lamportFloatToBits(magnitude));
  }
  return lamportBitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

LAMPORT_HD inline uint16_t lamportFloatToHalf(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  const uint32_t x = lamportFloatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: Inf
  if (ax < 0x38800000u) {  // below 2^-14: fp16 subnormal (or zero), in units of 2^-24
    const uint32_t exp = ax >> 23;
    const uint32_t shift = 126u - exp;  // value = (1.mant as 24-bit int) >> shift units
    if (exp == 0 || shift > 24u) return static_cast<uint16_t>(sign);
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry into the exponent is correct
  return static_cast<uint16_t>(sign | h);
#endif
}

// ---------------------------------------------------------------------------------------------
// Codecs: per-datatype sanitize / unpack to fp32 / pack from fp32 of one 16-byte vector.
// The kernels map float, __half and __nv_bfloat16 onto these (lamport_device_common.cuh, LamportCodecFor).
// ---------------------------------------------------------------------------------------------

/**
 * fp32: a word equal to 0x80000000 is a real -0.0 and becomes +0.0. The sign of zero is lost,
 * which no sum can observe except through the sign of an all-zero result.
 */
struct LamportFp32Codec {
  static constexpr int kElemBytes = 4;
  static constexpr int kElemsPerVector = 4;

  LAMPORT_HD static uint32_t sanitizeWord(uint32_t w) { return w == 0x80000000u ? 0u : w; }
  LAMPORT_HD static void unpack(const LamportVec& v, float (&out)[kElemsPerVector]) {
    for (int i = 0; i < 4; ++i) out[i] = lamportBitsToFloat(v.w[i]);
  }
  LAMPORT_HD static LamportVec pack(const float (&in)[kElemsPerVector]) {
    LamportVec v;
    for (int i = 0; i < 4; ++i) v.w[i] = lamportFloatToBits(in[i]);
    return v;
  }
};

/**
 * Shared by fp16 and bf16: both spell -0.0 as 0x8000. A pair (high, low) = (-0.0, +0.0) is the
 * word 0x80000000, the sentinel. Clearing per element (not "word == sentinel -> 0") makes the rule
 * a property of the element rather than of its neighbour in the word, so the published bits do
 * not depend on how elements fall into words; the high element then never is 0x8000, hence no
 * word can be the sentinel.
 */
LAMPORT_HD inline uint32_t lamportSanitizeWord16(uint32_t w) {
  const uint32_t lowMask = (w & 0xffffu) == 0x8000u ? 0xffff0000u : 0xffffffffu;
  const uint32_t highMask = (w >> 16) == 0x8000u ? 0x0000ffffu : 0xffffffffu;
  return w & lowMask & highMask;
}

struct LamportFp16Codec {
  static constexpr int kElemBytes = 2;
  static constexpr int kElemsPerVector = 8;

  LAMPORT_HD static uint32_t sanitizeWord(uint32_t w) { return lamportSanitizeWord16(w); }
  LAMPORT_HD static void unpack(const LamportVec& v, float (&out)[kElemsPerVector]) {
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = lamportHalfToFloat(static_cast<uint16_t>(v.w[i] & 0xffffu));
      out[2 * i + 1] = lamportHalfToFloat(static_cast<uint16_t>(v.w[i] >> 16));
    }
  }
  LAMPORT_HD static LamportVec pack(const float (&in)[kElemsPerVector]) {
    LamportVec v;
    for (int i = 0; i < 4; ++i) {
      v.w[i] = static_cast<uint32_t>(lamportFloatToHalf(in[2 * i])) |
               (static_cast<uint32_t>(lamportFloatToHalf(in[2 * i + 1])) << 16);
    }
    return v;
  }
};

struct LamportBf16Codec {
  static constexpr int kElemBytes = 2;
  static constexpr int kElemsPerVector = 8;

  LAMPORT_HD static uint32_t sanitizeWord(uint32_t w) { return lamportSanitizeWord16(w); }
  LAMPORT_HD static void unpack(const LamportVec& v, float (&out)[kElemsPerVector]) {
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = lamportBitsToFloat(v.w[i] << 16);              // low element
      out[2 * i + 1] = lamportBitsToFloat(v.w[i] & 0xffff0000u);  // high element
    }
  }
  LAMPORT_HD static LamportVec pack(const float (&in)[kElemsPerVector]) {
    LamportVec v;
    for (int i = 0; i < 4; ++i) {
      v.w[i] = static_cast<uint32_t>(lamportFloatToBf16(in[2 * i])) |
               (static_cast<uint32_t>(lamportFloatToBf16(in[2 * i + 1])) << 16);
    }
    return v;
  }
};

/** Sanitizes every word, so that no word of the published vector can equal the sentinel. */
template <typename Codec>
LAMPORT_HD inline LamportVec lamportSanitize(LamportVec v) {
  for (int i = 0; i < 4; ++i) v.w[i] = Codec::sanitizeWord(v.w[i]);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Unaligned / partial vector accesses of user buffers (any alignment, any byte count 1..16).
// The access width is the largest power of two dividing both the address and the byte count, so
// every access is naturally aligned. Bytes past `nbytes` read as 0: a padded tail then holds
// +0.0 in those elements and can never be mistaken for the sentinel.
// ---------------------------------------------------------------------------------------------

LAMPORT_HD inline unsigned lamportAccessWidth(const void* p, int nbytes) {
  const unsigned key = static_cast<unsigned>(reinterpret_cast<uintptr_t>(p)) |
                       static_cast<unsigned>(nbytes) | 16u;
  return key & (0u - key);  // lowest set bit: 1, 2, 4, 8 or 16
}

LAMPORT_HD inline LamportVec lamportLoadBytes(const void* src, int nbytes) {
  LamportVec v{{0u, 0u, 0u, 0u}};
  const unsigned width = lamportAccessWidth(src, nbytes);
  if (width == 16) {
    v = *static_cast<const LamportVec*>(src);
  } else if (width == 8) {
    const uint64_t* p = static_cast<const uint64_t*>(src);
    for (int i = 0; i < 2; ++i) {
      if (8 * i < nbytes) {
        const uint64_t x = p[i];
        v.w[2 * i] = static_cast<uint32_t>(x);
        v.w[2 * i + 1] = static_cast<uint32_t>(x >> 32);
      }
    }
  } else if (width == 4) {
    const uint32_t* p = static_cast<const uint32_t*>(src);
    for (int i = 0; i < 4; ++i) {
      if (4 * i < nbytes) v.w[i] = p[i];
    }
  } else if (width == 2) {
    const uint16_t* p = static_cast<const uint16_t*>(src);
    for (int i = 0; i < 8; ++i) {
      if (2 * i < nbytes) v.w[i / 2] |= static_cast<uint32_t>(p[i]) << (16 * (i % 2));
    }
  } else {
    const uint8_t* p = static_cast<const uint8_t*>(src);
    for (int i = 0; i < 16; ++i) {
      if (i < nbytes) v.w[i / 4] |= static_cast<uint32_t>(p[i]) << (8 * (i % 4));
    }
  }
  return v;
}

LAMPORT_HD inline void lamportStoreBytes(void* dst, const LamportVec& v, int nbytes) {
  const unsigned width = lamportAccessWidth(dst, nbytes);
  if (width == 16) {
    *static_cast<LamportVec*>(dst) = v;
  } else if (width == 8) {
    uint64_t* p = static_cast<uint64_t*>(dst);
    for (int i = 0; i < 2; ++i) {
      if (8 * i < nbytes) {
        p[i] = static_cast<uint64_t>(v.w[2 * i]) | (static_cast<uint64_t>(v.w[2 * i + 1]) << 32);
      }
    }
  } else if (width == 4) {
    uint32_t* p = static_cast<uint32_t*>(dst);
    for (int i = 0; i < 4; ++i) {
      if (4 * i < nbytes) p[i] = v.w[i];
    }
  } else if (width == 2) {
    uint16_t* p = static_cast<uint16_t*>(dst);
    for (int i = 0; i < 8; ++i) {
      if (2 * i < nbytes) p[i] = static_cast<uint16_t>(v.w[i / 2] >> (16 * (i % 2)));
    }
  } else {
    uint8_t* p = static_cast<uint8_t*>(dst);
    for (int i = 0; i < 16; ++i) {
      if (i < nbytes) p[i] = static_cast<uint8_t>(v.w[i / 4] >> (8 * (i % 4)));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Workspace accesses (device only). Weak or volatile 16-byte operations and no fences: a
// release/acquire pair doubles the one-way NVLink hop on H200 (reported by the kernel reviews
// this project started from; not re-measured here).
// ---------------------------------------------------------------------------------------------
#if defined(__CUDACC__)

/**
 * Publishes a vector into a (usually remote) slot. Volatile = relaxed at system scope: it is not
 * held back in the SM, and the receiver's poll sees it as soon as it lands.
 */
__device__ __forceinline__ void lamportStoreVolatile(void* dst, const LamportVec& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(v.w[0]),
               "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

/** Weak 16-byte store, for clearing our own previous buffer (ordered by the kernel boundary). */
__device__ __forceinline__ void lamportStoreWeak(void* dst, const LamportVec& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(v.w[0]), "r"(v.w[1]),
               "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

/** Poll load: volatile, so every iteration goes to L2 (where NVLink stores land), never L1. */
__device__ __forceinline__ LamportVec lamportLoadVolatile(const void* src) {
  LamportVec v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(src)
               : "memory");
  return v;
}

/** Nanoseconds of the GPU's global timer (bounded waits). */
__device__ __forceinline__ uint64_t lamportGlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

#endif  // __CUDACC__

}  // namespace nccl_lamport
