// The default Lamport one-shot kernel (LamportKernelVariant::kFast). Same protocol, workspace and
// rotation state as lamportOneShotBaselineKernel (lamport_oneshot_baseline.cuh, kept as kBaseline
// for A/B timing); what differs is where the fixed cost goes (docs/results-loopback-1xh200.md):
//
//  - Programmatic dependent launch (sm_90+): every thread waits on griddepcontrol.wait before it
//    reads the rotation state or sendbuff, so the launch itself overlaps the previous kernel on the
//    stream. launch_dependents lets the next kernel get launched early: by default as soon as the
//    block's arrival is counted (the control warp issues it, and the first issue counts for the
//    whole block), or with args.triggerAfterWait only once all the block's data threads have their
//    peers' data (gridLaunchDependentsAfterWait).
//  - A dedicated control warp (the block's last warp) reads the rotation state, arrives with one
//    acq_rel atomic per block and, in the last block, writes the next state with one 16-byte
//    store. No data thread executes a fence or a returning atomic; nothing host-visible is
//    read-modified-written per call.
//  - Each data thread owns K vectors of the message at a time (1 as shipped; more are A/B shapes):
//    it loads them (kept in registers), publishes them all, clears, then issues the polls of every
//    vector and every peer before testing any, so their latencies overlap.
//  - Large messages (the stash kernel, kGridStridedStash): a thread's further input vectors wait
//    in shared memory for the reduce pass instead of being read twice, and each vector received
//    is set back to the sentinel right after it is reduced, while its line is in L2 (one dirty
//    line written back once, instead of a second pass over the buffer a round later).
//  - Grid: one launch takes at most 1/kLamportResidencyShare of the device (the co-residency
//    bound). Correct for any grid: vectors are grid-strided, and a thread publishes all its vectors before
//    it waits on any, so a wait never depends on a block that has not published yet being unable
//    to run (every block of a launch publishes before it waits).
#pragma once

#include "kernels/lamport_kernel_select.h"
#include "kernels/lamport_device_common.cuh"

namespace nccl_lamport {

/** Largest data-thread count per block of the fast kernel (one control warp is added). */
constexpr int kLamportFastMaxThreads = 512;

namespace device {

__device__ __forceinline__ void gridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void gridLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/**
 * The late trigger (args.triggerAfterWait): once every data thread of this block is past its last
 * wait on peers (named barrier 1, the control warp not counted), one of them lets the next kernel
 * on the stream be launched. The first launch_dependents of any thread counts for the whole block
 * (PTX ISA, griddepcontrol), so no thread may issue it earlier.
 */
__device__ __forceinline__ void gridLaunchDependentsAfterWait(uint32_t dataThreads) {
  asm volatile("bar.sync 1, %0;" ::"r"(dataThreads) : "memory");
  if (threadIdx.x == 0) gridLaunchDependents();
}

/** Returning add with acquire-release semantics at GPU scope (the arrival of one block). */
__device__ __forceinline__ uint32_t atomicAddAcqRelGpu(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

/** Control lane, at entry: the rotation state snapshot (one 16-byte load) for the whole block. */
__device__ __forceinline__ void controlSnapshot(const char* ownBase, LamportDeviceState* sState, int* sGaveUp) {
  const LamportVec s = lamportLoadVolatile(ownBase);
  *sState = LamportDeviceState{s.w[0], s.w[1], s.w[2], s.w[3]};
  *sGaveUp = 0;
}

/**
 * Control lane, after the block barrier: this block's arrival; the last block to arrive writes the
 * next state (one 16-byte store; dirtyBytesNext = what this round leaves for the next one to
 * clear per slot: what it writes, or 0 for the stash kernels, which clear in place). Every block's
 * snapshot is taken before its arrival, and acq_rel makes the last block's write come after every
 * block's read. The next kernel on the stream sees the new state at the kernel boundary (with
 * PDL, its griddepcontrol.wait waits for this grid's completion). No data thread waits on this.
 */
__device__ __forceinline__ void controlArrive(char* ownBase, const LamportDeviceState& snapshot,
                                              uint32_t dirtyBytesNext) {
  const bool last = gridDim.x == 1 ||
                    atomicAddAcqRelGpu(&reinterpret_cast<LamportDeviceState*>(ownBase)->arrivedBlocks, 1u) ==
                        gridDim.x - 1;
  if (last) {
    const LamportVec next{{lamportNextBuffer(snapshot.bufferIndex), dirtyBytesNext, 0u, snapshot.roundsDone + 1u}};
    lamportStoreVolatile(ownBase, next);
  }
}

/** Waits for rank r's copies of the K vectors (own ones come from registers), all polls in flight. */
template <int NRANKS, int K>
__device__ __forceinline__ void pollVectors(LamportVec (&vals)[K][NRANKS], const LamportVec (&own)[K],
                                            const char* const (&vec)[K], const bool (&valid)[K],
                                            size_t slotBytes, int rank, Waiter& w, int* blockGaveUp) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int r = 0; r < NRANKS; ++r) {
      vals[k][r] = (r == rank || !valid[k]) ? own[k]
                                            : lamportLoadVolatile(vec[k] + slotIndex(rank, r) * slotBytes);
    }
  }
  for (;;) {
    bool pending = false;
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int r = 0; r < NRANKS; ++r) {
        if (r != rank && valid[k] && lamportVecHasEmpty(vals[k][r])) {
          pending = true;
          vals[k][r] = lamportLoadVolatile(vec[k] + slotIndex(rank, r) * slotBytes);
        }
      }
    }
    if (!pending || waiterShouldStop(w, blockGaveUp)) break;
  }
}

