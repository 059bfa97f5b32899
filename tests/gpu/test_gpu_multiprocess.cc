// GPU correctness, launch pattern "one process per GPU" (torchrun, mpirun, nccl-tests under MPI):
// every test forks one rank per visible GPU with launchRanks; each rank inits its communicator with
// ncclCommInitRank and runs a scenario of gpu_test_support. This gtest process never touches CUDA
// (it forks), so it is a separate executable from the in-process patterns.
//
// Ranks report through the shared results: failures as text (shown by the parent's EXPECT), and
// an FNV hash of every checked result, which the parent compares across ranks (bit-identical).
#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {
namespace {

ForkOptions allGpus(double timeoutSeconds = 300) { return forkRanks(0, timeoutSeconds); }

TEST(MultiProcess, CommInfoAndRouting) {
  LAMPORT_RUN_FORKED(allGpus(), [](Harness& h, RankContext&) { scenarioCommInfoAndRouting(h); });
}

class MultiProcessSweep : public ::testing::TestWithParam<ncclDataType_t> {};

TEST_P(MultiProcessSweep, CountsLayoutsSumAvg) {
  const ncclDataType_t dtype = GetParam();
  LAMPORT_RUN_FORKED(allGpus(), [dtype](Harness& h, RankContext&) { scenarioSweep(h, dtype); });
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MultiProcessSweep, ::testing::Values(ncclFloat32, ncclFloat16, ncclBfloat16),
                         [](const ::testing::TestParamInfo<ncclDataType_t>& p) {
                           return std::string(dtypeName(p.param));
                         });

TEST(MultiProcess, SpecialValues) {
  LAMPORT_RUN_FORKED(allGpus(), [](Harness& h, RankContext&) { scenarioSpecialValues(h); });
}

// Each rank wraps its call in ncclGroupStart/End (what a framework's coalescing manager does).
TEST(MultiProcess, GroupedCallsSpecialValues) {
  LAMPORT_RUN_FORKED(allGpus(), [](Harness& h, RankContext&) {
    h.grouping = Grouping::kGrouped;
    scenarioSpecialValues(h);
  });
}

// The crossover raised to 16 MB, so that 1-6 MB messages take the one-shot's grid-strided kernel
// (at 2 ranks; with more ranks the workspace may cap the crossover lower, and the calls above it go
// to NCCL, checked all the same), which the suite's 256 KB crossover never reaches.
TEST(MultiProcess, LargeMessagesTakeTheGridStridedKernel) {
  LAMPORT_RUN_FORKED(forkRanks(0, 300, {{"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "16M"}}),
                     [](Harness& h, RankContext&) { scenarioLargeMessages(h); });
}

TEST(MultiProcess, BackToBack3000) {
  LAMPORT_RUN_FORKED(allGpus(), [](Harness& h, RankContext&) { scenarioBackToBack(h, 3000); });
}

TEST(MultiProcess, CudaGraph500Replays) {
  LAMPORT_RUN_FORKED(allGpus(), [](Harness& h, RankContext&) { scenarioCudaGraph(h, 500); });
}

// ncclCommSplit is wrapped: the child communicator gets its own workspace and is accelerated too,
// and calls alternating between parent and child stay correct (separate rotation state).
TEST(MultiProcess, SplitCommunicatorAlternatingWithParent) {
  LAMPORT_RUN_FORKED(allGpus(), [](Harness& h, RankContext&) {
    RankSlot& parent = h.slots[0];
    ncclComm_t child = nullptr;
    const ncclResult_t rc = ncclCommSplit(parent.comm, 0, parent.rank, &child, nullptr);
    if (rc != ncclSuccess || child == nullptr) {
      h.fail(parent, "ncclCommSplit returned " + std::to_string(rc));
      return;
    }
    Harness split = h;
    split.slots[0].comm = child;
    split.begin();
    if (!split.requireEligible().empty()) h.fail(parent, "the split communicator is not eligible, the parent is");
    uint64_t call = 0;
    for (size_t count : {size_t{1}, size_t{4097}, size_t{65536}, size_t{100000}}) {
      for (ncclDataType_t dtype : {ncclFloat32, ncclBfloat16}) {
        CallSpec spec;
        spec.dtype = dtype;
        spec.count = count;
        runCheckedStep(h, spec, mixSeed(0x5B117, call++), true);
        spec.op = ncclAvg;
        runCheckedStep(split, spec, mixSeed(0x5B117, call++), true);
      }
    }
    split.checkNoAsyncError("split comm");
    split.checkCounters("split comm");
    const ncclResult_t destroyed = ncclCommDestroy(child);
    if (destroyed != ncclSuccess) h.fail(parent, "ncclCommDestroy(child) returned " + std::to_string(destroyed));
  });
}

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
