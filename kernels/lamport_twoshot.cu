// Instantiations of the two-shot kernel (lamport_twoshot.cuh) and its selector for the launcher
// in lamport_launch.cu. Unrolled world sizes 4 and 8; every other nRanks takes the generic path.
#include "kernels/lamport_kernel_select.h"
#include "kernels/lamport_twoshot.cuh"

namespace nccl_lamport {

#define LAMPORT_TWOSHOT_INSTANTIATE(T, OP, N) \
  template __global__ void lamportTwoShotKernel<T, OP, N>(const __grid_constant__ LamportAllReduceArgs);
#define LAMPORT_TWOSHOT_FOR_EACH_NRANKS(T, OP) \
  LAMPORT_TWOSHOT_INSTANTIATE(T, OP, 0) LAMPORT_TWOSHOT_INSTANTIATE(T, OP, 4) LAMPORT_TWOSHOT_INSTANTIATE(T, OP, 8)
#define LAMPORT_TWOSHOT_FOR_EACH_OP(T)                   \
  LAMPORT_TWOSHOT_FOR_EACH_NRANKS(T, LamportReduceOp::kSum) \
  LAMPORT_TWOSHOT_FOR_EACH_NRANKS(T, LamportReduceOp::kAvg)
LAMPORT_TWOSHOT_FOR_EACH_OP(float)
LAMPORT_TWOSHOT_FOR_EACH_OP(__half)
LAMPORT_TWOSHOT_FOR_EACH_OP(__nv_bfloat16)
#undef LAMPORT_TWOSHOT_FOR_EACH_OP
#undef LAMPORT_TWOSHOT_FOR_EACH_NRANKS
#undef LAMPORT_TWOSHOT_INSTANTIATE

namespace {

template <typename T, LamportReduceOp OP>
LamportKernelFn forRanks(int nRanks) {
  switch (nRanks) {
    case 4:
      return lamportTwoShotKernel<T, OP, 4>;
    case 8:
      return lamportTwoShotKernel<T, OP, 8>;
    default:
      return lamportTwoShotKernel<T, OP, 0>;
  }
}

template <typename T>
LamportKernelFn forOp(LamportReduceOp op, int nRanks) {
  switch (op) {
    case LamportReduceOp::kSum:
      return forRanks<T, LamportReduceOp::kSum>(nRanks);
    case LamportReduceOp::kAvg:
      return forRanks<T, LamportReduceOp::kAvg>(nRanks);
  }
  return nullptr;
}

}  // namespace

LamportKernelFn selectTwoShotKernel(LamportDataType datatype, LamportReduceOp op, int nRanks) {
  switch (datatype) {
    case LamportDataType::kFloat32:
      return forOp<float>(op, nRanks);
    case LamportDataType::kFloat16:
      return forOp<__half>(op, nRanks);
    case LamportDataType::kBFloat16:
      return forOp<__nv_bfloat16>(op, nRanks);
  }
  return nullptr;
}

}  // namespace nccl_lamport
