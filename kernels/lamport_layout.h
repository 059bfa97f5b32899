// Layout of one rank's Lamport workspace, shared by the host (allocation, mapping) and the
// kernels (addressing), so the two cannot drift.
//
//   [ control block (kControlBytes) | buffer 0 | buffer 1 | buffer 2 ]
//   buffer b = (nRanks - 1) slots of slotBytes; the slot for sender s in receiver r's buffer is
//   s for s < r and s - 1 for s > r (a rank keeps its own contribution in registers).
//
// The control block holds LamportDeviceState; peers map the whole allocation but only ever write
// into buffer slots. Three buffers rotate: a rank writes round k into buffer k % 3 and clears
// buffer (k + 2) % 3 meanwhile. With two, a peer already in round k + 1 could write into the
// buffer this rank is still clearing.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define LAMPORT_HD __host__ __device__
#else
#define LAMPORT_HD
#endif

namespace nccl_lamport {

/** Largest nRanks a Lamport communicator may have (one NVL72 domain). */
constexpr int kLamportMaxRanks = 72;
/** Number of rotating Lamport buffers. */
constexpr int kLamportBufferCount = 3;
/** Bytes of one vector access (the unit of stores, polls and sentinels). */
constexpr size_t kLamportVectorBytes = 16;
/** Bytes reserved at the start of the allocation for LamportDeviceState. */
constexpr size_t kLamportControlBytes = 256;
/** Largest slot the kernels take: LamportDeviceState::dirtyBytes counts a slot's bytes in a
 *  uint32_t (a multiple of kLamportVectorBytes: 4 GiB - 16). */
constexpr size_t kLamportMaxSlotBytes = UINT32_MAX - (kLamportVectorBytes - 1);

/** Rotation state, in device memory, advanced only by the kernel (CUDA-graph safe). */
struct LamportDeviceState {
  uint32_t bufferIndex;    // buffer (0..2) that peers write this round
  uint32_t dirtyBytes;     // bytes per slot the previous round left to clear (0 after a stash
                           // kernel, which clears what it received in place)
  uint32_t arrivedBlocks;  // blocks of the current launch that finished (last one advances)
  uint32_t roundsDone;     // rounds completed since init (diagnostics)
};

struct LamportLayout {
  int nRanks;
  size_t slotBytes;  // capacity of one sender's slot, multiple of kLamportVectorBytes

  LAMPORT_HD size_t bufferBytes() const { return static_cast<size_t>(nRanks - 1) * slotBytes; }
  LAMPORT_HD size_t totalBytes() const {
    return kLamportControlBytes + kLamportBufferCount * bufferBytes();
  }
  LAMPORT_HD size_t bufferOffset(int buffer) const {
    return kLamportControlBytes + static_cast<size_t>(buffer) * bufferBytes();
  }
  /** Offset of sender's slot inside receiver's buffer `buffer`. sender != receiver. */
  LAMPORT_HD size_t slotOffset(int buffer, int receiver, int sender) const;
};

/** Slot of `sender` in `receiver`'s buffer: ranks below the receiver keep their index, ranks above
 *  move down by one (the receiver has no slot of its own). sender != receiver. The one definition
 *  of the slot arithmetic: the host layout and the kernels both use it. */
LAMPORT_HD inline int lamportSlotIndex(int receiver, int sender) { return sender < receiver ? sender : sender - 1; }

LAMPORT_HD inline size_t LamportLayout::slotOffset(int buffer, int receiver, int sender) const {
  return bufferOffset(buffer) + static_cast<size_t>(lamportSlotIndex(receiver, sender)) * slotBytes;
}

/** Most vectors (kLamportVectorBytes each) of one two-shot message in a workspace of nRanks ranks
 *  and slots of slotBytes: its scatter and gather chunks, ceil(vectors / nRanks) vectors each, fit
 *  together in one slot, and vector indices stay below 2^31 (the kernel counts them in
 *  uint32_t). The one rule for the router (what it sends there) and the launcher (what it
 *  accepts). 0 for nRanks < 2. */
constexpr size_t lamportTwoShotMaxVectors(int nRanks, size_t slotBytes) {
  constexpr size_t kMaxVectors = size_t{1} << 31;
  const size_t chunkVectors = slotBytes / (2 * kLamportVectorBytes);
  if (nRanks < 2) return 0;
  return chunkVectors > kMaxVectors / static_cast<size_t>(nRanks) ? kMaxVectors
                                                                   : chunkVectors * static_cast<size_t>(nRanks);
}

/** Rotation step shared by the kernel and the host model in tests: next buffer after `index`. */
LAMPORT_HD inline uint32_t lamportNextBuffer(uint32_t index) { return (index + 1) % kLamportBufferCount; }
/** The buffer a rank clears while round `index` is in flight (the previous round's). */
LAMPORT_HD inline uint32_t lamportBufferToClear(uint32_t index) {
  return (index + kLamportBufferCount - 1) % kLamportBufferCount;
}

}  // namespace nccl_lamport
