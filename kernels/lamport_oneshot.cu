// Host launchers of the Lamport one-shot kernel and the workspace init (lamport_allreduce.h).
// No policy here: validate, size the grid, launch, return the launch's cudaError_t.
#include <atomic>
#include <cstdint>

#include "kernels/lamport_allreduce.h"
#include "kernels/lamport_oneshot.cuh"

namespace nccl_lamport {

// ---------------------------------------------------------------------------------------------
// Explicit instantiations: the one editable list of datatype x op x unrolled world size
// (0 = generic nRanks). Add a row here and a case in selectKernel() to add a variant.
// ---------------------------------------------------------------------------------------------
#define LAMPORT_ONESHOT_FOR_EACH_NRANKS(X, T, OP) X(T, OP, 0) X(T, OP, 2) X(T, OP, 4) X(T, OP, 8)
#define LAMPORT_ONESHOT_FOR_EACH_OP(X, T)                        \
  LAMPORT_ONESHOT_FOR_EACH_NRANKS(X, T, LamportReduceOp::kSum) \
  LAMPORT_ONESHOT_FOR_EACH_NRANKS(X, T, LamportReduceOp::kAvg)
#define LAMPORT_ONESHOT_INSTANTIATE(T, OP, N) \
  template __global__ void lamportOneShotKernel<T, OP, N>(const __grid_constant__ LamportOneShotArgs);
LAMPORT_ONESHOT_FOR_EACH_OP(LAMPORT_ONESHOT_INSTANTIATE, float)
LAMPORT_ONESHOT_FOR_EACH_OP(LAMPORT_ONESHOT_INSTANTIATE, __half)
LAMPORT_ONESHOT_FOR_EACH_OP(LAMPORT_ONESHOT_INSTANTIATE, __nv_bfloat16)
#undef LAMPORT_ONESHOT_INSTANTIATE
#undef LAMPORT_ONESHOT_FOR_EACH_OP
#undef LAMPORT_ONESHOT_FOR_EACH_NRANKS

__global__ void lamportWorkspaceInitKernel(char* base, size_t nVectors) {
  constexpr size_t kControlVectors = kLamportControlBytes / kLamportVectorBytes;
  const LamportVec zero{{0u, 0u, 0u, 0u}};
  const LamportVec empty = lamportEmptyVec();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < nVectors;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    reinterpret_cast<LamportVec*>(base)[i] = i < kControlVectors ? zero : empty;
  }
}

namespace {

using OneShotKernel = void (*)(const LamportOneShotArgs);

bool layoutValid(const LamportLayout& layout) {
  return layout.nRanks >= 2 && layout.nRanks <= kLamportMaxRanks && layout.slotBytes != 0 &&
         layout.slotBytes % kLamportVectorBytes == 0 &&
         // dirtyBytes is a uint32_t in LamportDeviceState.
         layout.slotBytes <= UINT32_MAX - (kLamportVectorBytes - 1);
}

template <typename T, LamportReduceOp OP>
OneShotKernel selectForRanks(int nRanks) {
  switch (nRanks) {
    case 2:
      return lamportOneShotKernel<T, OP, 2>;
    case 4:
      return lamportOneShotKernel<T, OP, 4>;
    case 8:
      return lamportOneShotKernel<T, OP, 8>;
    default:  // unrolled: 2, 4, 8; everything else up to kLamportMaxRanks: generic
      return lamportOneShotKernel<T, OP, 0>;
  }
}

template <typename T>
OneShotKernel selectForOp(LamportReduceOp op, int nRanks) {
  switch (op) {
    case LamportReduceOp::kSum:
      return selectForRanks<T, LamportReduceOp::kSum>(nRanks);
    case LamportReduceOp::kAvg:
      return selectForRanks<T, LamportReduceOp::kAvg>(nRanks);
  }
  return nullptr;
}

OneShotKernel selectKernel(LamportDataType datatype, LamportReduceOp op, int nRanks) {
  switch (datatype) {
    case LamportDataType::kFloat32:
      return selectForOp<float>(op, nRanks);
    case LamportDataType::kFloat16:
      return selectForOp<__half>(op, nRanks);
    case LamportDataType::kBFloat16:
      return selectForOp<__nv_bfloat16>(op, nRanks);
  }
  return nullptr;
}

/** Index of a kernel variant in the grid-limit cache: datatype x op x unrolled nRanks. */
int variantIndex(LamportDataType datatype, LamportReduceOp op, int nRanks) {
  const int ranksSlot = nRanks == 2 ? 1 : nRanks == 4 ? 2 : nRanks == 8 ? 3 : 0;
  return (static_cast<int>(datatype) * 2 + static_cast<int>(op)) * 4 + ranksSlot;
}

constexpr int kCachedDevices = 64;
constexpr int kVariants = 3 * 2 * 4;
// Grid limit per (device, variant); 0 = not computed yet. Written once, read on every launch.
std::atomic<int> gResidentBlocks[kCachedDevices][kVariants];

/**
 * Blocks of `kernel` that the current device runs at once (blocks per SM x SMs): a grid no larger
 * is resident as a whole, which the Lamport wait needs (see lamportOneShotKernel), and more
 * resident threads keep more 16 B NVLink accesses in flight for large messages. Cached per
 * (device, variant); falls back to 132 (one block per H100/H200 SM) if a query fails.
 */
int maxResidentBlocks(OneShotKernel kernel, int variant) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 132;
  const bool cacheable = device >= 0 && device < kCachedDevices;
  if (cacheable) {
    const int cached = gResidentBlocks[device][variant].load(std::memory_order_relaxed);
    if (cached > 0) return cached;
  }
  int smCount = 0;
  int perSm = 0;
  if (cudaDeviceGetAttribute(&smCount, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, kLamportOneShotThreads, 0) !=
          cudaSuccess ||
      smCount <= 0 || perSm <= 0) {
    return 132;
  }
  const int blocks = smCount * perSm;
  if (cacheable) gResidentBlocks[device][variant].store(blocks, std::memory_order_relaxed);
  return blocks;
}

}  // namespace

