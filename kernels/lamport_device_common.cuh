// Device code shared by every Lamport allreduce kernel (one-shot, its baseline, two-shot): the
// codecs per element type, the bounded wait, input and output of the user's buffers, publishing
// to peers, polling and reducing in rank order, and clearing the previous round's buffer. The
// protocol these serve is described in lamport_oneshot_baseline.cuh; the kernels are
// lamport_oneshot_baseline.cuh, lamport_oneshot_fast.cuh and lamport_twoshot.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/lamport_allreduce.h"
#include "kernels/lamport_layout.h"
#include "kernels/lamport_primitives.cuh"

namespace nccl_lamport {

/** Peers polled together (register budget: one 16 B vector each) on the generic-nRanks path. */
constexpr int kLamportPollChunk = 8;
/** Poll iterations between two looks at the abort flag and the clock (both cost far more). */
constexpr uint32_t kLamportSpinsPerCheck = 1024;

/** Maps the kernel's element type onto its codec in lamport_primitives.cuh. */
template <typename T>
struct LamportCodecFor;
template <>
struct LamportCodecFor<float> {
  using type = LamportFp32Codec;
};
template <>
struct LamportCodecFor<__half> {
  using type = LamportFp16Codec;
};
template <>
struct LamportCodecFor<__nv_bfloat16> {
  using type = LamportBf16Codec;
};

namespace device {

// ---------------------------------------------------------------------------------------------
// Bounded wait
// ---------------------------------------------------------------------------------------------

/** Per-thread state of the bounded wait (kept in registers: its address is never taken). */
struct Waiter {
  const volatile uint32_t* abortFlag;
  uint32_t* errorFlag;
  uint64_t timeoutNs;
  uint64_t startNs;  // 0 until the first check: the clock is only read on slow waits
  uint32_t spins;
  bool gaveUp;
};

/** waiterCheck's answer meaning "stop waiting". */
constexpr uint64_t kWaiterGiveUp = ~0ull;

/**
 * Slow path, every kLamportSpinsPerCheck spins: gives up on an abort request, on timeout, or when
 * another thread of the block already gave up, and writes the reason into the host-mapped
 * errorFlag. Returns the (possibly just started) start time, or kWaiterGiveUp. Out of line and
 * by value, so the hot poll loop stays small and never touches a stack frame.
 *
 * The block's give-up flag (shared memory) is read and written with atomics only: one thread sets
 * it while others read it with no barrier in between, which compute-sanitizer racecheck reports
 * as a hazard for plain accesses; atomics are race-free by definition and
 * cost nothing here (once per kLamportSpinsPerCheck spins). The host-mapped abort flag is read by
 * the lowest active lane of the warp only (a PCIe read each: a long skew would otherwise cost
 * ~200k reads per check round); the other lanes learn of an abort through the block flag at their
 * next check.
 */
static __device__ __noinline__ uint64_t waiterCheck(const volatile uint32_t* abortFlag,
                                             uint32_t* errorFlag, uint64_t timeoutNs,
                                             uint64_t startNs, int* blockGaveUp) {
  if (atomicOr(blockGaveUp, 0) != 0) return kWaiterGiveUp;
  const unsigned active = __activemask();
  const bool leader = static_cast<int>(threadIdx.x % 32u) == __ffs(active) - 1;
  uint32_t reason = kLamportOk;
  if (leader && abortFlag != nullptr && *abortFlag != 0) {
    reason = kLamportAborted;
  } else if (timeoutNs != 0) {
    const uint64_t now = lamportGlobalTimerNs();
    if (startNs == 0) {
      startNs = now;
    } else if (now - startNs > timeoutNs) {
      reason = kLamportTimedOut;
    }
  }
  if (reason == kLamportOk) return startNs;
  // Plain store, no atomics: host-mapped memory need not support them; any non-zero is an error.
  if (errorFlag != nullptr) *reinterpret_cast<volatile uint32_t*>(errorFlag) = reason;
  atomicExch(blockGaveUp, 1);
  return kWaiterGiveUp;
}

/** True when the caller must stop polling. Cheap on the fast path: one counter increment. */
__device__ __forceinline__ bool waiterShouldStop(Waiter& w, int* blockGaveUp) {
  if (w.gaveUp) return true;
  if (++w.spins < kLamportSpinsPerCheck) return false;
  w.spins = 0;
  const uint64_t start = waiterCheck(w.abortFlag, w.errorFlag, w.timeoutNs, w.startNs, blockGaveUp);
  if (start == kWaiterGiveUp) {
    w.gaveUp = true;
    return true;
  }
  w.startNs = start;
  return false;
}

// ---------------------------------------------------------------------------------------------
// User buffers
// ---------------------------------------------------------------------------------------------

/** Loads vector v of the user's input, pads a partial tail with +0 and sanitizes -0.0. */
template <typename Codec>
__device__ __forceinline__ LamportVec loadInput(const void* sendbuff, size_t bytes, uint32_t v) {
  const char* src = static_cast<const char*>(sendbuff) + static_cast<size_t>(v) * kLamportVectorBytes;
  const size_t left = bytes - static_cast<size_t>(v) * kLamportVectorBytes;
  LamportVec x;
  if (left >= kLamportVectorBytes && (reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
    x = *reinterpret_cast<const LamportVec*>(src);  // fast path: one 16 B load
  } else {
    x = lamportLoadBytes(src, left < kLamportVectorBytes ? static_cast<int>(left) : 16);
  }
  return lamportSanitize<Codec>(x);
}

/** Stores vector v of the result, masking a partial tail. */
__device__ __forceinline__ void storeOutput(void* recvbuff, size_t bytes, uint32_t v,
                                            const LamportVec& x) {
  char* dst = static_cast<char*>(recvbuff) + static_cast<size_t>(v) * kLamportVectorBytes;
  const size_t left = bytes - static_cast<size_t>(v) * kLamportVectorBytes;
  if (left >= kLamportVectorBytes && (reinterpret_cast<uintptr_t>(dst) & 15u) == 0) {
    *reinterpret_cast<LamportVec*>(dst) = x;
  } else {
    lamportStoreBytes(dst, x, left < kLamportVectorBytes ? static_cast<int>(left) : 16);
  }
}

// ---------------------------------------------------------------------------------------------
// Publish / poll / reduce
// ---------------------------------------------------------------------------------------------

/** Slot index of `sender` in `receiver`'s buffer (kernels/lamport_layout.h, lamportSlotIndex). */
__device__ __forceinline__ int slotIndex(int receiver, int sender) { return lamportSlotIndex(receiver, sender); }

/**
 * Stores x into slot [rank] at byte `offset` (buffer offset + vector offset) of every peer.
 * Peers are visited from rank+1 upwards, so the ranks do not all hit the same peer at once.
 */
template <int NRANKS>
__device__ __forceinline__ void publish(const LamportAllReduceArgs& args, int nRanks, size_t offset,
                                        const LamportVec& x) {
  const int rank = args.rank;
  const size_t slotBytes = args.layout.slotBytes;
  if constexpr (NRANKS > 0) {
#pragma unroll
    for (int i = 1; i < NRANKS; ++i) {
      const int peer = rank + i < NRANKS ? rank + i : rank + i - NRANKS;
      lamportStoreVolatile(args.peerBases[peer] + offset + slotIndex(peer, rank) * slotBytes, x);
    }
  } else {
    for (int i = 1; i < nRanks; ++i) {
      const int peer = rank + i < nRanks ? rank + i : rank + i - nRanks;
      lamportStoreVolatile(args.peerBases[peer] + offset + slotIndex(peer, rank) * slotBytes, x);
    }
  }
}

/**
 * Waits for the vectors of ranks [firstRank, firstRank + CHUNK) (those < nRanks when GUARD) in our
 * own buffer; `vec` points at this vector in our buffer's slot 0. vals[i] gets rank firstRank+i's
 * vector, our own for our rank (already sanitized, so never pending). All loads of a sweep are
 * issued before any is tested, so the peers' latencies overlap.
 */
template <int CHUNK, bool GUARD>
__device__ __forceinline__ void pollChunk(LamportVec (&vals)[CHUNK], const LamportVec& own,
                                          const char* vec, size_t slotBytes, int firstRank,
                                          int rank, int nRanks, Waiter& w,
                                          int* blockGaveUp) {
#pragma unroll
  for (int i = 0; i < CHUNK; ++i) {
    const int r = firstRank + i;
    if (GUARD && r >= nRanks) continue;
    vals[i] = r == rank ? own : lamportLoadVolatile(vec + slotIndex(rank, r) * slotBytes);
  }
  for (;;) {
    bool pending = false;
#pragma unroll
    for (int i = 0; i < CHUNK; ++i) {
      const int r = firstRank + i;
      if (GUARD && r >= nRanks) continue;
      if (lamportVecHasEmpty(vals[i])) {
        pending = true;
        vals[i] = lamportLoadVolatile(vec + slotIndex(rank, r) * slotBytes);
      }
    }
    if (!pending || waiterShouldStop(w, blockGaveUp)) break;
  }
}

/** acc (+)= vals in rank order; rank 0 initializes acc. fp32 throughout. */
template <typename Codec, int CHUNK, bool GUARD>
__device__ __forceinline__ void accumulateChunk(float (&acc)[Codec::kElemsPerVector],
                                                const LamportVec (&vals)[CHUNK], int firstRank,
                                                int nRanks) {
#pragma unroll
  for (int i = 0; i < CHUNK; ++i) {
    const int r = firstRank + i;
    if (GUARD && r >= nRanks) continue;
    float x[Codec::kElemsPerVector];
    Codec::unpack(vals[i], x);
    if (r == 0) {
#pragma unroll
      for (int e = 0; e < Codec::kElemsPerVector; ++e) acc[e] = x[e];
    } else {
#pragma unroll
      for (int e = 0; e < Codec::kElemsPerVector; ++e) acc[e] += x[e];
    }
  }
}

/** Waits for every peer's copy of vector v and reduces it with ours into acc (rank order). */
template <typename Codec, int NRANKS>
__device__ __forceinline__ void waitAndReduce(float (&acc)[Codec::kElemsPerVector],
                                              const LamportVec& own, const char* vec,
                                              size_t slotBytes, int rank, int nRanks, Waiter& w,
                                              int* blockGaveUp) {
  if constexpr (NRANKS > 0) {
    LamportVec vals[NRANKS];
    pollChunk<NRANKS, false>(vals, own, vec, slotBytes, 0, rank, NRANKS, w, blockGaveUp);
    accumulateChunk<Codec, NRANKS, false>(acc, vals, 0, NRANKS);
  } else {
    // Generic nRanks: chunks in rank order keep the summation order 0..nRanks-1.
    for (int first = 0; first < nRanks; first += kLamportPollChunk) {
      LamportVec vals[kLamportPollChunk];
      pollChunk<kLamportPollChunk, true>(vals, own, vec, slotBytes, first, rank, nRanks, w,
                                         blockGaveUp);
      accumulateChunk<Codec, kLamportPollChunk, true>(acc, vals, first, nRanks);
    }
  }
}

/**
 * Writes the sentinel over the first dirtyVectors vectors of every slot of our buffer
 * lamportBufferToClear(bufferIndex) (what the previous round dirtied), grid-strided. Peers are at
 * most one round ahead: they write lamportNextBuffer(bufferIndex), never this buffer. Weak stores:
 * ordered before any peer's next write into it by the end of this kernel.
 */
__device__ __forceinline__ void clearPreviousBuffer(char* ownBase, const LamportLayout& layout,
                                                    uint32_t bufferIndex, uint32_t dirtyVectors, int nRanks,
                                                    uint32_t tid, uint32_t stride) {
  if (dirtyVectors == 0) return;
  char* const clearBase = ownBase + layout.bufferOffset(static_cast<int>(lamportBufferToClear(bufferIndex)));
  const LamportVec empty = lamportEmptyVec();
  for (int s = 0; s < nRanks - 1; ++s) {
    char* const slot = clearBase + static_cast<size_t>(s) * layout.slotBytes;
    for (uint32_t c = tid; c < dirtyVectors; c += stride) {
      lamportStoreWeak(slot + static_cast<size_t>(c) * kLamportVectorBytes, empty);
    }
  }
}

}  // namespace device

/**
 * Workspace init: the control block (first kLamportControlBytes) zeroed, every buffer byte the
 * sentinel. nVectors = totalBytes / 16.
 */
__global__ void lamportWorkspaceInitKernel(char* base, size_t nVectors);

}  // namespace nccl_lamport
