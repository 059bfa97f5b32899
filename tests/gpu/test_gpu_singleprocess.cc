// GPU correctness, launch pattern "one process drives every GPU" (nccl-tests -g N, JAX, single-
// process multi-GPU PyTorch): one thread creates a communicator per GPU, either with ncclCommInitAll
// or with ncclGroupStart + ncclCommInitRank per GPU + ncclGroupEnd, and issues every step as
// ncclGroupStart; ncclAllReduce per GPU; ncclGroupEnd. Each call is made while another GPU is the
// current device (SPEC 5: the plugin runs on the communicator's device and leaves the current
// device alone). Results of all ranks are compared byte for byte in this process. CUDA graphs are
// captured on every GPU's stream at once, thread-local (as nccl-tests -g N -G does); the
// multiprocess tests capture in global mode (PyTorch's default).
//
// This executable initialises CUDA in-process, so it never forks (unlike the multiprocess tests).
#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {
namespace {

/** Every rank of a call submits in turn; each is compared byte for byte with the first. */
class DirectCompare : public CrossRankCheck {
 public:
  void submit(const RankSlot& slot, const std::string& label, const std::vector<uint8_t>& result,
              Failures& failures) override {
    if (label != label_ || firstRank_ < 0) {
      label_ = label;
      firstRank_ = slot.rank;
      first_ = result;
      return;
    }
    const std::string diff = firstDifference(first_, result);
    if (!diff.empty()) {
      failures.add("rank %d: %s: result not bit-identical to rank %d's: %s", slot.rank, label.c_str(),
                   firstRank_, diff.c_str());
    }
  }

 private:
  std::string label_;
  int firstRank_ = -1;
  std::vector<uint8_t> first_;
};

enum class InitMode { kInitAll, kGroupedInitRank };
const char* modeName(InitMode mode) { return mode == InitMode::kInitAll ? "CommInitAll" : "GroupedCommInitRank"; }
void PrintTo(InitMode mode, std::ostream* os) { *os << modeName(mode); }

class SingleProcess : public ::testing::TestWithParam<InitMode> {
 protected:
  void SetUp() override {
    const int n = inProcessGpuCount();
    if (n < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << n;
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    watchdog_.reset(new Watchdog(540, std::string(test->test_suite_name()) + "." + test->name(), &failures_));
    std::vector<ncclComm_t> comms(n, nullptr);
    std::vector<int> devices(n);
    for (int i = 0; i < n; ++i) {
      devices[i] = i;
      RankSlot s;
      s.rank = i;
      s.nRanks = n;
      s.device = i;
      ASSERT_EQ(cudaSetDevice(i), cudaSuccess);
      ASSERT_EQ(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), cudaSuccess);
      h_.slots.push_back(s);
    }
    ncclResult_t rc;
    if (GetParam() == InitMode::kInitAll) {
      rc = ncclCommInitAll(comms.data(), n, devices.data());
    } else {
      ncclUniqueId id;
      ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      for (int i = 0; i < n; ++i) {
        cudaSetDevice(i);
        rc = ncclCommInitRank(&comms[i], n, id, i);
        ASSERT_EQ(rc, ncclSuccess) << "ncclCommInitRank inside a group, rank " << i;
      }
      rc = ncclGroupEnd();
    }
    ASSERT_EQ(rc, ncclSuccess) << ncclGetErrorString(rc);
    for (int i = 0; i < n; ++i) h_.slots[i].comm = comms[i];
    h_.grouping = Grouping::kGrouped;
    h_.wrongCurrentDevice = true;
    h_.captureMode = cudaStreamCaptureModeThreadLocal;  // as nccl-tests -g N -G captures
    h_.cross = &cross_;
    h_.failures = &failures_;
    h_.begin();
    const std::string skip = h_.requireEligible();
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_EQ(failures_.count(), 0) << failures_.text();
  }

  void TearDown() override {
    const bool ran = !IsSkipped() && !HasFatalFailure();
    if (ran) {
      h_.checkNoAsyncError("end of test");
      h_.checkCounters("end of test");
    }
    for (RankSlot& s : h_.slots) {
      if (s.comm != nullptr) {
        EXPECT_EQ(ncclCommDestroy(s.comm), ncclSuccess) << "rank " << s.rank;
      }
      if (s.stream != nullptr) cudaStreamDestroy(s.stream);
    }
    if (ran) {
      EXPECT_EQ(failures_.count(), 0) << failures_.text();
      EXPECT_GT(failures_.checks(), 0) << "the scenario checked nothing";
    }
    watchdog_.reset();
  }

  Harness h_;
  Failures failures_;
  DirectCompare cross_;
  std::unique_ptr<Watchdog> watchdog_;
};

TEST_P(SingleProcess, CommInfoAndRouting) { scenarioCommInfoAndRouting(h_); }
TEST_P(SingleProcess, SweepFloat32) { scenarioSweep(h_, ncclFloat32); }
TEST_P(SingleProcess, SweepFloat16) { scenarioSweep(h_, ncclFloat16); }
TEST_P(SingleProcess, SweepBfloat16) { scenarioSweep(h_, ncclBfloat16); }
TEST_P(SingleProcess, SpecialValues) { scenarioSpecialValues(h_); }
TEST_P(SingleProcess, BackToBack3000) { scenarioBackToBack(h_, 3000); }
TEST_P(SingleProcess, CudaGraph500Replays) { scenarioCudaGraph(h_, 500); }

INSTANTIATE_TEST_SUITE_P(Init, SingleProcess, ::testing::Values(InitMode::kInitAll, InitMode::kGroupedInitRank),
                         [](const ::testing::TestParamInfo<InitMode>& p) {
                           return std::string(modeName(p.param));
                         });

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
