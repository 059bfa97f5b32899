// GPU tests of the Lamport one-shot kernels (kFast, the default, and kBaseline) without NCCL, on
// the simulated ranks of tests/gpu/kernel_world.cuh. Skipped (never passed) without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/lamport_allreduce.h"
#include "kernels/lamport_layout.h"
#include "tests/gpu/kernel_world.cuh"

namespace nccl_lamport {
namespace {

using namespace kerneltest;

// The argument checks that need no GPU are in test_gpu_kernel_validation.cu.

TEST(GpuLamportWorkspace, InitFillsSentinelAndZeroesControl) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(3, 1024));
  std::vector<uint32_t> words(w.layout.totalBytes() / 4);
  CUDA_ASSERT(cudaSetDevice(w.ranks[1].device));
  CUDA_ASSERT(cudaMemcpy(words.data(), w.ranks[1].workspace, w.layout.totalBytes(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < words.size(); ++i) {
    ASSERT_EQ(words[i], i < kLamportControlBytes / 4 ? 0u : kLamportEmptyWord) << "word " << i;
  }
}

TEST(GpuLamportOneShot, AllTypesOpsCountsAndAlignments) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(1234);
  for (LamportDataType t : kTypes) {
    const size_t esz = elemBytes(t);
    const size_t nearSlot = kSlotBytes / esz;
    const size_t counts[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 255, 1000, 4097, 65537, nearSlot - 3, nearSlot};
    const std::pair<size_t, size_t> offsets[] = {{0, 0}, {esz, esz}, {2, 2}, {esz, 0}, {0, 2}, {6, 10}};
    for (LamportReduceOp op : kOps) {
      std::vector<CallSpec> calls;
      for (size_t count : counts) {
        if (count * esz > kSlotBytes) continue;
        for (auto [so, ro] : offsets) {
          calls.push_back(CallSpec{t, op, count, so, ro, false, Values::kRandom});
        }
        for (size_t off : {size_t{0}, esz, size_t{2}}) {
          calls.push_back(CallSpec{t, op, count, 0, off, true, Values::kRandom});
        }
      }
      // Batches small enough for the I/O buffers; calls within a batch run back to back.
      for (size_t i = 0; i < calls.size(); i += 8) {
        std::vector<CallSpec> batch(calls.begin() + i, calls.begin() + std::min(calls.size(), i + 8));
        ASSERT_NO_FATAL_FAILURE(runBatch(w, batch, rng));
      }
    }
  }
}

TEST(GpuLamportOneShot, SpecialValues) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(99);
  for (LamportDataType t : kTypes) {
    for (LamportReduceOp op : kOps) {
      std::vector<CallSpec> calls;
      for (size_t count : {size_t{1}, size_t{7}, size_t{17}, size_t{1000}, size_t{4097}}) {
        for (Values v : {Values::kSpecial, Values::kAllNegativeZero, Values::kNegativeSubnormal}) {
          calls.push_back(CallSpec{t, op, count, 0, 0, false, v});
          calls.push_back(CallSpec{t, op, count, 2, elemBytes(t), false, v});
        }
      }
      ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng));
    }
  }
}

TEST(GpuLamportOneShot, CappedGridStrides) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(5);
  for (int cap : {1, 2, 3}) {
    w.maxBlocks = cap;
    std::vector<CallSpec> calls;
    for (LamportDataType t : kTypes) {
      calls.push_back(CallSpec{t, LamportReduceOp::kSum, 65537, 0, 0, false, Values::kRandom});
      calls.push_back(CallSpec{t, LamportReduceOp::kAvg, 4097, 2, 2, false, Values::kRandom});
      calls.push_back(CallSpec{t, LamportReduceOp::kSum, 3000, 0, 0, true, Values::kRandom});
    }
    ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng));
  }
}

