// GPU tests of the co-residency bound (issue 10 point 1) on the simulated ranks of
// tests/gpu/kernel_world.cuh: two communicators over the same ranks, their large calls issued in
// opposite orders, must not deadlock. Part of the test_gpu_kernel executable; skipped (never
// passed) without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <utility>

#include "kernels/lamport_allreduce.h"
#include "tests/gpu/kernel_world.cuh"

namespace nccl_lamport {
namespace {

using namespace kerneltest;

/** Launch options of the opposite-order scenario beyond the kernel variant. */
struct OppositeOrderOptions {
  int callsPerStream = 1;    // back-to-back calls on each (communicator, rank) stream
  int residencyShare = 0;    // 0 = the launcher's default
  int triggerAfterWait = 0;  // 0 = the launcher's choice, > 0 late PDL trigger, < 0 early
  size_t bytesOfC = 0;       // communicator C's message; 0 = the same as A's
  LamportFastPass passOfC = LamportFastPass::kAuto;  // communicator C's kFast kernel
};

/**
 * Issue 10 point 1: two communicators A and C over the same two ranks, each on its own streams,
 * large allreduces issued A-then-C on rank 0 and C-then-A on rank 1, the grids sized by the
 * launcher alone (no test cap). With full-residency grids the first kernel fills the GPU and the
 * others never get an SM, so every kernel waits until its timeout
 * (BaselineFullResidencyGridsDeadlockTwoCommunicators shows it). The default kernel takes a bounded
 * share of the device, so all four are co-resident and the calls finish.
 */
void runOppositeOrder(LamportKernelVariant variant, size_t bytes, uint64_t timeoutNs, bool expectOk,
                      const OppositeOrderOptions& o = {}) {
  const size_t bytesC = o.bytesOfC != 0 ? o.bytesOfC : bytes;
  World a, c;
  ASSERT_NO_FATAL_FAILURE(a.init(2, bytes + kPad, bytes));
  ASSERT_NO_FATAL_FAILURE(c.init(2, bytesC + kPad, bytesC));
  for (World* w : {&a, &c}) {
    w->maxBlocks = 0;
    w->variant = variant;
    w->timeoutNs = timeoutNs;
    w->residencyShare = o.residencyShare;
    w->triggerAfterWait = o.triggerAfterWait;
  }
  c.fastPass = o.passOfC;
  std::mt19937 rng(static_cast<unsigned>(bytes));
  const CallSpec spec{LamportDataType::kBFloat16, LamportReduceOp::kSum, bytes / 2};
  const CallSpec specC{LamportDataType::kBFloat16, LamportReduceOp::kSum, bytesC / 2};
  const auto inA = prepareCall(a, spec, rng);
  const auto inC = prepareCall(c, specC, rng);
  // Same inputs every call of a stream, so the last call's result is checked like the first's;
  // with PDL each call after the first may be pre-launched while the one before it still waits.
  auto launch = [&](World& w, int rank) {
    const CallSpec& s = &w == &a ? spec : specC;
    for (int i = 0; i < o.callsPerStream; ++i) {
      w.launch(rank, w.args(rank, w.ranks[rank].send, w.ranks[rank].recv, s));
    }
  };
  const auto start = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(launch(a, 0));  // rank 0: A then C
  ASSERT_NO_FATAL_FAILURE(launch(c, 1));  // rank 1: C then A
  ASSERT_NO_FATAL_FAILURE(launch(c, 0));
  ASSERT_NO_FATAL_FAILURE(launch(a, 1));
  ASSERT_NO_FATAL_FAILURE(a.syncAll());
  ASSERT_NO_FATAL_FAILURE(c.syncAll());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint32_t errors = 0;
  for (World* w : {&a, &c}) {
    for (int r = 0; r < 2; ++r) errors |= w->errorHost[r];
  }
  if (expectOk) {
    EXPECT_EQ(errors, 0u) << bytes << " bytes: a kernel gave up after " << seconds << " s (deadlock)";
    ASSERT_NO_FATAL_FAILURE(checkPrepared(a, spec, inA));
    ASSERT_NO_FATAL_FAILURE(checkPrepared(c, specC, inC));
  } else {
    EXPECT_NE(errors, 0u) << "the baseline's full-residency grids were expected to deadlock";
  }
}

TEST(GpuLamportOneShot, TwoCommunicatorsInOppositeOrderDoNotDeadlock) {
  SKIP_WITHOUT_GPU();
  for (size_t bytes : {size_t{4} << 20, size_t{8} << 20, size_t{16} << 20}) {
    ASSERT_NO_FATAL_FAILURE(runOppositeOrder(LamportKernelVariant::kFast, bytes, 5ull * 1000 * 1000 * 1000, true))
        << bytes << " bytes";
  }
}

// The same with three calls per stream (PDL may pre-launch each next call), for the launch options
// whose co-residency argument covers pre-launched grids (kLamportResidencyShare): the default (a
// quarter of the device, late trigger for these large grids), the earlier default (an eighth, early
// trigger), and a quarter with the late trigger forced (both ranks and both communicators on one
// GPU: 4 spinning grids).
TEST(GpuLamportOneShot, OppositeOrderWithBackToBackCallsDoesNotDeadlock) {
  SKIP_WITHOUT_GPU();
  for (const OppositeOrderOptions o :
       {OppositeOrderOptions{3, 0, 0}, OppositeOrderOptions{3, 8, -1}, OppositeOrderOptions{3, 4, 1}}) {
    for (size_t bytes : {size_t{4} << 20, size_t{16} << 20}) {
      ASSERT_NO_FATAL_FAILURE(runOppositeOrder(LamportKernelVariant::kFast, bytes, 5ull * 1000 * 1000 * 1000, true, o))
          << bytes << " bytes, share " << o.residencyShare << ", late trigger " << o.triggerAfterWait;
    }
  }
}

// Different kernels in the two communicators, 2 ranks, 3 calls a stream: A's grid-strided kernel
// (2, 8, 16 MiB) against C's single pass with the late PDL trigger (512 KiB) or the early one
// (64 KiB), and against C's stash kernel (LamportFastPass::kGridStridedStash, 2 MiB): the one
// kernel that uses its dynamic shared memory, whose blocks must still find room on SMs where A's
// spinning blocks set the shared-memory carveout (every launch carries the same amount:
// lamportDynamicSmemBytes).
TEST(GpuLamportOneShot, OppositeOrderWithDifferentKernelsDoesNotDeadlock) {
  SKIP_WITHOUT_GPU();
  struct Pair {
    size_t bytesA, bytesC;
    LamportFastPass passOfC;
  };
  constexpr LamportFastPass kAuto = LamportFastPass::kAuto;
  for (const Pair& p : {Pair{size_t{16} << 20, size_t{512} << 10, kAuto}, Pair{size_t{2} << 20, size_t{64} << 10, kAuto},
                        Pair{size_t{8} << 20, size_t{64} << 10, kAuto},
                        Pair{size_t{8} << 20, size_t{2} << 20, LamportFastPass::kGridStridedStash}}) {
    OppositeOrderOptions o;
    o.callsPerStream = 3;
    o.bytesOfC = p.bytesC;
    o.passOfC = p.passOfC;
    ASSERT_NO_FATAL_FAILURE(runOppositeOrder(LamportKernelVariant::kFast, p.bytesA, 5ull * 1000 * 1000 * 1000, true, o))
        << p.bytesA << " bytes against " << p.bytesC << ", pass of C " << static_cast<int>(p.passOfC);
  }
}

// The opposite-order test is able to fail: the same scenario with the launcher of 2026-12-01 (kBaseline,
// full-residency grids) deadlocks until the (short) timeout. Only meaningful with both ranks on
// one GPU, where one grid fills the device.
TEST(GpuLamportOneShot, BaselineFullResidencyGridsDeadlockTwoCommunicators) {
  SKIP_WITHOUT_GPU();
  if (gpuCount() >= 2) GTEST_SKIP() << "needs both ranks on one GPU";
  ASSERT_NO_FATAL_FAILURE(runOppositeOrder(LamportKernelVariant::kBaseline, size_t{8} << 20,
                                           1000ull * 1000 * 1000, false));
}

}  // namespace
}  // namespace nccl_lamport
