// The kernels' vocabulary, without CUDA: datatypes, ops, error codes, kernel variants and grid
// passes. Host code that only names them (the router, the benchmark's report) includes this
// instead of lamport_allreduce.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nccl_lamport {

/** Datatypes the kernels are instantiated for. */
enum class LamportDataType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };
/** Bytes of one element of datatype (0 for a value outside the enum). */
constexpr size_t lamportElementBytes(LamportDataType datatype) {
  return datatype == LamportDataType::kFloat32                                           ? 4
         : datatype == LamportDataType::kFloat16 || datatype == LamportDataType::kBFloat16 ? 2
                                                                                          : 0;
}
/** Ops: kAvg is the fp32 sum scaled by 1/nRanks before the single conversion. */
enum class LamportReduceOp : int { kSum = 0, kAvg = 1 };

/** Values the kernel writes into *errorFlag when it gives up (0 = none). */
enum LamportError : uint32_t { kLamportOk = 0, kLamportTimedOut = 1, kLamportAborted = 2 };

/**
 * Which kernel a launch runs. kFast is the default (a zero-initialised args struct gets
 * it); kBaseline is the kernel of 2026-12-01, kept unchanged so benchmarks can time both in one
 * run (nccl-lamport-bench --loopback).
 *   kFast:     programmatic dependent launch on sm_90+ (griddepcontrol.wait before the rotation
 *              state or sendbuff is read, launch_dependents after the pushes); the arrival count
 *              and rotation update on a dedicated control warp (one acq_rel atomic per block, no
 *              fence on a data thread); the abort flag read by one lane per warp; one vector
 *              per data thread at a time (more, with all their polls in flight together, are
 *              A/B shapes: LamportAllReduceArgs::vectorsPerThread); 128 data threads per block by
 *              default, 256 from 128 KB (lamportDefaultDataThreads); at most
 *              1/kLamportResidencyShare of the device per launch (the co-residency bound,
 *              lamport_allreduce.h), the late PDL trigger above 1/kLamportEarlyTriggerShare of it.
 *   kBaseline: 512-thread blocks, full-residency grid, no PDL, fence + atomic arrival on thread 0
 *              (docs/results-loopback-1xh200.md measures it; its full-residency grid can deadlock two
 *              communicators used in opposite orders: A/B timing only).
 *   kTwoShot:  the two-shot kernel (kernels/lamport_twoshot.cuh: Lamport reduce-scatter then
 *              all-gather, the kFast launch options and grid bound), for many ranks and large
 *              messages of up to lamportTwoShotMaxVectors (lamport_layout.h) 16-byte vectors:
 *              about nRanks / 2 slots.
 */
enum class LamportKernelVariant : int { kFast = 0, kBaseline = 1, kTwoShot = 2 };

/**
 * How a kFast grid walks the message. kGridStrided: any grid, vectors grid-strided. kSinglePass:
 * a grid with one vector per data thread for the whole message, so the kernel has no grid-stride
 * loop (10 KB of code against 17 KB at 2 ranks: 0.1 us a call less up to 32 KB on one H200,
 * docs/loopback-log-1xh200.md, session 4). kAuto, the default: kSinglePass where such a grid
 * fits the residency bound and gets the early PDL trigger, else kGridStridedStash
 * (lamportAutoFastPass). kSinglePassNoBarrier (A/B, bf16 at 2, 4, 8 ranks): kSinglePass with
 * every thread reading the rotation state itself instead of a block barrier (measured slower).
 * kGridStridedStash (every datatype and nRanks): kGridStrided keeping up to
 * kLamportFastStashGroups further input vectors a thread in dynamic shared memory for the reduce
 * pass instead of reading sendbuff twice, and setting each received vector back to the sentinel
 * as soon as it is reduced, while its line is still in L2, instead of leaving the next round a
 * clear of the whole buffer (loopback on one H200, 2 ranks, 2 MB: 6.00 us without either, 5.41
 * with the stash, 5.16 with the in-place clear too; docs/loopback-log-1xh200.md, sessions 5
 * and 6). Every kFast and kTwoShot launch carries the stash's dynamic shared memory
 * (lamportDynamicSmemBytes), so that its blocks fit beside any of them.
 * kGridStridedStashPrefetch (A/B, bf16 at 2, 4, 8 ranks): kGridStridedStash with the stash
 * groups copied from sendbuff into shared memory at entry (cp.async), all in flight together.
 */
enum class LamportFastPass : int {
  kAuto = 0,
  kGridStrided = 1,
  kSinglePass = 2,
  kSinglePassNoBarrier = 3,
  kGridStridedStash = 4,
  kGridStridedStashPrefetch = 5
};

}  // namespace nccl_lamport
