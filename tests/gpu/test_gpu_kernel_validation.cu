// The launcher's argument checks (kernels/lamport_allreduce.h): every bad argument is refused
// with cudaErrorInvalidValue before any CUDA call, so this part of the test_gpu_kernel executable
// needs no GPU (ctest also runs it under the cpu label: kernel_cpu.LamportLaunchValidation).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/lamport_allreduce.h"
#include "kernels/lamport_layout.h"

namespace nccl_lamport {
namespace {


TEST(LamportLaunchValidation, RejectsBadArguments) {
  static char fakeBase[kLamportMaxRanks][16];
  LamportAllReduceArgs good{};
  good.sendbuff = fakeBase[0];
  good.recvbuff = fakeBase[1];
  good.count = 0;  // a valid empty call: returns before launching anything
  good.datatype = LamportDataType::kBFloat16;
  good.op = LamportReduceOp::kSum;
  good.rank = 1;
  good.layout = LamportLayout{4, 1024};
  for (int r = 0; r < 4; ++r) good.peerBases[r] = fakeBase[r];
  EXPECT_EQ(launchLamportAllReduce(good, nullptr), cudaSuccess);

  auto expectInvalid = [&](const char* what, auto mutate) {
    LamportAllReduceArgs a = good;
    mutate(a);
    EXPECT_EQ(launchLamportAllReduce(a, nullptr), cudaErrorInvalidValue) << what;
  };
  expectInvalid("count past the slot", [](LamportAllReduceArgs& a) { a.count = 513; });
  expectInvalid("nRanks 1", [](LamportAllReduceArgs& a) { a.layout.nRanks = 1, a.rank = 0; });
  expectInvalid("nRanks 73", [](LamportAllReduceArgs& a) { a.layout.nRanks = kLamportMaxRanks + 1; });
  expectInvalid("rank out of range", [](LamportAllReduceArgs& a) { a.rank = 4; });
  expectInvalid("negative rank", [](LamportAllReduceArgs& a) { a.rank = -1; });
  expectInvalid("slot not a multiple of 16", [](LamportAllReduceArgs& a) { a.layout.slotBytes = 1000; });
  expectInvalid("bad datatype", [](LamportAllReduceArgs& a) { a.datatype = static_cast<LamportDataType>(9); });
  expectInvalid("bad op", [](LamportAllReduceArgs& a) { a.op = static_cast<LamportReduceOp>(9); });
  expectInvalid("missing peer", [](LamportAllReduceArgs& a) { a.peerBases[3] = nullptr; });
  expectInvalid("negative maxBlocks", [](LamportAllReduceArgs& a) { a.maxBlocks = -1; });
  expectInvalid("null sendbuff", [](LamportAllReduceArgs& a) { a.count = 1, a.sendbuff = nullptr; });
  expectInvalid("unknown kernel variant", [](LamportAllReduceArgs& a) { a.variant = static_cast<LamportKernelVariant>(7); });
  expectInvalid("baseline with a block size", [](LamportAllReduceArgs& a) {
    a.variant = LamportKernelVariant::kBaseline, a.blockThreads = 128;
  });
  expectInvalid("fast block size not a multiple of 32", [](LamportAllReduceArgs& a) { a.blockThreads = 100; });
  expectInvalid("fast block size above 512", [](LamportAllReduceArgs& a) { a.blockThreads = 544; });
  expectInvalid("fast block size below 32", [](LamportAllReduceArgs& a) { a.blockThreads = 16; });
  expectInvalid("negative residency share", [](LamportAllReduceArgs& a) { a.residencyShare = -1; });
  // A/B kernel shapes (kernels/lamport_oneshot_variants.cu): only those built, only for kFast.
  expectInvalid("3 vectors per thread (not built)", [](LamportAllReduceArgs& a) { a.vectorsPerThread = 3; });
  expectInvalid("negative vectors per thread", [](LamportAllReduceArgs& a) { a.vectorsPerThread = -1; });
  expectInvalid("2 vectors per thread, fp32 (bf16 only)", [](LamportAllReduceArgs& a) {
    a.vectorsPerThread = 2;
    a.datatype = LamportDataType::kFloat32;
  });
  expectInvalid("2 vectors per thread, 3 ranks (2, 4, 8 only)", [](LamportAllReduceArgs& a) {
    a.vectorsPerThread = 2;
    a.layout.nRanks = 3;
  });
  expectInvalid("vectors per thread, baseline", [](LamportAllReduceArgs& a) {
    a.vectorsPerThread = 2;
    a.variant = LamportKernelVariant::kBaseline;
  });
  expectInvalid("single pass without barrier, fp16 (bf16 only)", [](LamportAllReduceArgs& a) {
    a.fastPass = LamportFastPass::kSinglePassNoBarrier;
    a.datatype = LamportDataType::kFloat16;
  });
  expectInvalid("grid-strided, baseline", [](LamportAllReduceArgs& a) {
    a.fastPass = LamportFastPass::kGridStrided;
    a.variant = LamportKernelVariant::kBaseline;
  });
  expectInvalid("single pass, two-shot", [](LamportAllReduceArgs& a) {
    a.fastPass = LamportFastPass::kSinglePassNoBarrier;
    a.variant = LamportKernelVariant::kTwoShot;
  });
  expectInvalid("single pass with 2 vectors per thread", [](LamportAllReduceArgs& a) {
    a.fastPass = LamportFastPass::kSinglePass;
    a.vectorsPerThread = 2;
  });
  expectInvalid("unknown pass", [](LamportAllReduceArgs& a) { a.fastPass = static_cast<LamportFastPass>(7); });
  expectInvalid("prefetching stash at 3 ranks (2, 4, 8 only)", [](LamportAllReduceArgs& a) {
    a.fastPass = LamportFastPass::kGridStridedStashPrefetch;
    a.layout.nRanks = 3;
  });
  expectInvalid("prefetching stash, fp16 (bf16 only)", [](LamportAllReduceArgs& a) {
    a.fastPass = LamportFastPass::kGridStridedStashPrefetch;
    a.layout.nRanks = 2;
    a.rank = 0;
    a.datatype = LamportDataType::kFloat16;
  });
  {
    LamportAllReduceArgs a = good;
    a.fastPass = LamportFastPass::kGridStridedStashPrefetch;
    a.layout.nRanks = 2;
    a.rank = 0;
    EXPECT_EQ(launchLamportAllReduce(a, nullptr), cudaSuccess) << "prefetching stash, bf16, 2 ranks";
  }
  // Register-capped A/B kernels: 5 or 7 blocks per SM, one vector per thread, <= 256 data threads.
  expectInvalid("register cap of 6 blocks (not built)", [](LamportAllReduceArgs& a) { a.minBlocksPerSm = 6; });
  expectInvalid("negative register cap", [](LamportAllReduceArgs& a) { a.minBlocksPerSm = -5; });
  expectInvalid("register cap with 512 data threads", [](LamportAllReduceArgs& a) {
    a.minBlocksPerSm = 5;
    a.blockThreads = 512;
  });
  expectInvalid("register cap with 2 vectors per thread", [](LamportAllReduceArgs& a) {
    a.minBlocksPerSm = 5;
    a.vectorsPerThread = 2;
  });
  expectInvalid("register cap, fp32 (bf16 only)", [](LamportAllReduceArgs& a) {
    a.minBlocksPerSm = 7;
    a.datatype = LamportDataType::kFloat32;
  });
  expectInvalid("register cap, two-shot", [](LamportAllReduceArgs& a) {
    a.minBlocksPerSm = 7;
    a.variant = LamportKernelVariant::kTwoShot;
  });
  expectInvalid("shared-memory stash, two-shot", [](LamportAllReduceArgs& a) {
    a.fastPass = LamportFastPass::kGridStridedStash;
    a.variant = LamportKernelVariant::kTwoShot;
  });
  expectInvalid("shared-memory stash with 2 vectors per thread", [](LamportAllReduceArgs& a) {
    a.fastPass = LamportFastPass::kGridStridedStash;
    a.vectorsPerThread = 2;
  });
  for (int blocks : {5, 7}) {
    for (int threads : {0, 128, 256}) {
      LamportAllReduceArgs a = good;
      a.minBlocksPerSm = blocks;
      a.blockThreads = threads;
      EXPECT_EQ(launchLamportAllReduce(a, nullptr), cudaSuccess) << blocks << " blocks per SM, " << threads << " threads";
    }
  }
  for (int k : {0, 1, 2, 4}) {  // every built shape is accepted (count 0: nothing is launched)
    LamportAllReduceArgs a = good;
    a.vectorsPerThread = k;
    EXPECT_EQ(launchLamportAllReduce(a, nullptr), cudaSuccess) << k << " vectors per thread";
  }
  for (LamportFastPass pass : {LamportFastPass::kGridStrided, LamportFastPass::kSinglePass,
                              LamportFastPass::kSinglePassNoBarrier, LamportFastPass::kGridStridedStash}) {
    LamportAllReduceArgs a = good;
    a.fastPass = pass;
    EXPECT_EQ(launchLamportAllReduce(a, nullptr), cudaSuccess) << "pass " << static_cast<int>(pass);
  }
  // Two-shot: 2 chunks of ceil(vectors / nRanks) must fit a slot; 4 ranks, 1024-byte slot.
  {
    LamportAllReduceArgs a = good;
    a.variant = LamportKernelVariant::kTwoShot;
    a.count = 512;  // 64 vectors, chunks of 16 (256 bytes), 512 <= 1024
    EXPECT_EQ(lamportAllReduceGridBlocks(a), 1);
    a.layout.slotBytes = 496;  // 31 vectors: count 248 -> 31 vectors, chunks of 8 -> 256 <= 496
    a.count = 248;
    EXPECT_GT(lamportAllReduceGridBlocks(a), 0);
    a.layout = LamportLayout{4, 16};  // one vector: a chunk of 1, 2 x 16 > 16
    a.count = 8;
    EXPECT_EQ(lamportAllReduceGridBlocks(a), 0) << "two-shot chunks that do not fit the slot";
  }
  EXPECT_EQ(lamportAllReduceGridBlocks([&] { LamportAllReduceArgs a = good; a.blockThreads = 100; return a; }()), 0);
  for (int threads : {32, 128, 256, 512}) {
    LamportAllReduceArgs a = good;
    a.blockThreads = threads;
    EXPECT_EQ(launchLamportAllReduce(a, nullptr), cudaSuccess) << threads << " threads";
  }

  EXPECT_EQ(launchLamportWorkspaceInit(nullptr, good.layout, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launchLamportWorkspaceInit(fakeBase[0] + 1, good.layout, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launchLamportWorkspaceInit(fakeBase[0], LamportLayout{1, 1024}, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace nccl_lamport