/**
 * The stash kernels (kGridStridedStash, kGridStridedStashPrefetch): once vector `vec` (own buffer,
 * slot 0) is reduced, the peers' copies of it are set back to the sentinel right away, while their
 * lines are still in L2, instead of by the next round's clear of this buffer. No peer writes it
 * again before this kernel has completed: a peer writes this buffer again in round k + 3, which
 * needs our round k + 2 publish, which comes after this kernel (round k) has completed.
 */
template <int NRANKS>
__device__ __forceinline__ void clearReceived(const char* vec, size_t slotBytes, int rank, int nRanks) {
  char* const base = const_cast<char*>(vec);
  const int n = NRANKS > 0 ? NRANKS : nRanks;  // a constant, so unrolled, where NRANKS is given
#pragma unroll
  for (int r = 0; r < n; ++r) {
    if (r != rank) lamportStoreWeak(base + slotIndex(rank, r) * slotBytes, lamportEmptyVec());
  }
}

/**
 * LamportFastPass::kGridStridedStashPrefetch: starts copying input vector v into *dst (shared
 * memory) without waiting (cp.async, sm_80+), where it is a whole, 16-byte aligned vector; else
 * loads it now (padded, sanitized). The copy is raw: sanitize it when it is read (after
 * prefetchWait).
 */
template <typename Codec>
__device__ __forceinline__ void prefetchInput(LamportVec* dst, const void* sendbuff, size_t bytes, uint32_t v) {
  const char* src = static_cast<const char*>(sendbuff) + static_cast<size_t>(v) * kLamportVectorBytes;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (bytes - static_cast<size_t>(v) * kLamportVectorBytes >= kLamportVectorBytes &&
      (reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
    const uint32_t to = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(src) : "memory");
    return;
  }
#endif
  *dst = loadInput<Codec>(sendbuff, bytes, v);
}

/** Waits for this thread's prefetchInput copies. */
__device__ __forceinline__ void prefetchWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

/** fp32 sum of vals in rank order 0..NRANKS-1, scaled for avg, packed once. */
template <typename Codec, LamportReduceOp OP, int NRANKS>
__device__ __forceinline__ LamportVec reduceVector(const LamportVec (&vals)[NRANKS]) {
  float acc[Codec::kElemsPerVector];
  accumulateChunk<Codec, NRANKS, false>(acc, vals, 0, NRANKS);
  if constexpr (OP == LamportReduceOp::kAvg) {
    const float scale = 1.0f / static_cast<float>(NRANKS);
#pragma unroll
    for (int e = 0; e < Codec::kElemsPerVector; ++e) acc[e] *= scale;
  }
  return Codec::pack(acc);
}

}  // namespace device

