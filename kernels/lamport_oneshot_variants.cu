// A/B shapes of the kFast one-shot kernel, for nccl-lamport-bench --loopback only: more vectors per
// data thread (K) than the shipped 1, the grid-strided kernel under a register cap, and the
// single-pass kernel without its block barrier, and the stash kernel that prefetches its groups,
// bf16 only (sum and avg), 2, 4 and 8 ranks, so that
// every run shows what the choices of docs/loopback-log-1xh200.md (session 4) are worth on its
// machine. The plugin never selects them.
#include "kernels/lamport_kernel_select.h"
#include "kernels/lamport_oneshot_fast.cuh"

namespace nccl_lamport {

/**
 * The shipped grid-strided one-vector kernel compiled for MIN_BLOCKS blocks of
 * kLamportFastWideBlockThreads + 32 threads per SM: a register cap (at 2 ranks 40 registers for
 * 5 blocks, 32 for 7, against 50 uncapped, with small spills; nvcc --resource-usage), so that a
 * quarter of the device holds more data threads for messages too large for the single pass.
 */
template <typename T, LamportReduceOp OP, int NRANKS, int MIN_BLOCKS>
__global__ void __launch_bounds__(kLamportFastWideBlockThreads + 32, MIN_BLOCKS)
    lamportOneShotFastCappedKernel(const __grid_constant__ LamportAllReduceArgs args) {
  lamportOneShotFastBody<T, OP, NRANKS, 1, LamportFastPass::kGridStrided>(args);
}

namespace {

/** One A/B shape: K vectors per data thread; minBlocksPerSm > 0: the register-capped kernel. */
struct FastShape {
  int nRanks;
  int vectorsPerThread;
  int minBlocksPerSm;
};

// The editable list: per nRanks at most kLamportNoBarrierSlot - 1 shapes, in slot order
// (1-based); shapeKernel() below must follow it. K = 4 at 2 ranks and 2 at 4 were shipped until
// session 4.
constexpr FastShape kShapes[] = {
    {2, 2, 0}, {2, 4, 0}, {2, 1, 5}, {2, 1, 7},  // 2 ranks
    {4, 2, 0}, {4, 4, 0}, {4, 1, 5}, {4, 1, 7},  // 4 ranks
    {8, 2, 0}, {8, 1, 5}, {8, 1, 7},             // 8 ranks
};

/** Shapes listed for nRanks: each takes a cache slot below kLamportNoBarrierSlot. */
constexpr int shapesFor(int nRanks) {
  int n = 0;
  for (const FastShape& shape : kShapes) n += shape.nRanks == nRanks ? 1 : 0;
  return n;
}
static_assert(shapesFor(2) < kLamportNoBarrierSlot && shapesFor(4) < kLamportNoBarrierSlot &&
                  shapesFor(8) < kLamportNoBarrierSlot && kLamportNoBarrierSlot < kLamportPrefetchSlot &&
                  kLamportPrefetchSlot <= kLamportFastShapeSlots,
              "more A/B shapes for one nRanks than cache slots (kLamportFastShapeSlots)");

template <typename T, LamportReduceOp OP>
LamportKernelFn shapeKernel(int index) {
  switch (index) {
    case 0: return lamportOneShotFastKernel<T, OP, 2, 2>;
    case 1: return lamportOneShotFastKernel<T, OP, 2, 4>;
    case 2: return lamportOneShotFastCappedKernel<T, OP, 2, 5>;
    case 3: return lamportOneShotFastCappedKernel<T, OP, 2, 7>;
    case 4: return lamportOneShotFastKernel<T, OP, 4, 2>;
    case 5: return lamportOneShotFastKernel<T, OP, 4, 4>;
    case 6: return lamportOneShotFastCappedKernel<T, OP, 4, 5>;
    case 7: return lamportOneShotFastCappedKernel<T, OP, 4, 7>;
    case 8: return lamportOneShotFastKernel<T, OP, 8, 2>;
    case 9: return lamportOneShotFastCappedKernel<T, OP, 8, 5>;
    case 10: return lamportOneShotFastCappedKernel<T, OP, 8, 7>;
    default: return nullptr;
  }
}

}  // namespace

LamportKernelFn selectFastKernelShape(LamportDataType datatype, LamportReduceOp op, int nRanks, int vectorsPerThread,
                                      int minBlocksPerSm, int* slot) {
  if (datatype != LamportDataType::kBFloat16) return nullptr;
  if (vectorsPerThread == 0) vectorsPerThread = 1;
  int slotInRanks = 0;
  for (int i = 0; i < static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0])); ++i) {
    if (kShapes[i].nRanks != nRanks) continue;
    ++slotInRanks;
    if (kShapes[i].vectorsPerThread != vectorsPerThread || kShapes[i].minBlocksPerSm != minBlocksPerSm) continue;
    if (slot != nullptr) *slot = slotInRanks;
    switch (op) {
      case LamportReduceOp::kSum: return shapeKernel<__nv_bfloat16, LamportReduceOp::kSum>(i);
      case LamportReduceOp::kAvg: return shapeKernel<__nv_bfloat16, LamportReduceOp::kAvg>(i);
    }
    return nullptr;
  }
  return nullptr;
}

namespace {

template <typename T, LamportReduceOp OP, LamportFastPass PASS>
LamportKernelFn passForRanks(int nRanks) {
  switch (nRanks) {
    case 2: return lamportOneShotFastKernel<T, OP, 2, 1, PASS>;
    case 4: return lamportOneShotFastKernel<T, OP, 4, 1, PASS>;
    case 8: return lamportOneShotFastKernel<T, OP, 8, 1, PASS>;
    default: return nullptr;
  }
}

template <typename T, LamportReduceOp OP>
LamportKernelFn abPassForRanks(int nRanks, LamportFastPass pass) {
  switch (pass) {
    case LamportFastPass::kSinglePassNoBarrier:
      return passForRanks<T, OP, LamportFastPass::kSinglePassNoBarrier>(nRanks);
    case LamportFastPass::kGridStridedStashPrefetch:
      return passForRanks<T, OP, LamportFastPass::kGridStridedStashPrefetch>(nRanks);
    default:
      return nullptr;
  }
}

}  // namespace

LamportKernelFn selectFastAbPassKernel(LamportDataType datatype, LamportReduceOp op, int nRanks, LamportFastPass pass,
                                       int* slot) {
  if (datatype != LamportDataType::kBFloat16) return nullptr;
  if (slot != nullptr) {
    *slot = pass == LamportFastPass::kGridStridedStashPrefetch ? kLamportPrefetchSlot : kLamportNoBarrierSlot;
  }
  switch (op) {
    case LamportReduceOp::kSum: return abPassForRanks<__nv_bfloat16, LamportReduceOp::kSum>(nRanks, pass);
    case LamportReduceOp::kAvg: return abPassForRanks<__nv_bfloat16, LamportReduceOp::kAvg>(nRanks, pass);
  }
  return nullptr;
}

}  // namespace nccl_lamport
