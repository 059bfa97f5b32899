// Host launcher of every Lamport allreduce kernel (one-shot, its baseline, two-shot) and of the
// workspace init (lamport_allreduce.h).
// No policy here: validate, size the grid, launch, return the launch's cudaError_t.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/lamport_allreduce.h"
#include "kernels/lamport_kernel_select.h"
#include "kernels/lamport_oneshot_baseline.cuh"
#include "kernels/lamport_oneshot_fast.cuh"

namespace nccl_lamport {

// ---------------------------------------------------------------------------------------------
// Explicit instantiations: the one editable list of datatype x op x unrolled world size
// (0 = generic nRanks). Add a row here and a case in selectKernel() to add a variant.
// ---------------------------------------------------------------------------------------------
#define LAMPORT_ONESHOT_FOR_EACH_NRANKS(X, T, OP) X(T, OP, 0) X(T, OP, 2) X(T, OP, 4) X(T, OP, 8)
#define LAMPORT_ONESHOT_FOR_EACH_OP(X, T)                        \
  LAMPORT_ONESHOT_FOR_EACH_NRANKS(X, T, LamportReduceOp::kSum) \
  LAMPORT_ONESHOT_FOR_EACH_NRANKS(X, T, LamportReduceOp::kAvg)
#define LAMPORT_ONESHOT_INSTANTIATE(T, OP, N)                                                        \
  template __global__ void lamportOneShotBaselineKernel<T, OP, N>(const __grid_constant__ LamportAllReduceArgs); \
  template __global__ void lamportOneShotFastKernel<T, OP, N>(const __grid_constant__ LamportAllReduceArgs); \
  template __global__ void lamportOneShotFastKernel<T, OP, N, 1, LamportFastPass::kSinglePass>(        \
      const __grid_constant__ LamportAllReduceArgs);                                                     \
  template __global__ void lamportOneShotFastKernel<T, OP, N, 1, LamportFastPass::kGridStridedStash>(  \
      const __grid_constant__ LamportAllReduceArgs);
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

using OneShotKernel = LamportKernelFn;

bool layoutValid(const LamportLayout& layout) {
  return layout.nRanks >= 2 && layout.nRanks <= kLamportMaxRanks && layout.slotBytes != 0 &&
         layout.slotBytes % kLamportVectorBytes == 0 &&
         layout.slotBytes <= kLamportMaxSlotBytes;
}

/** The shipped kernels of kFast, one per LamportFastPass it launches (kAuto picks among them). */
constexpr LamportFastPass kShippedFastPasses[] = {LamportFastPass::kGridStrided, LamportFastPass::kSinglePass,
                                                  LamportFastPass::kGridStridedStash};

template <typename T, LamportReduceOp OP, int N>
OneShotKernel kernelFor(LamportKernelVariant variant, LamportFastPass pass) {
  if (variant == LamportKernelVariant::kBaseline) return lamportOneShotBaselineKernel<T, OP, N>;
  switch (pass) {
    case LamportFastPass::kGridStrided:
      return lamportOneShotFastKernel<T, OP, N>;
    case LamportFastPass::kSinglePass:
      return lamportOneShotFastKernel<T, OP, N, 1, LamportFastPass::kSinglePass>;
    case LamportFastPass::kGridStridedStash:
      return lamportOneShotFastKernel<T, OP, N, 1, LamportFastPass::kGridStridedStash>;
    default:
      return nullptr;
  }
}

template <typename T, LamportReduceOp OP>
OneShotKernel selectForRanks(int nRanks, LamportKernelVariant variant, LamportFastPass pass) {
  switch (nRanks) {
    case 2:
      return kernelFor<T, OP, 2>(variant, pass);
    case 4:
      return kernelFor<T, OP, 4>(variant, pass);
    case 8:
      return kernelFor<T, OP, 8>(variant, pass);
    default:  // unrolled: 2, 4, 8; everything else up to kLamportMaxRanks: generic
      return kernelFor<T, OP, 0>(variant, pass);
  }
}

template <typename T>
OneShotKernel selectForOp(LamportReduceOp op, int nRanks, LamportKernelVariant variant, LamportFastPass pass) {
  switch (op) {
    case LamportReduceOp::kSum:
      return selectForRanks<T, LamportReduceOp::kSum>(nRanks, variant, pass);
    case LamportReduceOp::kAvg:
      return selectForRanks<T, LamportReduceOp::kAvg>(nRanks, variant, pass);
  }
  return nullptr;
}

/**
 * The kernel of (datatype, op, nRanks, variant); pass: which of kFast's shipped kernels
 * (kShippedFastPasses; the other variants have one kernel, taken with kGridStrided).
 */
OneShotKernel selectKernel(LamportDataType datatype, LamportReduceOp op, int nRanks, LamportKernelVariant variant,
                           LamportFastPass pass = LamportFastPass::kGridStrided) {
  if (pass != LamportFastPass::kGridStrided && variant != LamportKernelVariant::kFast) return nullptr;
  if (variant == LamportKernelVariant::kTwoShot) return selectTwoShotKernel(datatype, op, nRanks);
  if (variant != LamportKernelVariant::kBaseline && variant != LamportKernelVariant::kFast) return nullptr;
  switch (datatype) {
    case LamportDataType::kFloat32:
      return selectForOp<float>(op, nRanks, variant, pass);
    case LamportDataType::kFloat16:
      return selectForOp<__half>(op, nRanks, variant, pass);
    case LamportDataType::kBFloat16:
      return selectForOp<__nv_bfloat16>(op, nRanks, variant, pass);
  }
  return nullptr;
}

static_assert(lamportDynamicSmemBytes(kLamportFastMaxThreads) <= 48 * 1024,
              "above 48 KB of dynamic shared memory a kernel needs an opt-in attribute");

/** Block sizes a launch may use, as an index of the grid-limit cache: 32..512 in steps of 32. */
constexpr int kThreadSlots = kLamportFastMaxThreads / 32;

/** Kernels per (datatype, op, unrolled nRanks) in the grid-limit cache: the 3 variants + kFast's
 *  single-pass and stash kernels (cache kernel ids 3 and 4). */
constexpr int kKernelsPerSlot = 5;
constexpr int kSinglePassKernelId = 3;
constexpr int kStashKernelId = 4;

/** The grid-limit cache's dimensions: datatypes (float32, float16, bfloat16), ops (sum, avg), and
 *  nRanks unrolled (2, 4, 8) or not (the generic kernels: index 0). */
constexpr int kDatatypeCount = 3;
constexpr int kOpCount = 2;
constexpr int kUnrolledRanksCount = 3;

/** 1, 2, 3 for the unrolled nRanks 2, 4, 8; 0 for any other (the generic kernels). */
constexpr int unrolledRanksIndex(int nRanks) { return nRanks == 2 ? 1 : nRanks == 4 ? 2 : nRanks == 8 ? 3 : 0; }

/**
 * Index of a kernel in the grid-limit cache: datatype x op x unrolled nRanks x kernel (variant,
 * or kFast's single-pass / stash kernel) x data threads per block (the baseline always has 512).
 */
int variantIndex(LamportDataType datatype, LamportReduceOp op, int nRanks, LamportKernelVariant variant,
                 int dataThreads, LamportFastPass pass = LamportFastPass::kGridStrided) {
  const int kernelSlot = (static_cast<int>(datatype) * kOpCount + static_cast<int>(op)) * (kUnrolledRanksCount + 1) +
                         unrolledRanksIndex(nRanks);
  const int kernel = pass == LamportFastPass::kSinglePass        ? kSinglePassKernelId
                     : pass == LamportFastPass::kGridStridedStash ? kStashKernelId
                                                                  : static_cast<int>(variant);
  return (kernelSlot * kKernelsPerSlot + kernel) * kThreadSlots + (dataThreads / 32 - 1);
}

/** Cache entries of the shipped kernels: every (datatype, op, nRanks index, kernel, block size). */
constexpr int kShippedKernelSlots =
    kDatatypeCount * kOpCount * (kUnrolledRanksCount + 1) * kKernelsPerSlot * kThreadSlots;

/** Cache index of an A/B shape of kFast (selectFastKernelShape's slot 1..), after the shipped ones;
 *  nRanks 2, 4 or 8 (the only ones with A/B shapes). */
int shapeIndex(LamportReduceOp op, int nRanks, int slot, int dataThreads) {
  // The A/B shapes exist for 2, 4, 8 ranks only; any other nRanks shares the first slot.
  const int ranksSlot = std::max(0, unrolledRanksIndex(nRanks) - 1);
  return kShippedKernelSlots +
         ((static_cast<int>(op) * kUnrolledRanksCount + ranksSlot) * kLamportFastShapeSlots + (slot - 1)) * kThreadSlots +
         (dataThreads / 32 - 1);
}

constexpr int kCachedDevices = 64;
// The A/B shapes are bf16 only: one datatype.
constexpr int kVariants = kShippedKernelSlots + kOpCount * kUnrolledRanksCount * kLamportFastShapeSlots * kThreadSlots;
// Grid limit per (device, variant); 0 = not computed yet. Written once, read on every launch.
std::atomic<int> gResidentBlocks[kCachedDevices][kVariants];
// Per device: 0 = not queried yet, else 1 + its LaunchFeature bits (deviceLaunchFeatures).
std::atomic<int> gLaunchFeatures[kCachedDevices];

/** Launch shape of one call: the kernel, its block size and whether it uses PDL. */
struct LaunchShape {
  OneShotKernel kernel = nullptr;
  int dataThreads = 0;   // threads that carry vectors
  int blockThreads = 0;  // dataThreads (+ 32 for kFast's control warp)
  int cacheIndex = 0;
  size_t dynamicSmemBytes = 0;  // kFast and kTwoShot: lamportDynamicSmemBytes(dataThreads)
};

/** True when args ask for an A/B shape: vectors per thread or a register cap (lamport_oneshot_variants.cu). */
bool isAbShape(const LamportAllReduceArgs& args) {
  return (args.vectorsPerThread != 0 && args.vectorsPerThread != kLamportFastVectorsPerThread) ||
         args.minBlocksPerSm != 0;
}

/** The shape for args, or a null kernel when the variant options are invalid. */
LaunchShape shapeFor(const LamportAllReduceArgs& args) {
  LaunchShape shape;
  if (args.variant != LamportKernelVariant::kBaseline && args.variant != LamportKernelVariant::kFast &&
      args.variant != LamportKernelVariant::kTwoShot) {
    return shape;
  }
  if (args.variant == LamportKernelVariant::kBaseline) {
    if (args.blockThreads != 0) return shape;
    shape.dataThreads = kLamportOneShotThreads;
    shape.blockThreads = kLamportOneShotThreads;
  } else {
    const int threads = args.blockThreads != 0
                            ? args.blockThreads
                            : lamportDefaultDataThreads(args.variant == LamportKernelVariant::kFast,
                                                        args.count * lamportElementBytes(args.datatype));
    if (threads < 32 || threads > kLamportFastMaxThreads || threads % 32 != 0) return shape;
    shape.dataThreads = threads;
    shape.blockThreads = threads + 32;
    shape.dynamicSmemBytes = lamportDynamicSmemBytes(threads);
  }
  const bool abShape = isAbShape(args);
  if (args.vectorsPerThread < 0 || args.minBlocksPerSm < 0 || (abShape && args.variant != LamportKernelVariant::kFast)) {
    return shape;
  }
  // The register-capped A/B kernels are compiled for blocks of at most 256 + 32 threads.
  if (args.minBlocksPerSm != 0 && shape.dataThreads > kLamportFastWideBlockThreads) return shape;
  switch (args.fastPass) {
    case LamportFastPass::kAuto:
      break;
    case LamportFastPass::kGridStrided:
    case LamportFastPass::kSinglePass:
    case LamportFastPass::kGridStridedStash:
      if (args.variant != LamportKernelVariant::kFast || abShape) return shape;
      break;
    case LamportFastPass::kSinglePassNoBarrier:
    case LamportFastPass::kGridStridedStashPrefetch:
      if (args.variant != LamportKernelVariant::kFast || abShape ||
          selectFastAbPassKernel(args.datatype, args.op, args.layout.nRanks, args.fastPass, nullptr) == nullptr) {
        return shape;
      }
      break;
    default:
      return shape;
  }
  if (abShape) {
    int slot = 0;
    shape.kernel = selectFastKernelShape(args.datatype, args.op, args.layout.nRanks, args.vectorsPerThread,
                                         args.minBlocksPerSm, &slot);
    shape.cacheIndex = shape.kernel != nullptr ? shapeIndex(args.op, args.layout.nRanks, slot, shape.dataThreads) : 0;
    return shape;
  }
  shape.kernel = selectKernel(args.datatype, args.op, args.layout.nRanks, args.variant);
  shape.cacheIndex = variantIndex(args.datatype, args.op, args.layout.nRanks, args.variant, shape.dataThreads);
  return shape;
}

/**
 * The shape of kFast's `pass` kernel for args, with base's block size: kSinglePass and
 * kGridStridedStash from the shipped kernels, kSinglePassNoBarrier and kGridStridedStashPrefetch
 * from the A/B ones (their cache slots after the shapes). A null kernel where args take none: not
 * kFast, or an A/B vectors-per-thread / register-cap shape.
 */
LaunchShape fastPassShape(const LamportAllReduceArgs& args, const LaunchShape& base, LamportFastPass pass) {
  LaunchShape shape = base;
  shape.kernel = nullptr;
  if (base.kernel == nullptr || args.variant != LamportKernelVariant::kFast || isAbShape(args)) return shape;
  if (pass == LamportFastPass::kSinglePassNoBarrier || pass == LamportFastPass::kGridStridedStashPrefetch) {
    int slot = 0;
    shape.kernel = selectFastAbPassKernel(args.datatype, args.op, args.layout.nRanks, pass, &slot);
    shape.cacheIndex = shape.kernel != nullptr ? shapeIndex(args.op, args.layout.nRanks, slot, shape.dataThreads) : 0;
    return shape;
  }
  shape.kernel = selectKernel(args.datatype, args.op, args.layout.nRanks, args.variant, pass);
  shape.cacheIndex = variantIndex(args.datatype, args.op, args.layout.nRanks, args.variant, shape.dataThreads, pass);
  return shape;
}

/** What a launch on a device may use (deviceLaunchFeatures). */
enum LaunchFeature : int {
  kSyncDomains = 1,  // memory-synchronisation domains: sm_90+ (CUDA 12.0+)
  kPdl = 2,          // programmatic dependent launch
};

/**
 * The LaunchFeature bits of `device`, cached per device; 0, not cached, when the device cannot be
 * queried (device -1 included). kPdl: the device is sm_90+ AND the
 * kernels it runs were compiled for a virtual architecture of 90 or more. griddepcontrol.wait is
 * compiled out below __CUDA_ARCH__ 900, so a build without sm_90+ code (e.g. only sm_80, JIT-
 * compiled from its PTX on an H100) has no wait, and a PDL launch of it could read sendbuff and
 * the rotation state before the previous kernel on the stream has finished.
 */
int deviceLaunchFeatures(int device) {
  if (device >= 0 && device < kCachedDevices) {
    const int cached = gLaunchFeatures[device].load(std::memory_order_relaxed);
    if (cached > 0) return cached - 1;
  }
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return 0;
  int features = 0;
  if (major >= 9) {
    features |= kSyncDomains;
    // Every kernel of the library comes from the same architecture list: one stands for all.
    cudaFuncAttributes attributes{};
    const OneShotKernel probe =
        selectKernel(LamportDataType::kFloat32, LamportReduceOp::kSum, 2, LamportKernelVariant::kFast);
    if (cudaFuncGetAttributes(&attributes, probe) == cudaSuccess && attributes.ptxVersion >= 90) features |= kPdl;
    cudaGetLastError();  // a failed query is not sticky; keep it from the caller's next check
  }
  if (device >= 0 && device < kCachedDevices) gLaunchFeatures[device].store(features + 1, std::memory_order_relaxed);
  return features;
}

/**
 * Blocks of `kernel` that the current device runs at once (blocks per SM x SMs): a grid no larger
 * is resident as a whole, which the Lamport wait needs (see lamportOneShotBaselineKernel), and more
 * resident threads keep more 16 B NVLink accesses in flight for large messages. Cached per
 * (device, variant); falls back to 132 (one block per H100/H200 SM) if a query fails.
 */
int maxResidentBlocks(OneShotKernel kernel, int variant, int blockThreads, int device, size_t dynamicSmemBytes = 0) {
  const bool cacheable = device >= 0 && device < kCachedDevices;
  if (cacheable) {
    const int cached = gResidentBlocks[device][variant].load(std::memory_order_relaxed);
    if (cached > 0) return cached;
  }
  int smCount = 0;
  int perSm = 0;
  if (cudaDeviceGetAttribute(&smCount, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, blockThreads, dynamicSmemBytes) !=
          cudaSuccess ||
      smCount <= 0 || perSm <= 0) {
    return 132;
  }
  const int blocks = smCount * perSm;
  if (cacheable) gResidentBlocks[device][variant].store(blocks, std::memory_order_relaxed);
  return blocks;
}

}  // namespace

