// GPU tests of the Lamport two-shot kernel (LamportKernelVariant::kTwoShot) without NCCL, on the
// simulated ranks of tests/gpu/kernel_world.cuh: unrolled 4 and 8 ranks, generic 3 and 5.
// Skipped (never passed) without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/lamport_allreduce.h"
#include "kernels/lamport_layout.h"
#include "tests/gpu/kernel_world.cuh"

namespace nccl_lamport {
namespace {

using namespace kerneltest;

class GpuLamportTwoShot : public ::testing::TestWithParam<int> {};

TEST_P(GpuLamportTwoShot, CorrectAndRotatesWithOneShotRounds) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(GetParam(), kIoBytes));
  w.variant = LamportKernelVariant::kTwoShot;
  std::mt19937 rng(100 + GetParam());
  for (LamportDataType t : kTypes) {
    std::vector<CallSpec> calls;
    for (LamportReduceOp op : kOps) {
      for (size_t count : {size_t{1}, size_t{9}, size_t{1000}, size_t{4097}, size_t{65537}, kSlotBytes / elemBytes(t)}) {
        calls.push_back(CallSpec{t, op, count, 0, 0, false, Values::kRandom});
        calls.push_back(CallSpec{t, op, count, 2, elemBytes(t), false, Values::kSpecial});
        calls.push_back(CallSpec{t, op, count, 0, 2, true, Values::kRandom});
      }
    }
    for (size_t i = 0; i < calls.size(); i += 12) {
      std::vector<CallSpec> batch(calls.begin() + i, calls.begin() + std::min(calls.size(), i + 12));
      ASSERT_NO_FATAL_FAILURE(runBatch(w, batch, rng)) << typeName(t);
    }
  }
  // The largest two-shot message: nRanks / 2 slots (two chunks per slot).
  const size_t capacityBytes = kSlotBytes / 32 * GetParam() * 16;
  for (LamportDataType t : kTypes) {
    ASSERT_NO_FATAL_FAILURE(runBatch(w, {CallSpec{t, LamportReduceOp::kSum, capacityBytes / elemBytes(t), 0, 0, false, Values::kRandom}}, rng));
  }
  // Two-shot and one-shot rounds alternate on the same workspace (shared rotation and dirty state).
  for (int batch = 0; batch < 6; ++batch) {
    w.variant = batch % 2 ? LamportKernelVariant::kFast : LamportKernelVariant::kTwoShot;
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(40, rng, 100000), rng)) << "batch " << batch;
  }
  w.expectNoErrors();
}

// A partial sum that rounds to -0.0 (the empty sentinel) must be re-sanitized before the
// all-gather publishes it, or the peers poll it until the timeout: avg of (negative smallest
// subnormal, +0, ...) is -tiny / nRanks, which rounds to -0 in every datatype.
TEST_P(GpuLamportTwoShot, ReducedNegativeZeroIsResanitized) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(GetParam(), 1 << 20));
  w.variant = LamportKernelVariant::kTwoShot;
  w.timeoutNs = 2ull * 1000 * 1000 * 1000;
  for (LamportDataType t : kTypes) {
    const CallSpec c{t, LamportReduceOp::kAvg, 4099};
    const uint32_t tiny = t == LamportDataType::kFloat32 ? 0x80000001u : 0x8001u;
    std::vector<std::vector<uint8_t>> inputs(w.nRanks, std::vector<uint8_t>(c.count * elemBytes(t), 0));
    // 16-bit types: only the high element of each 32-bit word, so the reduced word is exactly
    // (-0.0, +0.0) = 0x80000000, the sentinel; fp32: every element.
    for (size_t i = elemBytes(t) == 4 ? 0 : 1; i < c.count; i += elemBytes(t) == 4 ? 1 : 2) {
      std::memcpy(inputs[0].data() + i * elemBytes(t), &tiny, elemBytes(t));
    }
    for (int r = 0; r < w.nRanks; ++r) {
      CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
      CUDA_ASSERT(cudaMemcpy(w.ranks[r].send, inputs[r].data(), inputs[r].size(), cudaMemcpyHostToDevice));
      CUDA_ASSERT(cudaMemset(w.ranks[r].recv, 0xff, inputs[r].size() + kPad));
    }
    for (int r = 0; r < w.nRanks; ++r) ASSERT_NO_FATAL_FAILURE(w.launch(r, w.args(r, w.ranks[r].send, w.ranks[r].recv, c)));
    ASSERT_NO_FATAL_FAILURE(w.syncAll());
    w.expectNoErrors();
    ASSERT_NO_FATAL_FAILURE(checkPrepared(w, c, inputs)) << typeName(t);
  }
}

