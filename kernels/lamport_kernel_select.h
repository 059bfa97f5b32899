// Internal to kernels/: the kernel selectors the launcher (lamport_launch.cu) uses across
// translation units, so each kernel family is instantiated in its own file.
#pragma once

#include "kernels/lamport_allreduce.h"

namespace nccl_lamport {

/** Any Lamport allreduce kernel: one argument, the launch args, by value. */
using LamportKernelFn = void (*)(const LamportAllReduceArgs);

/** The two-shot kernel for (datatype, op, nRanks); null for an unknown datatype or op. */
LamportKernelFn selectTwoShotKernel(LamportDataType datatype, LamportReduceOp op, int nRanks);

/**
 * Vectors a kFast data thread keeps in registers and polls together, as shipped: 1 at every nRanks.
 * Measured on one H200 (docs/loopback-log-1xh200.md, session 4 call 2, loopback graph bf16):
 * at 2 ranks 4 vectors a thread (96 registers, 54 KB of code) took 1.92 us at 8 B and 7.74 at
 * 2 MB, 1 vector (50 registers, 17 KB) 1.47 and 6.68, and 1 was as fast or faster at every size
 * from 8 B to 2 MB at 2 and 4 ranks; the larger code of the unrolled loops costs more than the
 * overlapped polls gain.
 */
constexpr int kLamportFastVectorsPerThread = 1;

/**
 * Grid-limit cache slots of the kFast one-shot A/B kernels per unrolled nRanks
 * (lamport_oneshot_variants.cu), 1-based: slots 1..kLamportNoBarrierSlot - 1 hold the shapes with
 * more vectors per thread or a register cap, then come the A/B passes: the single-pass kernel
 * without the block barrier (kLamportNoBarrierSlot) and the stash kernel that prefetches its
 * groups (kLamportPrefetchSlot, the last: kLamportFastShapeSlots slots in all).
 */
constexpr int kLamportFastShapeSlots = 6;
constexpr int kLamportNoBarrierSlot = 5;
constexpr int kLamportPrefetchSlot = 6;

/**
 * The kFast one-shot A/B shape with vectorsPerThread vectors per data thread (0 = 1) and, where
 * minBlocksPerSm > 0, the launch bounds of that many 288-thread blocks per SM
 * (LamportAllReduceArgs::vectorsPerThread, ::minBlocksPerSm), as lamport_oneshot_variants.cu
 * instantiates them (bf16, sum and avg, 2, 4 and 8 ranks). *slot gets 1..kLamportNoBarrierSlot - 1
 * (its index among the shapes of that nRanks, for the launcher's grid-limit cache). Null when that
 * shape is not built.
 */
LamportKernelFn selectFastKernelShape(LamportDataType datatype, LamportReduceOp op, int nRanks, int vectorsPerThread,
                                      int minBlocksPerSm, int* slot);

/**
 * The kernel of an A/B pass of kFast (lamport_oneshot_variants.cu), bf16, sum and avg:
 * kSinglePassNoBarrier (the single pass without the block barrier) at 2, 4 and 8 ranks,
 * kGridStridedStashPrefetch at 2, 4 and 8 ranks; null otherwise. *slot gets its grid-limit cache slot
 * (kLamportNoBarrierSlot or kLamportPrefetchSlot).
 */
LamportKernelFn selectFastAbPassKernel(LamportDataType datatype, LamportReduceOp op, int nRanks, LamportFastPass pass,
                                       int* slot);

}  // namespace nccl_lamport