namespace {

/** Vectors (16 B) of the message. */
size_t messageVectors(const LamportAllReduceArgs& args) {
  return (args.count * lamportElementBytes(args.datatype) + kLamportVectorBytes - 1) / kLamportVectorBytes;
}

/** Vectors one data thread index stands for: the whole message, or one chunk (two-shot). */
size_t vectorsToSpread(const LamportAllReduceArgs& args) {
  const size_t nVectors = messageVectors(args);
  if (args.variant != LamportKernelVariant::kTwoShot) return nVectors;
  return (nVectors + args.layout.nRanks - 1) / args.layout.nRanks;
}

/** The checks of launchLamportAllReduce that need no CUDA call; false = cudaErrorInvalidValue. */
bool argsValid(const LamportAllReduceArgs& args, const LaunchShape& shape) {
  const size_t elemBytes = lamportElementBytes(args.datatype);
  const LamportLayout& layout = args.layout;
  if (elemBytes == 0 || !layoutValid(layout) || args.rank < 0 || args.rank >= layout.nRanks ||
      args.maxBlocks < 0 || args.residencyShare < 0 || shape.kernel == nullptr) {
    return false;
  }
  if (args.variant == LamportKernelVariant::kTwoShot) {
    // The message may be up to nRanks / 2 slots (lamportTwoShotMaxVectors); compared as a count
    // so that no byte count can overflow.
    if (args.count > lamportTwoShotMaxVectors(layout.nRanks, layout.slotBytes) * kLamportVectorBytes / elemBytes) {
      return false;
    }
  } else if (args.count > layout.slotBytes / elemBytes) {
    return false;
  }
  for (int r = 0; r < layout.nRanks; ++r) {
    if (args.peerBases[r] == nullptr) return false;
  }
  return true;
}

/**
 * Grid of one launch: the whole message in flight at once (one 16 B vector per data thread, one
 * block for tiny messages), capped at what the device holds at once (kBaseline) or at
 * 1/kLamportResidencyShare of it (kFast: the co-residency bound), then at args.maxBlocks. residentOut:
 * the blocks the device holds at once (for the PDL trigger choice).
 */
size_t gridBlocks(const LamportAllReduceArgs& args, const LaunchShape& shape, int device, int* residentOut = nullptr) {
  size_t blocks = (vectorsToSpread(args) + shape.dataThreads - 1) / shape.dataThreads;
  int limit = maxResidentBlocks(shape.kernel, shape.cacheIndex, shape.blockThreads, device, shape.dynamicSmemBytes);
  if (residentOut != nullptr) *residentOut = limit;
  if (args.variant != LamportKernelVariant::kBaseline) {
    limit = limit / (args.residencyShare > 0 ? args.residencyShare : kLamportResidencyShare);
  }
  if (limit < 1) limit = 1;
  if (blocks > static_cast<size_t>(limit)) blocks = static_cast<size_t>(limit);
  if (args.maxBlocks > 0 && blocks > static_cast<size_t>(args.maxBlocks)) {
    blocks = static_cast<size_t>(args.maxBlocks);
  }
  return blocks < 1 ? 1 : blocks;
}

}  // namespace