// The grid-strided kernel with the shared-memory stash (every datatype, op and unrolled or generic
// nRanks) and the register-capped A/B kernels (bf16), on grids capped so that a thread walks fewer
// and more groups than the stash holds (its first vector in registers, 3 stashed, the rest read
// again), odd counts, misaligned and in place.
TEST(GpuLamportOneShot, StashAndRegisterCapsStayCorrectOnStridedGrids) {
  SKIP_WITHOUT_GPU();
  struct Ab {
    const char* name;
    LamportFastPass pass;
    int minBlocksPerSm;
    int blockThreads;
    LamportDataType type;
  };
  constexpr LamportDataType kBf16 = LamportDataType::kBFloat16;
  for (const Ab& ab : {Ab{"stash bf16", LamportFastPass::kGridStridedStash, 0, 0, kBf16},
                       Ab{"stash fp32", LamportFastPass::kGridStridedStash, 0, 0, LamportDataType::kFloat32},
                       Ab{"stash fp16, 32 threads", LamportFastPass::kGridStridedStash, 0, 32, LamportDataType::kFloat16},
                       Ab{"stash bf16, 512 threads", LamportFastPass::kGridStridedStash, 0, 512, kBf16},
                       Ab{"prefetching stash", LamportFastPass::kGridStridedStashPrefetch, 0, 0, kBf16},
                       Ab{"prefetching stash, 64 threads", LamportFastPass::kGridStridedStashPrefetch, 0, 64, kBf16},
                       Ab{"cap 5", LamportFastPass::kAuto, 5, 256, kBf16}, Ab{"cap 7", LamportFastPass::kAuto, 7, 128, kBf16}}) {
    const bool abOnly = ab.minBlocksPerSm != 0 || ab.pass == LamportFastPass::kGridStridedStashPrefetch;
    for (int nRanks : abOnly ? std::vector<int>{2, 4, 8} : std::vector<int>{2, 3, 4, 8}) {
      World w;
      ASSERT_NO_FATAL_FAILURE(w.init(nRanks, kIoBytes));
      w.fastPass = ab.pass;
      w.minBlocksPerSm = ab.minBlocksPerSm;
      w.blockThreads = ab.blockThreads;
      std::mt19937 rng(static_cast<unsigned>(nRanks * 97 + ab.minBlocksPerSm));
      // The cap World::init set (all ranks' grids resident on one GPU), then 1 and 3 blocks.
      for (int cap : {w.maxBlocks, 1, 3}) {
        w.maxBlocks = cap;
        const std::vector<CallSpec> calls = {
            CallSpec{ab.type, LamportReduceOp::kSum, 65537, 0, 0, false, Values::kRandom},
            CallSpec{ab.type, LamportReduceOp::kAvg, 40001, 2, 6, false, Values::kRandom},
            CallSpec{ab.type, LamportReduceOp::kSum, 30000, 0, 2, true, Values::kSpecial},
            CallSpec{ab.type, LamportReduceOp::kSum, 7, 0, 0, false, Values::kRandom}};
        ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng)) << ab.name << ", " << nRanks << " ranks, cap " << cap;
      }
      w.expectNoErrors();
    }
  }
}