TEST_P(GpuLamportTwoShot, GraphReplays) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(GetParam(), kIoBytes));
  w.variant = LamportKernelVariant::kTwoShot;
  const CallSpec c{LamportDataType::kBFloat16, LamportReduceOp::kSum, 100003};
  std::vector<cudaGraphExec_t> execs(w.nRanks);
  for (int r = 0; r < w.nRanks; ++r) {
    SimRank& k = w.ranks[r];
    CUDA_ASSERT(cudaSetDevice(k.device));
    CUDA_ASSERT(cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < 3; ++i) CUDA_ASSERT(launchLamportAllReduce(w.args(r, k.send, k.recv, c), k.stream));
    cudaGraph_t graph;
    CUDA_ASSERT(cudaStreamEndCapture(k.stream, &graph));
    CUDA_ASSERT(cudaGraphInstantiate(&execs[r], graph, 0));
    CUDA_ASSERT(cudaGraphDestroy(graph));
  }
  std::mt19937 rng(3);
  for (int rep = 0; rep < 100; ++rep) {
    const auto inputs = prepareCall(w, c, rng);
    for (int r = 0; r < w.nRanks; ++r) {
      CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
      CUDA_ASSERT(cudaGraphLaunch(execs[r], w.ranks[r].stream));
    }
    ASSERT_NO_FATAL_FAILURE(w.syncAll());
    ASSERT_NO_FATAL_FAILURE(checkPrepared(w, c, inputs)) << "replay " << rep;
  }
  w.expectNoErrors();
  for (int r = 0; r < w.nRanks; ++r) {
    EXPECT_EQ(w.state(r).roundsDone, 300u);
    cudaGraphExecDestroy(execs[r]);
  }
}

// Ranks that give up (a peer never came in time) must not publish their partial chunk sums: a late
// peer would gather them as the reduced chunks and finish with a wrong result and no error.
TEST_P(GpuLamportTwoShot, AGiveUpPublishesNoPartialSum) {
  SKIP_WITHOUT_GPU();
  const int n = GetParam();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(n, 1 << 20));
  w.variant = LamportKernelVariant::kTwoShot;
  w.timeoutNs = 50ull * 1000 * 1000;
  const CallSpec c{LamportDataType::kFloat32, LamportReduceOp::kSum, 4096};
  const std::vector<float> ones(c.count, 1.0f);
  for (int r = 0; r < n; ++r) {
    CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
    CUDA_ASSERT(cudaMemcpy(w.ranks[r].send, ones.data(), c.count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemset(w.ranks[r].recv, 0xFF, c.count * sizeof(float)));
  }
  const int late = n - 1;
  for (int r = 0; r < late; ++r) ASSERT_NO_FATAL_FAILURE(w.launch(r, w.args(r, w.ranks[r].send, w.ranks[r].recv, c)));
  w.syncAll();  // every rank but `late` has given up on it
  for (int r = 0; r < late; ++r) EXPECT_EQ(w.errorHost[r], static_cast<uint32_t>(kLamportTimedOut)) << "rank " << r;
  ASSERT_NO_FATAL_FAILURE(w.launch(late, w.args(late, w.ranks[late].send, w.ranks[late].recv, c)));
  w.syncAll();
  std::vector<float> got(c.count);
  CUDA_ASSERT(cudaSetDevice(w.ranks[late].device));
  CUDA_ASSERT(cudaMemcpy(got.data(), w.ranks[late].recv, c.count * sizeof(float), cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (float v : got) wrong += v != static_cast<float>(n);
  // Either the late rank reports the failure itself, or every element it wrote is the full sum.
  EXPECT_TRUE(w.errorHost[late] != 0 || wrong == 0)
      << wrong << " of " << c.count << " elements are partial sums and the late rank reports no error";
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuLamportTwoShot, ::testing::Values(3, 4, 5, 8));

}  // namespace
}  // namespace nccl_lamport