cudaError_t launchLamportAllReduce(const LamportAllReduceArgs& args, cudaStream_t stream) {
  LaunchShape shape = shapeFor(args);
  if (!argsValid(args, shape)) return cudaErrorInvalidValue;
  // An empty call is a no-op on every rank alike (count is the same everywhere): no launch, and
  // the rotation does not advance anywhere.
  if (args.count == 0) return cudaSuccess;
  if (args.sendbuff == nullptr || args.recvbuff == nullptr) return cudaErrorInvalidValue;

  int device = 0;  // the one device query of a launch
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  int resident = 0;
  size_t blocks = 0;
  // kFast: kAuto picks one of its kernels (lamportAutoFastPass); kSinglePass and
  // kSinglePassNoBarrier take the single pass where its grid holds the message, else kGridStrided;
  // the other passes are what they say. Each grid is bounded with its own kernel's occupancy.
  const LamportFastPass pass = args.fastPass;
  const size_t vectors = messageVectors(args);
  const LaunchShape onePass = pass == LamportFastPass::kAuto || pass == LamportFastPass::kSinglePass
                                  ? fastPassShape(args, shape, LamportFastPass::kSinglePass)
                              : pass == LamportFastPass::kSinglePassNoBarrier
                                  ? fastPassShape(args, shape, LamportFastPass::kSinglePassNoBarrier)
                                  : LaunchShape{};
  bool chosen = false;
  if (onePass.kernel != nullptr) {
    int onePassResident = 0;
    const size_t onePassBlocks = gridBlocks(args, onePass, device, &onePassResident);
    const bool fits = onePassBlocks * static_cast<size_t>(onePass.dataThreads) >= vectors;
    LamportFastPass use = fits ? LamportFastPass::kSinglePass : LamportFastPass::kGridStrided;
    if (pass == LamportFastPass::kAuto) {
      use = lamportAutoFastPass(fits, lamportUseLateTrigger(args.triggerAfterWait, onePassBlocks, onePassResident));
      if (use == LamportFastPass::kGridStridedStash) {
        shape = fastPassShape(args, shape, LamportFastPass::kGridStridedStash);
      }
    }
    if (use == LamportFastPass::kSinglePass) {
      shape = onePass;
      blocks = onePassBlocks;
      resident = onePassResident;
      chosen = true;
    }
  } else if (pass == LamportFastPass::kGridStridedStash || pass == LamportFastPass::kGridStridedStashPrefetch) {
    shape = fastPassShape(args, shape, pass);
  }
  if (!chosen) blocks = gridBlocks(args, shape, device, &resident);
  cudaLaunchAttribute attribute[2] = {};
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(shape.blockThreads));
  config.dynamicSmemBytes = shape.dynamicSmemBytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 0;
  const int features = deviceLaunchFeatures(device);
  if (args.variant != LamportKernelVariant::kBaseline && args.disablePdl == 0 && (features & kPdl) != 0) {
    // The kernel may start while the previous one on the stream still runs; its
    // griddepcontrol.wait holds every thread until that one has completed and flushed.
    attribute[config.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[config.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
  }
#if CUDART_VERSION >= 12000
  if (args.remoteSyncDomain != 0 && (features & kSyncDomains) != 0) {
    // Stream order still holds across domains (CUDA flushes at the kernel boundary); what changes
    // is that a fence of ours orders only this domain's traffic, NCCL's kernels' included.
    attribute[config.numAttrs].id = cudaLaunchAttributeMemSyncDomain;
    attribute[config.numAttrs++].val.memSyncDomain = cudaLaunchMemSyncDomainRemote;
  }
#endif
  if (args.variant != LamportKernelVariant::kBaseline) {
    // The kernel reads 0 = early, anything else = late: pass exactly 0 or 1 (a copy only where the
    // caller's value differs, e.g. 0 = the launcher's choice, or -1 = always early).
    const int trigger = lamportKernelTriggerArg(args.triggerAfterWait, blocks, resident);
    if (args.triggerAfterWait != trigger) {
      LamportAllReduceArgs adjusted = args;
      adjusted.triggerAfterWait = trigger;
      return cudaLaunchKernelEx(&config, shape.kernel, adjusted);
    }
  }
  return cudaLaunchKernelEx(&config, shape.kernel, args);
}

int lamportAllReduceResidentBlocks(const LamportAllReduceArgs& args) {
  const LaunchShape shape = shapeFor(args);
  if (!argsValid(args, shape)) return 0;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  int blocks = maxResidentBlocks(shape.kernel, shape.cacheIndex, shape.blockThreads, device, shape.dynamicSmemBytes);
  // kFast: the fewest of the kernels a launch may pick (single pass, stash, grid-strided).
  for (LamportFastPass pass : {LamportFastPass::kSinglePass, LamportFastPass::kGridStridedStash}) {
    const LaunchShape other = fastPassShape(args, shape, pass);
    if (other.kernel == nullptr) continue;
    blocks = std::min(blocks, maxResidentBlocks(other.kernel, other.cacheIndex, other.blockThreads, device,
                                                other.dynamicSmemBytes));
  }
  return blocks;
}

int lamportAllReduceGridBlocks(const LamportAllReduceArgs& args) {
  const LaunchShape shape = shapeFor(args);
  if (!argsValid(args, shape)) return 0;
  LamportAllReduceArgs uncapped = args;
  uncapped.maxBlocks = 0;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  return static_cast<int>(gridBlocks(uncapped, shape, device));
}

cudaError_t lamportPrepareKernels(int nRanks) {
  int device = 0;
  const cudaError_t deviceErr = cudaGetDevice(&device);
  if (deviceErr != cudaSuccess) return deviceErr;
  (void)deviceLaunchFeatures(device);
  for (LamportDataType datatype : {LamportDataType::kFloat32, LamportDataType::kFloat16, LamportDataType::kBFloat16}) {
    for (LamportReduceOp op : {LamportReduceOp::kSum, LamportReduceOp::kAvg}) {
      for (LamportKernelVariant variant :
           {LamportKernelVariant::kFast, LamportKernelVariant::kBaseline, LamportKernelVariant::kTwoShot}) {
        const OneShotKernel kernel = selectKernel(datatype, op, nRanks, variant);
        cudaFuncAttributes attributes{};
        const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);  // loads the module
        if (err != cudaSuccess) return err;
        if (variant == LamportKernelVariant::kBaseline) {
          maxResidentBlocks(kernel, variantIndex(datatype, op, nRanks, variant, kLamportOneShotThreads),
                            kLamportOneShotThreads, device);
          continue;
        }
        if (variant == LamportKernelVariant::kTwoShot) {  // one block size (lamportDefaultDataThreads)
          maxResidentBlocks(kernel, variantIndex(datatype, op, nRanks, variant, kLamportFastSmallBlockThreads),
                            kLamportFastSmallBlockThreads + 32, device,
                            lamportDynamicSmemBytes(kLamportFastSmallBlockThreads));
          continue;
        }
        // kFast: each of its kernels (LamportFastPass) at both default block sizes.
        for (LamportFastPass pass : kShippedFastPasses) {
          const OneShotKernel passKernel = selectKernel(datatype, op, nRanks, variant, pass);
          const cudaError_t passErr = cudaFuncGetAttributes(&attributes, passKernel);
          if (passErr != cudaSuccess) return passErr;
          for (int dataThreads : {kLamportFastSmallBlockThreads, kLamportFastWideBlockThreads}) {
            maxResidentBlocks(passKernel, variantIndex(datatype, op, nRanks, variant, dataThreads, pass),
                              dataThreads + 32, device, lamportDynamicSmemBytes(dataThreads));
          }
        }
      }
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