// The stash kernels clear what they received in place and leave dirtyBytes 0; every other kernel
// clears the previous round's buffer itself. Alternating them on one rotation state must never
// let a stale vector through or leave one behind (a stale vector reads as a peer's data: wrong
// sums), on full and capped grids (1 and 3 blocks: threads walk more groups than the stash holds).
TEST(GpuLamportOneShot, InPlaceClearHandsOverToTheOtherKernels) {
  SKIP_WITHOUT_GPU();
  struct Step {
    LamportKernelVariant variant;
    LamportFastPass pass;
  };
  constexpr LamportKernelVariant kFast = LamportKernelVariant::kFast;
  constexpr LamportFastPass kStash = LamportFastPass::kGridStridedStash;
  constexpr LamportFastPass kPrefetch = LamportFastPass::kGridStridedStashPrefetch;
  constexpr LamportFastPass kAuto = LamportFastPass::kAuto;
  for (int nRanks : {2, 3, 4, 8}) {
    World w;
    ASSERT_NO_FATAL_FAILURE(w.init(nRanks, kIoBytes));
    std::mt19937 rng(static_cast<unsigned>(4242 + nRanks));
    std::vector<Step> steps = {{kFast, kAuto},        {kFast, kStash},
                               {kFast, LamportFastPass::kGridStrided}, {kFast, kStash},
                               {kFast, LamportFastPass::kSinglePass},  {kFast, kStash},
                               {LamportKernelVariant::kBaseline, kAuto}, {kFast, kStash}};
    if (nRanks != 3) steps.insert(steps.end(), {{kFast, kPrefetch}, {kFast, kStash}});  // built at 2, 4, 8
    if (nRanks >= 4) steps.insert(steps.end(), {{LamportKernelVariant::kTwoShot, kAuto}, {kFast, kStash}});
    const int fullGrid = w.maxBlocks;
    for (int cap : {fullGrid, 1, 3}) {
      w.maxBlocks = cap;
      for (const Step& step : steps) {
        w.variant = step.variant;
        w.fastPass = step.pass;
        std::vector<CallSpec> calls = randomCalls(4, rng, kSlotBytes / 4);  // fp32 fits a one-shot slot
        if (step.pass == kPrefetch) {
          for (CallSpec& c : calls) c.type = LamportDataType::kBFloat16;  // the A/B kernel is bf16 only
        }
        const std::string where = std::to_string(nRanks) + " ranks, cap " + std::to_string(cap) + ", variant " +
                                  std::to_string(static_cast<int>(step.variant)) + ", pass " +
                                  std::to_string(static_cast<int>(step.pass));
        ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng)) << where;
        ASSERT_NO_FATAL_FAILURE(expectOnlyLastRoundDirty(w)) << where;
      }
    }
    w.expectNoErrors();
  }
}

// The plugin launches in CUDA's remote memory-sync domain, as NCCL launches its own kernels: every
// kernel stays correct there, also when consecutive calls on a stream alternate between the two
// domains (with PDL between them), and the launch really carries the domain (a captured kernel
// node keeps it).
TEST(GpuLamportOneShot, RemoteSyncDomainLaunchesStayCorrect) {
  SKIP_WITHOUT_GPU();
  int major = 0;
  CUDA_ASSERT(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major < 9) GTEST_SKIP() << "memory-sync domains need sm_90+; the launcher leaves the attribute out below";
  for (int nRanks : {2, 4}) {
    World w;
    ASSERT_NO_FATAL_FAILURE(w.init(nRanks, kIoBytes));
    std::mt19937 rng(static_cast<unsigned>(777 + nRanks));
    for (LamportKernelVariant variant : {LamportKernelVariant::kFast, LamportKernelVariant::kBaseline,
                                         LamportKernelVariant::kTwoShot}) {
      if (variant == LamportKernelVariant::kTwoShot && nRanks < 4) continue;
      w.variant = variant;
      std::vector<CallSpec> calls = randomCalls(8, rng, kSlotBytes / 4);
      for (size_t i = 0; i < calls.size(); ++i) calls[i].remoteSyncDomain = static_cast<int>(i % 2);
      ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng)) << nRanks << " ranks, variant " << static_cast<int>(variant);
    }
    w.expectNoErrors();
  }
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  CUDA_ASSERT(cudaSetDevice(w.ranks[0].device));
  for (int domain : {0, 1}) {
    CallSpec c;
    c.count = 64;
    c.remoteSyncDomain = domain;
    cudaGraph_t graph = nullptr;
    CUDA_ASSERT(cudaStreamBeginCapture(w.ranks[0].stream, cudaStreamCaptureModeThreadLocal));
    const cudaError_t launched = launchLamportAllReduce(w.args(0, w.ranks[0].send, w.ranks[0].recv, c), w.ranks[0].stream);
    CUDA_ASSERT(cudaStreamEndCapture(w.ranks[0].stream, &graph));
    ASSERT_EQ(launched, cudaSuccess);
    size_t nodes = 0;
    CUDA_ASSERT(cudaGraphGetNodes(graph, nullptr, &nodes));
    std::vector<cudaGraphNode_t> all(nodes);
    CUDA_ASSERT(cudaGraphGetNodes(graph, all.data(), &nodes));
    int kernels = 0;
    for (cudaGraphNode_t node : all) {
      cudaGraphNodeType type{};
      CUDA_ASSERT(cudaGraphNodeGetType(node, &type));
      if (type != cudaGraphNodeTypeKernel) continue;
      ++kernels;
      cudaLaunchAttributeValue value{};
      CUDA_ASSERT(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeMemSyncDomain, &value));
      EXPECT_EQ(value.memSyncDomain, domain != 0 ? cudaLaunchMemSyncDomainRemote : cudaLaunchMemSyncDomainDefault)
          << "remoteSyncDomain " << domain;
    }
    EXPECT_EQ(kernels, 1);
    CUDA_ASSERT(cudaGraphDestroy(graph));
  }
}

