// The baseline Lamport one-shot allreduce kernel (LamportKernelVariant::kBaseline, kept for A/B
// timing), and the protocol every Lamport kernel follows. Host launcher: lamport_launch.cu.
//
// One round, per thread, per 16-byte vector v of the message (grid-stride when the grid is capped):
//   1. publish: load v from sendbuff (any alignment, masked tail padded with +0), sanitize -0.0,
//      store it into slot [this rank] of buffer `idx` of every peer (volatile 16 B stores);
//   2. clear:   write the sentinel over what the previous round dirtied in our own buffer
//               lamportBufferToClear(idx) (grid-strided, only state->dirtyBytes per slot);
//   3. wait:    poll our own buffer `idx` until no word of any peer's vector is the sentinel,
//      reduce:  in fp32, in rank order 0..nRanks-1 (own value from registers), scale for avg,
//               convert once, store to recvbuff (masked tail, any alignment).
// (kFast's stash kernels clear each received vector right after step 3 instead, and record
// dirtyBytes 0, so the next round, whichever kernel it runs, has nothing to clear:
// lamport_oneshot_fast.cuh, clearReceived.)
// Right after publishing, the last block to arrive advances the rotation state in device memory,
// so CUDA-graph replays need no host involvement. No fence on the data path; the only fence
// orders a block's state read before its arrival.
#pragma once

#include "kernels/lamport_device_common.cuh"

namespace nccl_lamport {

/** Threads per block of the baseline one-shot kernel (also its __launch_bounds__). */
constexpr int kLamportOneShotThreads = 512;

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

/**
 * The one-shot allreduce. NRANKS = 2, 4, 8 unroll the peer loops; NRANKS = 0 is the generic path
 * for any 2 <= nRanks <= kLamportMaxRanks. Vectors are independent: any grid size is correct on
 * any rank (grids may differ between ranks). A thread publishes all its vectors before it waits on
 * any. LamportKernelVariant::kBaseline only (kept for A/B timing): the launcher sizes its grid to
 * full residency (occupancy x SMs), so all of ITS blocks are resident together, but that leaves no
 * room for a second communicator's kernel: two communicators used in opposite orders on two ranks
 * then wait on each other until the timeout. The default kernel
 * (lamport_oneshot_fast.cuh) takes a bounded share of the device instead.
 */
template <typename T, LamportReduceOp OP, int NRANKS>
__global__ void __launch_bounds__(kLamportOneShotThreads)
    lamportOneShotBaselineKernel(const __grid_constant__ LamportAllReduceArgs args) {
  using Codec = typename LamportCodecFor<T>::type;
  constexpr int kElems = Codec::kElemsPerVector;
  static_assert(NRANKS == 0 || (NRANKS >= 2 && NRANKS <= kLamportMaxRanks), "bad NRANKS");
  static_assert(sizeof(T) == Codec::kElemBytes, "codec does not match the element type");

  __shared__ uint32_t sBufferIndex;
  __shared__ uint32_t sDirtyBytes;
  __shared__ int sGaveUp;

  const int rank = args.rank;
  const int nRanks = NRANKS > 0 ? NRANKS : args.layout.nRanks;
  char* const ownBase = args.peerBases[rank];
  LamportDeviceState* const state = reinterpret_cast<LamportDeviceState*>(ownBase);

  const size_t bytes = args.count * sizeof(T);
  const uint32_t nVectors =
      static_cast<uint32_t>((bytes + kLamportVectorBytes - 1) / kLamportVectorBytes);
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t stride = gridDim.x * blockDim.x;
  const size_t slotBytes = args.layout.slotBytes;

  // Entry: snapshot the rotation state. The last block to leave rewrites it, which is safe
  // because every block read it before arriving. The first input vector is loaded before the
  // barrier so its latency overlaps the state read. It stays in registers for step 3; further
  // vectors (capped grids only) are reloaded there.
  if (threadIdx.x == 0) {
    const volatile LamportDeviceState* vs = state;
    sBufferIndex = vs->bufferIndex;
    sDirtyBytes = vs->dirtyBytes;
    sGaveUp = 0;
  }
  LamportVec first = lamportEmptyVec();
  if (tid < nVectors) first = device::loadInput<Codec>(args.sendbuff, bytes, tid);
  __syncthreads();
  const uint32_t bufferIndex = sBufferIndex;
  const uint32_t dirtyVectors = sDirtyBytes / static_cast<uint32_t>(kLamportVectorBytes);
  const size_t bufferOffset = args.layout.bufferOffset(static_cast<int>(bufferIndex));

  // ---- 1. Publish ------------------------------------------------------------------------------
  for (uint32_t v = tid; v < nVectors; v += stride) {
    const LamportVec x = v == tid ? first : device::loadInput<Codec>(args.sendbuff, bytes, v);
    device::publish<NRANKS>(args, nRanks, bufferOffset + static_cast<size_t>(v) * kLamportVectorBytes,
                             x);
  }

  // ---- Arrival: the last block to arrive advances the rotation ---------------------------------
  // Every block has read the state by the time it arrives, so the last one may rewrite it now,
  // while its threads go on clearing and polling: this keeps the fence and the atomic off the
  // critical path (at the end of the kernel they cost ~0.7 us per call, measured on H200). The
  // next launch on the stream sees the new state at the kernel boundary.
  if (threadIdx.x == 0) {
    // A single block is trivially the last one: skip the fence and the atomic (tiny messages).
    bool last = gridDim.x == 1;
    if (!last) {
      __threadfence();  // this block's read of the state is done before it counts as arrived
      last = atomicAdd(&state->arrivedBlocks, 1u) == gridDim.x - 1;
    }
    if (last) {
      volatile LamportDeviceState* vs = state;
      vs->bufferIndex = lamportNextBuffer(bufferIndex);
      vs->dirtyBytes = nVectors * static_cast<uint32_t>(kLamportVectorBytes);
      vs->arrivedBlocks = 0;
      vs->roundsDone = vs->roundsDone + 1;
    }
  }

  // ---- 2. Clear the previous round's buffer (only what it dirtied) --------------------------------
  device::clearPreviousBuffer(ownBase, args.layout, bufferIndex, dirtyVectors, nRanks, tid, stride);

  // ---- 3. Wait, reduce, write -----------------------------------------------------------------
  device::Waiter waiter{args.abortFlag, args.errorFlag, args.timeoutNs, 0, 0, false};
  const char* const ownBuffer = ownBase + bufferOffset;
  for (uint32_t v = tid; v < nVectors; v += stride) {
    const LamportVec own = v == tid ? first : device::loadInput<Codec>(args.sendbuff, bytes, v);
    float acc[kElems];
    device::waitAndReduce<Codec, NRANKS>(acc, own,
                                          ownBuffer + static_cast<size_t>(v) * kLamportVectorBytes,
                                          slotBytes, rank, nRanks, waiter, &sGaveUp);
    if constexpr (OP == LamportReduceOp::kAvg) {
      const float scale = 1.0f / static_cast<float>(nRanks);
#pragma unroll
      for (int e = 0; e < kElems; ++e) acc[e] *= scale;
    }
    device::storeOutput(args.recvbuff, bytes, v, Codec::pack(acc));
  }
}

}  // namespace nccl_lamport
