// Host-callable entry points of the Lamport allreduce kernels. No policy here: the plugin decides
// what runs; these functions only launch. Each returns the launch's cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/lamport_layout.h"
#include "kernels/lamport_types.h"

namespace nccl_lamport {

/**
 * One launch takes at most 1/kLamportResidencyShare of the blocks the device holds at once, so
 * that other spinning Lamport grids (other communicators, other ranks sharing the GPU in tests)
 * are co-resident and no wait can depend on a block that cannot get an SM.
 * With programmatic dependent launch a stream can also hold its next call's grid, pre-launched
 * while the current one may still wait; that is allowed only for grids of at most
 * 1/kLamportEarlyTriggerShare of the device (small messages, where the early launch is worth
 * about 0.3 us a call on one H200); larger grids let the next one be launched only once their own
 * waits are over (the late trigger). So one stream holds at most 1/4 + 1/12 = 1/3 of the device
 * while it can block: 3 communicators (or ranks sharing a GPU) with calls in flight are always
 * co-resident, 4 when all their grids are above the early-trigger size. Measured on one H200
 * (docs/loopback-log-1xh200.md): a quarter of the device is as fast as no bound at 512 KB -
 * 2 MB (2 ranks), an eighth takes 1.6x as long at 2 MB.
 */
constexpr int kLamportResidencyShare = 4;
/** Grids of at most 1/kLamportEarlyTriggerShare of the device use the early PDL trigger. */
constexpr int kLamportEarlyTriggerShare = 12;

/** Data threads per block of the default kernels for messages below kLamportWideBlockMinBytes. */
constexpr int kLamportFastSmallBlockThreads = 128;
/** Data threads per block of a kFast (one-shot) launch from kLamportWideBlockMinBytes on. */
constexpr int kLamportFastWideBlockThreads = 256;
/**
 * Message bytes from which a kFast launch takes kLamportFastWideBlockThreads. Wider blocks pack
 * more data threads into the same share of the device (one control warp per 8 data warps instead
 * of per 4: at 2 ranks 7 blocks of 288 threads per SM against 12 of 160 for the 32-register
 * single-pass kernel, 4 against 7 for the grid-strided one) and count fewer arrivals. Measured on
 * one H200 (docs/loopback-log-1xh200.md, session 4, 2 ranks, graph): 2.77 us against 2.91 at
 * 512 KB, 3.56 against 4.44 at 1 MB, 5.98 against 6.71 at 2 MB; below 128 KB the smaller blocks
 * are faster (1.55 against 1.71 us at 32 KB).
 */
constexpr size_t kLamportWideBlockMinBytes = size_t{128} * 1024;

/**
 * Data threads per block of a launch whose LamportAllReduceArgs::blockThreads is 0: for a kFast
 * (one-shot) message of messageBytes, kLamportFastWideBlockThreads from kLamportWideBlockMinBytes
 * on, else kLamportFastSmallBlockThreads; the two-shot always kLamportFastSmallBlockThreads (the
 * wide blocks are not measured for it). Host code, no CUDA call.
 */
constexpr int lamportDefaultDataThreads(bool oneShot, size_t messageBytes) {
  return oneShot && messageBytes >= kLamportWideBlockMinBytes ? kLamportFastWideBlockThreads
                                                              : kLamportFastSmallBlockThreads;
}

/**
 * Input vectors a data thread of kFast's stash kernel (LamportFastPass::kGridStridedStash) keeps in
 * dynamic shared memory beyond its first (in registers), for the reduce pass, instead of reading
 * sendbuff again. At 2 ranks with 256-thread blocks on an H200 (132 blocks of 256 threads) the
 * grid then holds up to about 2.1 MB; beyond that, further groups are read twice (still correct).
 */
constexpr int kLamportFastStashGroups = 3;

/**
 * Dynamic shared memory, in bytes, of every kFast and kTwoShot launch with dataThreads data threads
 * per block: the stash's kLamportFastStashGroups 16-byte vectors a data thread, whether the kernel
 * uses it or not. Why every kernel: an SM's shared-memory carveout is set for the blocks it runs,
 * so an SM configured for a spinning kernel with almost no shared memory might not take a stash
 * block beside it, which is the deadlock that bound prevents. With one size per block size, the
 * co-residency argument of kLamportResidencyShare covers every mix of these kernels. At most 24 KB
 * (512 data threads); it does not lower the blocks an SM holds (registers limit them first).
 */
constexpr size_t lamportDynamicSmemBytes(int dataThreads) {
  return static_cast<size_t>(kLamportFastStashGroups) * static_cast<size_t>(dataThreads) * 16;
}

/**
 * Which of kFast's kernels its kAuto pass launches (host code, no CUDA call): kSinglePass where its
 * grid holds the message (onePassFits) and gets the early PDL trigger (!onePassLate), the least
 * code per call; else kGridStridedStash, which reads sendbuff once for up to
 * 1 + kLamportFastStashGroups groups a thread and clears what it received in place. Measured on
 * one H200 (loopback, graph, bf16; docs/loopback-log-1xh200.md, session 6), the stash kernel
 * against the single pass / plain grid-strided kernel: 2 ranks 512 KB 2.6 us against 2.8, 2 MB
 * 5.2 against 6.0; 4 ranks 2 MB 25.3 against 30.2; 8 ranks 2 MB 108 against 117 (its grid is
 * smaller there: more registers; it is faster all the same).
 */
constexpr LamportFastPass lamportAutoFastPass(bool onePassFits, bool onePassLate) {
  return onePassFits && !onePassLate ? LamportFastPass::kSinglePass : LamportFastPass::kGridStridedStash;
}

/**
 * Whether a kFast / kTwoShot launch of `blocks` blocks, on a device that holds `residentBlocks`
 * of them at once, uses the late PDL trigger (LamportAllReduceArgs::triggerAfterWait): requested > 0
 * always, requested < 0 never, requested == 0 when the grid is more than
 * 1/kLamportEarlyTriggerShare of the device (the co-residency argument of kLamportResidencyShare).
 * Host code, no CUDA call.
 */
constexpr bool lamportUseLateTrigger(int requested, size_t blocks, int residentBlocks) {
  if (requested != 0) return requested > 0;
  return blocks * static_cast<size_t>(kLamportEarlyTriggerShare) > static_cast<size_t>(residentBlocks);
}

/** The triggerAfterWait value the kernel must receive: exactly 1 (late) or 0 (early), since the
 *  kernel reads every non-zero value as late. */
constexpr int lamportKernelTriggerArg(int requested, size_t blocks, int residentBlocks) {
  return lamportUseLateTrigger(requested, blocks, residentBlocks) ? 1 : 0;
}

/** Everything one allreduce launch needs (one-shot or two-shot); passed by value to the kernel. */
struct LamportAllReduceArgs {
  const void* sendbuff;  // count elements, any alignment; may equal recvbuff
  void* recvbuff;        // count elements, any alignment
  size_t count;          // elements; count * elementSize <= layout.slotBytes (kTwoShot: see below)
  LamportDataType datatype;
  LamportReduceOp op;
  int rank;
  LamportLayout layout;
  // Base address, in this process, of every rank's workspace allocation (peerBases[rank] is the
  // local one, where the control block and this rank's receive buffers live).
  char* peerBases[kLamportMaxRanks];
  const volatile uint32_t* abortFlag;  // host-mapped; non-zero: stop waiting (ncclCommAbort);
                                       // may be null (no abort)
  uint32_t* errorFlag;                 // host-mapped; kernel writes a LamportError on give-up;
                                       // may be null
  uint64_t timeoutNs;                  // give up after this long without the peers' data;
                                       // 0 = wait without a time limit (abort still works)
  int maxBlocks;  // 0: the launcher sizes the grid; > 0 caps it (the kernel grid-strides). Tests
                  // that put several ranks on one GPU use it so all ranks' blocks are resident.
  LamportKernelVariant variant;  // kFast (0, default), kBaseline or kTwoShot
  int blockThreads;  // kFast/kTwoShot: data threads per block, 0 = lamportDefaultDataThreads
                     // (128, or 256 for a kFast message of 128 KB or more); 32..512, a multiple of 32
                     // (one more warp is added for the arrival). kBaseline: must be 0 (always 512)
  int disablePdl;    // kFast/kTwoShot: non-zero launches without programmatic dependent launch
                     // (A/B); PDL is used only on sm_90+ anyway. kBaseline never uses it
  int residencyShare;  // kFast/kTwoShot: the grid takes at most 1/residencyShare of the blocks the
                       // device holds at once; 0 = kLamportResidencyShare (A/B and tests only)
  int triggerAfterWait;  // kFast/kTwoShot with PDL, when a block lets the next kernel on the stream
                         // be launched. Early: once its arrival is counted (the most overlap, but the
                         // pre-launched grid holds SMs while this one may still wait for peers).
                         // Late: once all its data threads have their peers' data. 0 = the launcher
                         // decides (early up to 1/kLamportEarlyTriggerShare of the device, else
                         // late); > 0 = always late, < 0 = always early (A/B and tests only)
  int vectorsPerThread;  // kFast, A/B only: vectors a data thread keeps in registers and polls
                         // together; 0 or 1 = the shipped kernel. 2 and 4 exist for bf16 at 2, 4
                         // and 8 ranks only (kernels/lamport_oneshot_variants.cu), else
                         // cudaErrorInvalidValue
  LamportFastPass fastPass;  // kFast with vectorsPerThread 0 or 1: kAuto (0) = lamportAutoFastPass
                             // (the single pass where its grid holds the message and gets the
                             // early trigger, else kGridStridedStash); kSinglePass: where its grid
                             // holds the message, else kGridStrided; kGridStrided and
                             // kGridStridedStash always; kSinglePassNoBarrier (A/B, bf16 at 2, 4, 8
                             // ranks only) where its grid holds the message, else kGridStrided;
                             // kGridStridedStashPrefetch (A/B, bf16 at 2, 4, 8 ranks) always.
                             // Anything else, or a value other than kAuto for another variant or
                             // shape: cudaErrorInvalidValue
  int minBlocksPerSm;  // kFast, A/B only: 0 = the shipped kernel; 5 or 7 = its grid-strided
                       // one-vector kernel compiled for that many blocks of 256 + 32 threads per
                       // SM (a register cap through __launch_bounds__), bf16 at 2, 4 and 8 ranks,
                       // at most 256 data threads per block, fastPass kAuto
                       // (kernels/lamport_oneshot_variants.cu); else cudaErrorInvalidValue
  int remoteSyncDomain;  // non-zero, on sm_90+: launch in CUDA's remote memory-synchronisation
                         // domain, as NCCL 2.28 launches its own kernels there (NCCL_MEM_SYNC_DOMAIN,
                         // default 1, src/enqueue.cc), so that a fence of ours does not wait for
                         // the compute kernels' writes in the default domain; 0: the default domain
};

/**
 * Launches the Lamport allreduce kernel args.variant selects (one-shot kFast / kBaseline, or the
 * two-shot kTwoShot) on `stream` (the current device must be the one that
 * owns peerBases[rank]). Works under CUDA-graph capture: all rotation state is in device memory.
 * Returns cudaErrorInvalidValue for bad args (count too large for the slot, nRanks out of range,
 * rank out of range, null peer base, unknown datatype/op); these checks make no CUDA call.
 * count == 0 launches nothing and returns cudaSuccess (the rotation does not advance, on any rank).
 */
cudaError_t launchLamportAllReduce(const LamportAllReduceArgs& args, cudaStream_t stream);

/**
 * Blocks the launcher gives a launch of `args` (before maxBlocks): min(vectors / threads,
 * the residency bound of the variant), for kFast the bound of its grid-strided kernel. The launcher
 * may give a kFast launch more blocks than this: the single-pass kernel (LamportFastPass), where its
 * own, larger bound holds the whole message (e.g. bf16 at 2 ranks on an H200, up to about 946 KB).
 * As a maxBlocks cap the value stays safe: the launch then takes a grid-strided kernel (kAuto:
 * the stash kernel). 0 for invalid args. Current device; cached like a launch.
 */
int lamportAllReduceGridBlocks(const LamportAllReduceArgs& args);

/**
 * Blocks of the args' kernel variant (datatype, op, nRanks, variant, blockThreads; for kFast the
 * fewest of the kernels a launch may pick: single pass, stash, grid-strided) the current device
 * holds at once (occupancy x SMs, with lamportDynamicSmemBytes); 0 for invalid args. Cached per device and variant. To share one GPU between N grids of any
 * kFast kernel, set residencyShare >= N rather than maxBlocks from this count.
 */
int lamportAllReduceResidentBlocks(const LamportAllReduceArgs& args);

/**
 * Loads every kernel (one-shot and two-shot) a communicator of nRanks may launch on the current device
 * and caches its grid limit, so no launch ever loads a module lazily (which is not allowed during
 * stream capture and may deadlock while another Lamport kernel spins). Call outside capture.
 */
cudaError_t lamportPrepareKernels(int nRanks);

/**
 * Prepares a freshly allocated workspace: every buffer byte set to the empty sentinel (-0.0 in
 * every 32-bit word) and the control block zeroed. Stream-ordered on `stream`.
 */
cudaError_t launchLamportWorkspaceInit(char* localBase, const LamportLayout& layout,
                                       cudaStream_t stream);

}  // namespace nccl_lamport