TEST(GpuLamportOneShot, BackToBackRotation2000Calls) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(2024);
  constexpr int kCalls = 2000, kBatch = 50;
  for (int done = 0; done < kCalls; done += kBatch) {
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(kBatch, rng, 70000), rng)) << "after " << done;
  }
  for (int r = 0; r < w.nRanks; ++r) {
    const LamportDeviceState s = w.state(r);
    EXPECT_EQ(s.roundsDone, static_cast<uint32_t>(kCalls));
    EXPECT_EQ(s.bufferIndex, static_cast<uint32_t>(kCalls % kLamportBufferCount));
    EXPECT_EQ(s.arrivedBlocks, 0u);
  }
}

TEST(GpuLamportOneShot, GraphReplays1000WithChangingInputs) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  const std::vector<CallSpec> calls = {
      {LamportDataType::kBFloat16, LamportReduceOp::kSum, 4097, 0, 0, false, Values::kRandom},
      {LamportDataType::kFloat32, LamportReduceOp::kAvg, 1000, 2, 0, false, Values::kRandom},
      {LamportDataType::kFloat16, LamportReduceOp::kSum, 17, 0, 2, true, Values::kRandom},
      {LamportDataType::kBFloat16, LamportReduceOp::kAvg, 20000, 0, 0, false, Values::kRandom}};
  constexpr size_t kRegion = 256 * 1024;  // per call, in send and recv
  std::vector<cudaGraphExec_t> execs(w.nRanks);
  for (int r = 0; r < w.nRanks; ++r) {
    SimRank& k = w.ranks[r];
    CUDA_ASSERT(cudaSetDevice(k.device));
    CUDA_ASSERT(cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeRelaxed));
    for (size_t i = 0; i < calls.size(); ++i) {
      char* recv = k.recv + i * kRegion + calls[i].recvOffset;
      const char* send = calls[i].inPlace ? recv : k.send + i * kRegion + calls[i].sendOffset;
      CUDA_ASSERT(launchLamportAllReduce(w.args(r, send, recv, calls[i]), k.stream));
    }
    cudaGraph_t graph;
    CUDA_ASSERT(cudaStreamEndCapture(k.stream, &graph));
    CUDA_ASSERT(cudaGraphInstantiate(&execs[r], graph, 0));
    CUDA_ASSERT(cudaGraphDestroy(graph));
  }
  std::mt19937 rng(77);
  constexpr int kReplays = 1000;
  for (int rep = 0; rep < kReplays; ++rep) {
    std::vector<std::vector<std::vector<uint8_t>>> inputs(calls.size());
    for (int r = 0; r < w.nRanks; ++r) {
      SimRank& k = w.ranks[r];
      CUDA_ASSERT(cudaSetDevice(k.device));
      CUDA_ASSERT(cudaMemsetAsync(k.recv, 0xff, calls.size() * kRegion, k.stream));
      for (size_t i = 0; i < calls.size(); ++i) {
        inputs[i].push_back(makeInput(calls[i].type, calls[i].count, Values::kRandom, rng));
        char* dst = calls[i].inPlace ? k.recv + i * kRegion + calls[i].recvOffset
                                     : k.send + i * kRegion + calls[i].sendOffset;
        CUDA_ASSERT(cudaMemcpyAsync(dst, inputs[i][r].data(), inputs[i][r].size(), cudaMemcpyHostToDevice, k.stream));
      }
    }
    for (int r = 0; r < w.nRanks; ++r) {
      CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
      CUDA_ASSERT(cudaGraphLaunch(execs[r], w.ranks[r].stream));
    }
    ASSERT_NO_FATAL_FAILURE(w.syncAll());
    for (size_t i = 0; i < calls.size(); ++i) {
      std::vector<std::vector<uint8_t>> outs(w.nRanks);
      const size_t span = calls[i].recvOffset + calls[i].count * elemBytes(calls[i].type) + kPad;
      for (int r = 0; r < w.nRanks; ++r) {
        outs[r].resize(span);
        CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
        CUDA_ASSERT(cudaMemcpy(outs[r].data(), w.ranks[r].recv + i * kRegion, span, cudaMemcpyDeviceToHost));
      }
      ASSERT_NO_FATAL_FAILURE(checkCall(calls[i], inputs[i], outs, calls[i].recvOffset)) << "replay " << rep;
    }
  }
  w.expectNoErrors();
  for (int r = 0; r < w.nRanks; ++r) {
    EXPECT_EQ(w.state(r).roundsDone, static_cast<uint32_t>(kReplays * calls.size()));
    cudaGraphExecDestroy(execs[r]);
  }
}

