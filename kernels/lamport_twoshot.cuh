// Lamport two-shot allreduce kernel (LamportKernelVariant::kTwoShot): a Lamport reduce-scatter
// followed by a Lamport all-gather in one kernel, for many ranks and large messages, where the
// one-shot's (nRanks - 1) x message per rank costs more wire time than the extra hop.
//
// The message's vectors are split into nRanks chunks of chunkVectors (the last ones shorter or
// empty); rank c owns chunk c. One round, per data thread, per index i of a chunk:
//   1. scatter:  load vector i of every chunk c != rank from sendbuff (sanitized) and store it into
//                rank c's "scatter" region, in the slot of this rank;
//   2. clear:    the previous round's dirty bytes, as the one-shot does;
//   3. reduce:   poll our own scatter region until every peer's vector i of our chunk arrived, sum
//                in fp32 in rank order (own vector from registers), scale for avg, convert once,
//                sanitize -0.0 again (a rounded sum can be 0x8000 / 0x80000000, the sentinel), then
//                store it into every peer's "gather" region (slot of this rank) and into recvbuff;
//   4. gather:   poll our own gather region for every other owner's reduced vector i and store it.
// Every rank gets the owner's rounded bits, so results are bit-identical across ranks.
//
// Workspace: the one-shot layout, same buffers, same rotation state. In buffer b, the one-shot
// slot j of a peer (LamportLayout) holds that peer's scatter vectors at [0, chunkBytes) and its
// gather vectors at [chunkBytes, 2 chunkBytes); the round dirties 2 chunkBytes per slot, which is
// what dirtyBytes records, so one-shot and two-shot rounds can follow each other in any order.
// Three buffers stay enough: a rank finishes round k only after polling every vector peers wrote
// into its buffer in round k (scatter and gather), and a peer cannot start round k + 2 before
// this rank has published its round k + 1 gather, so nothing is still written into the buffer a
// rank clears.
#pragma once

#include "kernels/lamport_oneshot_fast.cuh"