cudaError_t launchLamportOneShot(const LamportOneShotArgs& args, cudaStream_t stream) {
  const size_t elemBytes = lamportElementBytes(args.datatype);
  const LamportLayout& layout = args.layout;
  if (elemBytes == 0 || !layoutValid(layout) || args.rank < 0 || args.rank >= layout.nRanks ||
      args.maxBlocks < 0 || args.count > layout.slotBytes / elemBytes) {
    return cudaErrorInvalidValue;
  }
  const OneShotKernel kernel = selectKernel(args.datatype, args.op, layout.nRanks);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  for (int r = 0; r < layout.nRanks; ++r) {
    if (args.peerBases[r] == nullptr) return cudaErrorInvalidValue;
  }
  // An empty call is a no-op on every rank alike (count is the same everywhere): no launch, and
  // the rotation does not advance anywhere.
  if (args.count == 0) return cudaSuccess;
  if (args.sendbuff == nullptr || args.recvbuff == nullptr) return cudaErrorInvalidValue;

  // Grid: the whole message in flight at once, one 16 B vector per thread, one block for tiny
  // messages, capped at what the device holds at once (then the kernel grid-strides).
  const size_t nVectors = (args.count * elemBytes + kLamportVectorBytes - 1) / kLamportVectorBytes;
  size_t blocks = (nVectors + kLamportOneShotThreads - 1) / kLamportOneShotThreads;
  const int residentBlocks = maxResidentBlocks(kernel, variantIndex(args.datatype, args.op, layout.nRanks));
  if (blocks > static_cast<size_t>(residentBlocks)) blocks = static_cast<size_t>(residentBlocks);
  if (args.maxBlocks > 0 && blocks > static_cast<size_t>(args.maxBlocks)) {
    blocks = static_cast<size_t>(args.maxBlocks);
  }

  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kLamportOneShotThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = nullptr;
  config.numAttrs = 0;
  return cudaLaunchKernelEx(&config, kernel, args);
}

cudaError_t lamportPrepareKernels(int nRanks) {
  for (LamportDataType datatype : {LamportDataType::kFloat32, LamportDataType::kFloat16, LamportDataType::kBFloat16}) {
    for (LamportReduceOp op : {LamportReduceOp::kSum, LamportReduceOp::kAvg}) {
      const OneShotKernel kernel = selectKernel(datatype, op, nRanks);
      cudaFuncAttributes attributes{};
      const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);  // loads the module
      if (err != cudaSuccess) return err;
      maxResidentBlocks(kernel, variantIndex(datatype, op, nRanks));
    }
  }
  return cudaSuccess;
}

cudaError_t launchLamportWorkspaceInit(char* localBase, const LamportLayout& layout,
                                       cudaStream_t stream) {
  if (localBase == nullptr || !layoutValid(layout) ||
      (reinterpret_cast<uintptr_t>(localBase) % kLamportVectorBytes) != 0) {
    return cudaErrorInvalidValue;
  }
  const size_t nVectors = layout.totalBytes() / kLamportVectorBytes;
  constexpr unsigned kThreads = 256;
  size_t blocks = (nVectors + kThreads - 1) / kThreads;
  if (blocks > 1024) blocks = 1024;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  return cudaLaunchKernelEx(&config, lamportWorkspaceInitKernel, localBase, nVectors);
}

}  // namespace nccl_lamport