TEST(GpuLamportOneShot, TimesOutWhenAPeerNeverLaunches) {
  SKIP_WITHOUT_GPU();
  // The single pass (kAuto at this size) and the stash kernel, which clears in place: after a
  // give-up both must leave the round's extent to the next round's clear, since a peer's copy may
  // still land (4097 bf16 = 513 vectors of 16 bytes).
  for (LamportFastPass pass : {LamportFastPass::kAuto, LamportFastPass::kGridStridedStash}) {
    World w;
    ASSERT_NO_FATAL_FAILURE(w.init(2, 1 << 20));
    w.timeoutNs = 50ull * 1000 * 1000;
    w.fastPass = pass;
    const CallSpec c{LamportDataType::kBFloat16, LamportReduceOp::kSum, 4097};
    const auto start = std::chrono::steady_clock::now();
    ASSERT_NO_FATAL_FAILURE(w.launch(0, w.args(0, w.ranks[0].send, w.ranks[0].recv, c)));
    CUDA_ASSERT(cudaSetDevice(w.ranks[0].device));
    CUDA_ASSERT(cudaStreamSynchronize(w.ranks[0].stream));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(w.errorHost[0], static_cast<uint32_t>(kLamportTimedOut)) << "pass " << static_cast<int>(pass);
    EXPECT_GE(seconds, 0.045);
    EXPECT_LT(seconds, 10.0);
    const LamportDeviceState s = w.state(0);
    EXPECT_EQ(s.roundsDone, 1u) << "the rotation still advances after a give-up";
    EXPECT_EQ(s.dirtyBytes, 513u * 16u) << "pass " << static_cast<int>(pass);
  }
}

TEST(GpuLamportOneShot, AbortFlagStopsTheWait) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, 1 << 20));
  w.timeoutNs = 0;  // no time limit: only the abort flag can end the wait
  const CallSpec c{LamportDataType::kFloat32, LamportReduceOp::kSum, 100000};
  LamportAllReduceArgs a = w.args(0, w.ranks[0].send, w.ranks[0].recv, c);
  a.timeoutNs = 30ull * 1000 * 1000 * 1000;  // backstop: a broken abort reports TimedOut, not a hang
  ASSERT_NO_FATAL_FAILURE(w.launch(0, a));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CUDA_ASSERT(cudaSetDevice(w.ranks[0].device));
  EXPECT_EQ(cudaStreamQuery(w.ranks[0].stream), cudaErrorNotReady) << "kernel should still wait";
  reinterpret_cast<volatile uint32_t*>(w.abortHost)[0] = 1;
  const auto start = std::chrono::steady_clock::now();
  CUDA_ASSERT(cudaStreamSynchronize(w.ranks[0].stream));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(w.errorHost[0], static_cast<uint32_t>(kLamportAborted));
  EXPECT_LT(seconds, 5.0);
}