/**
 * kFast one-shot allreduce (the body of lamportOneShotFastKernel below; A/B kernels with other
 * launch bounds share it: lamport_oneshot_variants.cu). blockDim.x = data threads + 32 (the
 * control warp is the last warp).
 * NRANKS = 2, 4, 8 unroll; 0 = generic 2 <= nRanks <= kLamportMaxRanks (one vector per thread per
 * step, peers polled in chunks). Vector v is handled by data thread v % stride, in groups of K.
 * K defaults to the shipped choice (1); other values are A/B variants (lamport_oneshot_variants.cu).
 * PASS (LamportFastPass): kSinglePass / kSinglePassNoBarrier need a grid of at least
 * ceil(vectors / K / data threads) blocks (the launcher checks) and leave out the grid-stride loops.
 * kGridStridedStash and kGridStridedStashPrefetch need kLamportFastStashGroups * data threads * 16
 * bytes of dynamic shared memory.
 */
template <typename T, LamportReduceOp OP, int NRANKS, int K, LamportFastPass PASS>
__device__ __forceinline__ void lamportOneShotFastBody(const LamportAllReduceArgs& args) {
  using Codec = typename LamportCodecFor<T>::type;
  constexpr int kElems = Codec::kElemsPerVector;
  static_assert(K >= 1 && (NRANKS > 0 || K == 1), "K vectors per thread: the generic path takes one");
  static_assert(NRANKS == 0 || (NRANKS >= 2 && NRANKS <= kLamportMaxRanks), "bad NRANKS");

  static_assert(PASS != LamportFastPass::kAuto, "the launcher resolves kAuto");
  constexpr bool kSinglePass = PASS == LamportFastPass::kSinglePass || PASS == LamportFastPass::kSinglePassNoBarrier;
  constexpr bool kNoBarrier = PASS == LamportFastPass::kSinglePassNoBarrier;
  // The stash kernels clear what they received as soon as it is reduced (clearReceived) and leave
  // nothing for the next round to clear (dirtyBytes 0 in the next state). kPrefetch (A/B): the
  // stash groups are copied from sendbuff into shared memory at entry (cp.async), all in flight
  // together, instead of one load per group in the publish loop.
  constexpr bool kPrefetch = PASS == LamportFastPass::kGridStridedStashPrefetch;
  constexpr bool kStash = PASS == LamportFastPass::kGridStridedStash || kPrefetch;
  static_assert(!kStash || K == 1, "the stash holds one vector per group");
  __shared__ LamportDeviceState sState;
  __shared__ int sGaveUp;
  extern __shared__ LamportVec sStash[];  // kStash only: [kLamportFastStashGroups][data threads]

  // Nothing of the previous kernel on this stream may be read before this (PDL).
  device::gridDependencyWait();

  const int rank = args.rank;
  const int nRanks = NRANKS > 0 ? NRANKS : args.layout.nRanks;
  char* const ownBase = args.peerBases[rank];
  const uint32_t dataThreads = blockDim.x - 32u;
  const bool control = threadIdx.x >= dataThreads;
  const size_t bytes = args.count * sizeof(T);
  const uint32_t nVectors =
      static_cast<uint32_t>((bytes + kLamportVectorBytes - 1) / kLamportVectorBytes);
  const size_t slotBytes = args.layout.slotBytes;

  // kNoBarrier: every thread reads the state itself (one 16-byte request per warp) and the data
  // threads never wait for the control warp: they only signal it (bar.arrive) once their read is
  // done, so that the last block's state write still comes after every read.
  LamportDeviceState snapshot{};
  if constexpr (kNoBarrier) {
    const LamportVec sv = lamportLoadVolatile(ownBase);
    snapshot = LamportDeviceState{sv.w[0], sv.w[1], sv.w[2], sv.w[3]};
    // Each data thread clears the block's give-up flag (atomically: racecheck-clean); a thread
    // gives up only after kLamportSpinsPerCheck spins, long after every thread of its block started.
    // Should a late warp clear a flag already set, its threads still stop at their own next check
    // (abort flag, clock): one check round later, never a hang. A/B kernel only.
    if (threadIdx.x < dataThreads) atomicExch(&sGaveUp, 0);
  } else if (threadIdx.x == dataThreads) {
    device::controlSnapshot(ownBase, &sState, &sGaveUp);
  }
  const uint32_t tid = blockIdx.x * dataThreads + threadIdx.x;
  const uint32_t stride = gridDim.x * dataThreads;
  // First group of input vectors, loaded while the state read is in flight.
  LamportVec own[K];
  bool valid[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const uint32_t v = tid + static_cast<uint32_t>(k) * stride;
    valid[k] = !control && v < nVectors;
    own[k] = valid[k] ? device::loadInput<Codec>(args.sendbuff, bytes, v) : lamportEmptyVec();
  }
  if constexpr (kPrefetch) {
#pragma unroll
    for (int g = 1; g <= kLamportFastStashGroups; ++g) {
      const uint32_t v = tid + static_cast<uint32_t>(g) * stride;
      if (!control && v < nVectors) {
        device::prefetchInput<Codec>(&sStash[(g - 1) * dataThreads + threadIdx.x], args.sendbuff, bytes, v);
      }
    }
  }
  if constexpr (kNoBarrier) {
    // Barrier 2: the data threads arrive (their snapshot is in registers), the control warp waits.
    if (control) {
      asm volatile("bar.sync 2, %0;" ::"r"(blockDim.x) : "memory");
    } else {
      asm volatile("bar.arrive 2, %0;" ::"r"(blockDim.x), "r"(snapshot.bufferIndex) : "memory");
    }
  } else {
    __syncthreads();
    snapshot = sState;
  }
  const uint32_t bufferIndex = snapshot.bufferIndex;

  if (control) {  // the arrival; this round leaves nVectors vectors per slot to clear (stash: none)
    if (threadIdx.x == dataThreads) {
      device::controlArrive(ownBase, snapshot, kStash ? 0u : nVectors * static_cast<uint32_t>(kLamportVectorBytes));
    }
    if (!args.triggerAfterWait) device::gridLaunchDependents();
    return;
  }

  const uint32_t dirtyVectors = snapshot.dirtyBytes / static_cast<uint32_t>(kLamportVectorBytes);
  const size_t bufferOffset = args.layout.bufferOffset(static_cast<int>(bufferIndex));

  // ---- 1. Publish every vector of this thread (registers first, then any further ones) ---------
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (valid[k]) {
      const uint32_t v = tid + static_cast<uint32_t>(k) * stride;
      device::publish<NRANKS>(args, nRanks, bufferOffset + static_cast<size_t>(v) * kLamportVectorBytes, own[k]);
    }
  }
  // Further groups (capped grids, large messages): K loads issued together, then their stores;
  // one load-then-store at a time would pay a memory latency per vector (the volatile stores keep
  // the compiler from hoisting the next load above them).
  uint32_t group = 1;  // kStash: the group's index (0 = the one in registers)
  if constexpr (kPrefetch) device::prefetchWait();
  for (uint32_t first = tid + static_cast<uint32_t>(K) * stride; !kSinglePass && first < nVectors;
       first += static_cast<uint32_t>(K) * stride, ++group) {
    LamportVec x[K];
    const bool prefetched = kPrefetch && group <= kLamportFastStashGroups;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const uint32_t v = first + static_cast<uint32_t>(k) * stride;
      x[k] = prefetched       ? lamportSanitize<Codec>(sStash[(group - 1) * dataThreads + threadIdx.x])
             : v < nVectors ? device::loadInput<Codec>(args.sendbuff, bytes, v)
                            : lamportEmptyVec();
    }
    if constexpr (kStash) {  // only this thread reads its entries back: no barrier needed
      if (group <= kLamportFastStashGroups) sStash[(group - 1) * dataThreads + threadIdx.x] = x[0];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const uint32_t v = first + static_cast<uint32_t>(k) * stride;
      if (v < nVectors) {
        device::publish<NRANKS>(args, nRanks, bufferOffset + static_cast<size_t>(v) * kLamportVectorBytes, x[k]);
      }
    }
  }
  if (!args.triggerAfterWait) device::gridLaunchDependents();

  // ---- 2. Clear the previous round's buffer (only what it dirtied) -----------------------------
  device::clearPreviousBuffer(ownBase, args.layout, bufferIndex, dirtyVectors, nRanks, tid, stride);

  // ---- 3. Wait, reduce, write --------------------------------------------------------------------
  device::Waiter waiter{args.abortFlag, args.errorFlag, args.timeoutNs, 0, 0, false};
  const char* const ownBuffer = ownBase + bufferOffset;
  uint32_t reduceGroup = 0;  // kStash: as `group` above
  for (uint32_t first = tid; first < nVectors; first += static_cast<uint32_t>(K) * stride, ++reduceGroup) {
    const bool inRegisters = first == tid;
    const char* vec[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const uint32_t v = first + static_cast<uint32_t>(k) * stride;
      if (!kSinglePass && !inRegisters) {
        valid[k] = v < nVectors;
        const bool stashed = kStash && reduceGroup <= kLamportFastStashGroups;
        own[k] = !valid[k] ? lamportEmptyVec()
                 : stashed ? sStash[(reduceGroup - 1) * dataThreads + threadIdx.x]
                           : device::loadInput<Codec>(args.sendbuff, bytes, v);
      }
      vec[k] = ownBuffer + static_cast<size_t>(v) * kLamportVectorBytes;
    }
    if constexpr (NRANKS > 0) {
      LamportVec vals[K][NRANKS];
      device::pollVectors<NRANKS, K>(vals, own, vec, valid, slotBytes, rank, waiter, &sGaveUp);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (valid[k]) {
          device::storeOutput(args.recvbuff, bytes, first + static_cast<uint32_t>(k) * stride,
                               device::reduceVector<Codec, OP, NRANKS>(vals[k]));
          if constexpr (kStash) device::clearReceived<NRANKS>(vec[k], slotBytes, rank, nRanks);
        }
      }
    } else {
      static_assert(NRANKS > 0 || K == 1, "the generic path handles one vector per step");
      float acc[kElems];
      device::waitAndReduce<Codec, 0>(acc, own[0], vec[0], slotBytes, rank, nRanks, waiter, &sGaveUp);
      if constexpr (OP == LamportReduceOp::kAvg) {
        const float scale = 1.0f / static_cast<float>(nRanks);
#pragma unroll
        for (int e = 0; e < kElems; ++e) acc[e] *= scale;
      }
      device::storeOutput(args.recvbuff, bytes, first, Codec::pack(acc));
      if constexpr (kStash) device::clearReceived<0>(vec[0], slotBytes, rank, nRanks);
    }
    if constexpr (kSinglePass) break;
  }
  if constexpr (kStash) {
    // A thread that gave up (timeout, abort) may see a peer's copy land after this kernel, where
    // no in-place clear will meet it: hand this round's extent back to the next round's clear, as
    // the other kernels do. The last block recorded dirtyBytes 0 at its arrival, which came
    // before any give-up (every block arrives before it waits, and a give-up takes a timeout or
    // an abort; an abort flag set before launch means the workspace is being torn down anyway).
    if (waiter.gaveUp) {
      atomicMax(&reinterpret_cast<LamportDeviceState*>(ownBase)->dirtyBytes,
                nVectors * static_cast<uint32_t>(kLamportVectorBytes));
    }
  }
  if (args.triggerAfterWait) device::gridLaunchDependentsAfterWait(dataThreads);
}

/** The kFast kernel as shipped (any block of up to kLamportFastMaxThreads data threads). */
template <typename T, LamportReduceOp OP, int NRANKS, int K = kLamportFastVectorsPerThread,
          LamportFastPass PASS = LamportFastPass::kGridStrided>
__global__ void __launch_bounds__(kLamportFastMaxThreads + 32)
    lamportOneShotFastKernel(const __grid_constant__ LamportAllReduceArgs args) {
  lamportOneShotFastBody<T, OP, NRANKS, K, PASS>(args);
}

}  // namespace nccl_lamport
