// A/B shapes of the kFast one-shot kernel, for nccl-lamport-bench --loopback only: more vectors per
// data thread (K) than the shipped 1, and the single-pass kernel without its block barrier, bf16
// only (sum and avg), 2, 4 and 8 ranks, so that every run shows what the choices of
// docs/results-loopback-1xh200.md (session 4) are worth on its machine. The plugin never selects
// them.
#include "kernels/lamport_kernel_select.h"
#include "kernels/lamport_oneshot_fast.cuh"

namespace nccl_lamport {
namespace {

/** One A/B shape: K vectors per data thread. */
struct FastShape {
  int nRanks;
  int vectorsPerThread;
};

// The editable list: per nRanks at most kLamportFastShapeSlots shapes, in slot order (1-based);
// shapeKernel() below must follow it. K = 4 at 2 ranks and 2 at 4 were shipped until session 4.
constexpr FastShape kShapes[] = {
    {2, 2}, {2, 4},  // 2 ranks
    {4, 2}, {4, 4},  // 4 ranks
    {8, 2},          // 8 ranks
};

template <typename T, LamportReduceOp OP>
LamportKernelFn shapeKernel(int index) {
  switch (index) {
    case 0: return lamportOneShotFastKernel<T, OP, 2, 2>;
    case 1: return lamportOneShotFastKernel<T, OP, 2, 4>;
    case 2: return lamportOneShotFastKernel<T, OP, 4, 2>;
    case 3: return lamportOneShotFastKernel<T, OP, 4, 4>;
    case 4: return lamportOneShotFastKernel<T, OP, 8, 2>;
    default: return nullptr;
  }
}

}  // namespace

LamportKernelFn selectFastKernelShape(LamportDataType datatype, LamportReduceOp op, int nRanks, int vectorsPerThread,
                                      int* slot) {
  if (datatype != LamportDataType::kBFloat16) return nullptr;
  int slotInRanks = 0;
  for (int i = 0; i < static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0])); ++i) {
    if (kShapes[i].nRanks != nRanks) continue;
    ++slotInRanks;
    if (kShapes[i].vectorsPerThread != vectorsPerThread) continue;
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

template <typename T, LamportReduceOp OP>
LamportKernelFn noBarrierForRanks(int nRanks) {
  constexpr LamportFastPass kPass = LamportFastPass::kSinglePassNoBarrier;
  switch (nRanks) {
    case 2: return lamportOneShotFastKernel<T, OP, 2, 1, kPass>;
    case 4: return lamportOneShotFastKernel<T, OP, 4, 1, kPass>;
    case 8: return lamportOneShotFastKernel<T, OP, 8, 1, kPass>;
    default: return nullptr;
  }
}

}  // namespace

LamportKernelFn selectFastNoBarrierKernel(LamportDataType datatype, LamportReduceOp op, int nRanks) {
  if (datatype != LamportDataType::kBFloat16) return nullptr;
  switch (op) {
    case LamportReduceOp::kSum: return noBarrierForRanks<__nv_bfloat16, LamportReduceOp::kSum>(nRanks);
    case LamportReduceOp::kAvg: return noBarrierForRanks<__nv_bfloat16, LamportReduceOp::kAvg>(nRanks);
  }
  return nullptr;
}

}  // namespace nccl_lamport