namespace nccl_lamport {

namespace twoshot {

/**
 * Stage 1 for chunk index i: vector i of every chunk c != rank to rank c's scatter region (slot
 * of this rank). All loads of a batch are issued before its stores, so their latencies overlap
 * (the volatile stores keep the compiler from hoisting a later load above them).
 */
template <typename Codec, int NRANKS>
__device__ __forceinline__ void scatterVector(const LamportAllReduceArgs& args, int nRanks, size_t bytes,
                                              uint32_t nVectors, uint32_t chunkVectors, uint32_t i,
                                              size_t bufferOffset) {
  constexpr int kBatch = NRANKS > 0 ? NRANKS - 1 : kLamportPollChunk;
  const int rank = args.rank;
  const size_t offset = bufferOffset + static_cast<size_t>(i) * kLamportVectorBytes;
  for (int first = 1; first < nRanks; first += kBatch) {
    LamportVec x[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int k = first + b;
      const int c = rank + k < nRanks ? rank + k : rank + k - nRanks;
      const uint32_t v = static_cast<uint32_t>(c) * chunkVectors + i;
      x[b] = k < nRanks && v < nVectors ? device::loadInput<Codec>(args.sendbuff, bytes, v) : lamportEmptyVec();
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int k = first + b;
      const int c = rank + k < nRanks ? rank + k : rank + k - nRanks;
      if (k < nRanks && static_cast<uint32_t>(c) * chunkVectors + i < nVectors) {
        lamportStoreVolatile(args.peerBases[c] + offset + device::slotIndex(c, rank) * args.layout.slotBytes, x[b]);
      }
    }
  }
}

/**
 * Waits for the reduced vector i of every owner c != rank in our gather region and stores it at
 * vector c * chunkVectors + i of recvbuff. `vec` = our buffer + chunkBytes + i * 16.
 */
template <int NRANKS>
__device__ __forceinline__ void gatherVector(const LamportAllReduceArgs& args, int nRanks, size_t bytes,
                                             uint32_t nVectors, uint32_t chunkVectors, uint32_t i,
                                             const char* vec, device::Waiter& w, int* blockGaveUp) {
  const int rank = args.rank;
  const size_t slotBytes = args.layout.slotBytes;
  if constexpr (NRANKS > 0) {
    LamportVec vals[NRANKS];
    bool need[NRANKS];
#pragma unroll
    for (int c = 0; c < NRANKS; ++c) {
      need[c] = c != rank && static_cast<uint64_t>(c) * chunkVectors + i < nVectors;
      vals[c] = need[c] ? lamportLoadVolatile(vec + device::slotIndex(rank, c) * slotBytes) : lamportEmptyVec();
    }
    for (;;) {
      bool pending = false;
#pragma unroll
      for (int c = 0; c < NRANKS; ++c) {
        if (need[c] && lamportVecHasEmpty(vals[c])) {
          pending = true;
          vals[c] = lamportLoadVolatile(vec + device::slotIndex(rank, c) * slotBytes);
        }
      }
      if (!pending || device::waiterShouldStop(w, blockGaveUp)) break;
    }
#pragma unroll
    for (int c = 0; c < NRANKS; ++c) {
      if (need[c]) device::storeOutput(args.recvbuff, bytes, c * chunkVectors + i, vals[c]);
    }
  } else {
    for (int c = 0; c < nRanks; ++c) {
      if (c == rank || static_cast<uint64_t>(c) * chunkVectors + i >= nVectors) continue;
      const char* src = vec + device::slotIndex(rank, c) * slotBytes;
      LamportVec x = lamportLoadVolatile(src);
      while (lamportVecHasEmpty(x) && !device::waiterShouldStop(w, blockGaveUp)) x = lamportLoadVolatile(src);
      device::storeOutput(args.recvbuff, bytes, c * chunkVectors + i, x);
    }
  }
}

}  // namespace twoshot

/**
 * The two-shot allreduce. blockDim.x = data threads + 32 (control warp last, as in the kFast
 * one-shot: PDL wait first, state snapshot, arrival, rotation update). Data thread tid handles
 * chunk indices tid, tid + stride, ...; it completes each stage for all its indices before the
 * next stage, so no wait depends on a publish of a later stage (any grid is correct).
 */
template <typename T, LamportReduceOp OP, int NRANKS>
__global__ void __launch_bounds__(kLamportFastMaxThreads + 32)
    lamportTwoShotKernel(const __grid_constant__ LamportAllReduceArgs args) {
  using Codec = typename LamportCodecFor<T>::type;
  constexpr int kElems = Codec::kElemsPerVector;
  static_assert(NRANKS == 0 || (NRANKS >= 2 && NRANKS <= kLamportMaxRanks), "bad NRANKS");

  __shared__ LamportDeviceState sState;
  __shared__ int sGaveUp;

  device::gridDependencyWait();

  const int rank = args.rank;
  const int nRanks = NRANKS > 0 ? NRANKS : args.layout.nRanks;
  char* const ownBase = args.peerBases[rank];
  const uint32_t dataThreads = blockDim.x - 32u;
  const bool control = threadIdx.x >= dataThreads;
  const size_t bytes = args.count * sizeof(T);
  const uint32_t nVectors = static_cast<uint32_t>((bytes + kLamportVectorBytes - 1) / kLamportVectorBytes);
  const uint32_t chunkVectors = (nVectors + static_cast<uint32_t>(nRanks) - 1) / static_cast<uint32_t>(nRanks);
  const size_t chunkBytes = static_cast<size_t>(chunkVectors) * kLamportVectorBytes;
  const size_t slotBytes = args.layout.slotBytes;
  const uint32_t ownFirstVector = static_cast<uint32_t>(rank) * chunkVectors;

  if (threadIdx.x == dataThreads) device::controlSnapshot(ownBase, &sState, &sGaveUp);
  const uint32_t tid = blockIdx.x * dataThreads + threadIdx.x;
  const uint32_t stride = gridDim.x * dataThreads;
  const bool ownValid = !control && tid < chunkVectors && ownFirstVector + tid < nVectors;
  const LamportVec ownFirst =
      ownValid ? device::loadInput<Codec>(args.sendbuff, bytes, ownFirstVector + tid) : lamportEmptyVec();
  __syncthreads();
  const uint32_t bufferIndex = sState.bufferIndex;

  if (control) {  // the arrival; this round dirties a scatter and a gather chunk per slot
    if (threadIdx.x == dataThreads) device::controlArrive(ownBase, sState, static_cast<uint32_t>(2 * chunkBytes));
    if (!args.triggerAfterWait) device::gridLaunchDependents();
    return;
  }

  const uint32_t dirtyVectors = sState.dirtyBytes / static_cast<uint32_t>(kLamportVectorBytes);
  const size_t bufferOffset = args.layout.bufferOffset(static_cast<int>(bufferIndex));

  // ---- 1. Scatter: vector i of chunk c to rank c ------------------------------------------------
  for (uint32_t i = tid; i < chunkVectors; i += stride) {
    twoshot::scatterVector<Codec, NRANKS>(args, nRanks, bytes, nVectors, chunkVectors, i, bufferOffset);
  }
  if (!args.triggerAfterWait) device::gridLaunchDependents();

  // ---- 2. Clear the previous round's buffer (only what it dirtied) -----------------------------
  device::clearPreviousBuffer(ownBase, args.layout, bufferIndex, dirtyVectors, nRanks, tid, stride);

  // ---- 3. Reduce our chunk, publish it to every peer's gather region and to recvbuff -----------
  device::Waiter waiter{args.abortFlag, args.errorFlag, args.timeoutNs, 0, 0, false};
  const char* const ownBuffer = ownBase + bufferOffset;
  for (uint32_t i = tid; i < chunkVectors; i += stride) {
    const uint32_t v = ownFirstVector + i;
    if (v >= nVectors) break;
    const LamportVec own = i == tid ? ownFirst : device::loadInput<Codec>(args.sendbuff, bytes, v);
    float acc[kElems];
    device::waitAndReduce<Codec, NRANKS>(acc, own, ownBuffer + static_cast<size_t>(i) * kLamportVectorBytes,
                                          slotBytes, rank, nRanks, waiter, &sGaveUp);
    if constexpr (OP == LamportReduceOp::kAvg) {
      const float scale = 1.0f / static_cast<float>(nRanks);
#pragma unroll
      for (int e = 0; e < kElems; ++e) acc[e] *= scale;
    }
    const LamportVec reduced = lamportSanitize<Codec>(Codec::pack(acc));
    // After a give-up the missing contributions read as the sentinel (-0.0, adding nothing): a
    // partial sum. Peers must not gather it as the reduced chunk; without it they time out and
    // report the error themselves (this rank's recvbuff is already void: its error flag is set).
    if (!waiter.gaveUp) {
      device::publish<NRANKS>(args, nRanks, bufferOffset + chunkBytes + static_cast<size_t>(i) * kLamportVectorBytes,
                               reduced);
    }
    device::storeOutput(args.recvbuff, bytes, v, reduced);
  }

  // ---- 4. Gather every other chunk ----------------------------------------------------------------
  for (uint32_t i = tid; i < chunkVectors; i += stride) {
    twoshot::gatherVector<NRANKS>(args, nRanks, bytes, nVectors, chunkVectors, i,
                                  ownBuffer + chunkBytes + static_cast<size_t>(i) * kLamportVectorBytes, waiter,
                                  &sGaveUp);
  }
  if (args.triggerAfterWait) device::gridLaunchDependentsAfterWait(dataThreads);
}

}  // namespace nccl_lamport