TEST(GpuLamportOneShot, BaselineVariantStaysCorrect) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(31);
  w.variant = LamportKernelVariant::kBaseline;
  ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(50, rng, 70000), rng));
  // Variants share the workspace format: switching between calls keeps the rotation consistent.
  for (int i = 0; i < 6; ++i) {
    w.variant = i % 2 ? LamportKernelVariant::kBaseline : LamportKernelVariant::kFast;
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(20, rng, 70000), rng)) << "switch " << i;
  }
}

TEST(GpuLamportOneShot, FastBlockSizesAndLargeMessages) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, 4u << 20, 4u << 20));
  w.maxBlocks = 0;  // the launcher's own residency bound (1/kLamportResidencyShare of the GPU)
  std::mt19937 rng(8);
  for (int threads : {32, 128, 256, 512}) {
    w.blockThreads = threads;
    std::vector<CallSpec> calls;
    calls.push_back(CallSpec{LamportDataType::kBFloat16, LamportReduceOp::kSum, (4u << 20) / 2 - 64, 0, 0, false, Values::kRandom});
    ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng)) << threads << " threads";
    calls = {CallSpec{LamportDataType::kFloat32, LamportReduceOp::kAvg, 300001, 2, 6, false, Values::kRandom},
             CallSpec{LamportDataType::kFloat16, LamportReduceOp::kSum, 77777, 0, 2, true, Values::kSpecial}};
    ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng)) << threads << " threads";
  }
}

// The late PDL trigger and a quarter of the device per launch (the A/B pair of the loopback
// benchmark): correct for every block size, capped grids that stride, unaligned and special values.
TEST(GpuLamportOneShot, LateTriggerAndQuarterShareStayCorrect) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, 4u << 20, 4u << 20));
  w.maxBlocks = 0;
  w.residencyShare = 4;
  w.triggerAfterWait = 1;
  std::mt19937 rng(11);
  for (int threads : {32, 128, 512}) {
    w.blockThreads = threads;
    // One batch per large call: a batch's calls share the 4 MiB I/O buffers.
    for (const CallSpec& c :
         {CallSpec{LamportDataType::kBFloat16, LamportReduceOp::kSum, (4u << 20) / 2 - 64, 0, 0, false, Values::kRandom},
          CallSpec{LamportDataType::kFloat32, LamportReduceOp::kAvg, 300001, 2, 6, false, Values::kRandom},
          CallSpec{LamportDataType::kFloat16, LamportReduceOp::kSum, 77777, 0, 2, true, Values::kSpecial},
          CallSpec{LamportDataType::kBFloat16, LamportReduceOp::kSum, 1, 0, 0, false, Values::kRandom}}) {
      ASSERT_NO_FATAL_FAILURE(runBatch(w, {c}, rng)) << threads << " threads, " << c.name();
    }
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(40, rng, 40000), rng)) << threads << " threads";
  }
  w.expectNoErrors();
}

// ---------------------------------------------------------------------------------------------
// Other world sizes (unrolled 4, 8; generic 3, 5)
// ---------------------------------------------------------------------------------------------

class GpuLamportRanks : public ::testing::TestWithParam<int> {};

TEST_P(GpuLamportRanks, CorrectAndRotates) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(GetParam(), kIoBytes));
  std::mt19937 rng(GetParam());
  for (LamportDataType t : kTypes) {
    std::vector<CallSpec> calls;
    for (LamportReduceOp op : kOps) {
      for (size_t count : {size_t{1}, size_t{9}, size_t{1000}, size_t{4097}, size_t{65537}}) {
        calls.push_back(CallSpec{t, op, count, 0, 0, false, Values::kRandom});
        calls.push_back(CallSpec{t, op, count, 2, elemBytes(t), false, Values::kSpecial});
      }
    }
    ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng));
  }
  for (int batch = 0; batch < 4; ++batch) {
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(50, rng, 40000), rng));
  }
  w.expectNoErrors();
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuLamportRanks, ::testing::Values(3, 4, 5, 8));

}  // namespace
}  // namespace nccl_lamport
