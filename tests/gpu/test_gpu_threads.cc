// GPU correctness, launch pattern "one thread per GPU" (nccl-tests -t N, thread-per-device
// frameworks): each thread sets its device and creates its communicator with ncclCommInitRank, then
// runs the scenario on it. Two flavours: plain calls, and every init and call wrapped in a group of
// its own thread (ncclGroupStart; call; ncclGroupEnd). Captures are thread-local (other threads keep
// allocating and copying while one captures). Threads meet at a barrier after each checked call and
// compare their result bytes with rank 0's directly.
//
// This executable initialises CUDA in-process, so it never forks (unlike the multiprocess tests).
#include <chrono>
#include <thread>

#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {
namespace {

/** Submitters meet at a barrier; each compares its bytes with rank 0's. A thread that stops calls
 *  leave() so the others never wait for it; a wait longer than 300 s gives up with a failure. */
class BarrierCompare : public CrossRankCheck {
 public:
  explicit BarrierCompare(int parties) : parties_(parties), bytes_(parties), labels_(parties) {}

  void submit(const RankSlot& slot, const std::string& label, const std::vector<uint8_t>& result,
              Failures& failures) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      bytes_[slot.rank] = result;
      labels_[slot.rank] = label;
    }
    if (!arriveAndWait()) {
      failures.add("rank %d: %s: gave up waiting 300 s for the other threads", slot.rank, label.c_str());
    } else if (slot.rank != 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      const std::string diff =
          labels_[0] != label ? "rank 0 was at \"" + labels_[0] + "\"" : firstDifference(bytes_[0], result);
      if (!diff.empty()) {
        failures.add("rank %d: %s: result not bit-identical to rank 0's: %s", slot.rank, label.c_str(), diff.c_str());
      }
    }
    arriveAndWait();  // rank 0's bytes stay put until every thread has compared
  }

  void leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    --parties_;
    if (arrived_ > 0 && arrived_ >= parties_) release();
  }

 private:
  void release() {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  }

  bool arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ >= parties_) {
      release();
      return true;
    }
    if (cv_.wait_for(lock, std::chrono::seconds(300), [&] { return generation_ != generation; })) return true;
    --arrived_;  // withdraw, so the barrier's count stays right for the others
    return false;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  int parties_, arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::vector<uint8_t>> bytes_;
  std::vector<std::string> labels_;
};

enum class ThreadMode { kUngrouped, kGroupedPerThread };
const char* modeName(ThreadMode mode) { return mode == ThreadMode::kUngrouped ? "Ungrouped" : "GroupedPerThread"; }
void PrintTo(ThreadMode mode, std::ostream* os) { *os << modeName(mode); }

/** Runs scenario on one thread per GPU; EXPECTs on every thread's failures; returns a skip reason. */
std::string runThreads(ThreadMode mode, const std::function<void(Harness&)>& scenario) {
  const int n = inProcessGpuCount();
  if (n < 2) return "needs 2 GPUs, this machine has " + std::to_string(n);
  ncclUniqueId id;
  const ncclResult_t idRc = ncclGetUniqueId(&id);
  if (idRc != ncclSuccess) {
    ADD_FAILURE() << "ncclGetUniqueId returned " << idRc;
    return "";
  }
  const bool grouped = mode == ThreadMode::kGroupedPerThread;
  BarrierCompare cross(n);
  std::vector<Failures> failures(n);
  std::vector<std::string> skips(n);
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  Watchdog watchdog(540, std::string(test->test_suite_name()) + "." + test->name(), &failures[0]);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Harness h;
      h.grouping = grouped ? Grouping::kGrouped : Grouping::kNone;
      h.captureMode = cudaStreamCaptureModeThreadLocal;
      h.cross = &cross;
      h.failures = &failures[r];
      RankSlot s;
      s.rank = r;
      s.nRanks = n;
      s.device = r;
      ncclResult_t rc = ncclInternalError;
      if (cudaSetDevice(r) == cudaSuccess && cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) == cudaSuccess) {
        if (grouped) ncclGroupStart();
        rc = ncclCommInitRank(&s.comm, n, id, r);
        if (grouped && rc == ncclSuccess) rc = ncclGroupEnd();
      }
      if (rc != ncclSuccess) {
        failures[r].add("rank %d: CUDA set-up or ncclCommInitRank failed (%d)", r, rc);
      } else {
        h.slots.push_back(s);
        h.begin();
        skips[r] = h.requireEligible();
        if (skips[r].empty() && failures[r].count() == 0) {
          scenario(h);
          h.checkNoAsyncError("end of test");
          h.checkCounters("end of test");
        }
      }
      cross.leave();
      if (s.comm != nullptr && ncclCommDestroy(s.comm) != ncclSuccess) failures[r].add("rank %d: ncclCommDestroy failed", r);
      if (s.stream != nullptr) cudaStreamDestroy(s.stream);
    });
  }
  for (std::thread& t : threads) t.join();
  bool allSkipped = true;
  for (int r = 0; r < n; ++r) allSkipped = allSkipped && !skips[r].empty() && failures[r].count() == 0;
  if (allSkipped) return skips[0];
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(skips[r].empty() && failures[r].count() == 0 && failures[r].checks() > 0)
        << "rank " << r << ": " << failures[r].count() << " failures, " << failures[r].checks() << " checks"
        << (skips[r].empty() ? "" : ", skipped: " + skips[r]) << "\n" << failures[r].text();
  }
  return "";
}

#define LAMPORT_RUN_THREADS(...)                                     \
  do {                                                               \
    const std::string skip = runThreads(GetParam(), __VA_ARGS__);    \
    if (!skip.empty()) GTEST_SKIP() << skip;                         \
  } while (0)

class Threads : public ::testing::TestWithParam<ThreadMode> {};

TEST_P(Threads, CommInfoAndRouting) { LAMPORT_RUN_THREADS([](Harness& h) { scenarioCommInfoAndRouting(h); }); }
TEST_P(Threads, SweepFloat32) { LAMPORT_RUN_THREADS([](Harness& h) { scenarioSweep(h, ncclFloat32); }); }
TEST_P(Threads, SweepFloat16) { LAMPORT_RUN_THREADS([](Harness& h) { scenarioSweep(h, ncclFloat16); }); }
TEST_P(Threads, SweepBfloat16) { LAMPORT_RUN_THREADS([](Harness& h) { scenarioSweep(h, ncclBfloat16); }); }
TEST_P(Threads, SpecialValues) { LAMPORT_RUN_THREADS([](Harness& h) { scenarioSpecialValues(h); }); }
TEST_P(Threads, BackToBack3000) { LAMPORT_RUN_THREADS([](Harness& h) { scenarioBackToBack(h, 3000); }); }
TEST_P(Threads, CudaGraph500Replays) { LAMPORT_RUN_THREADS([](Harness& h) { scenarioCudaGraph(h, 500); }); }

INSTANTIATE_TEST_SUITE_P(Mode, Threads, ::testing::Values(ThreadMode::kUngrouped, ThreadMode::kGroupedPerThread),
                         [](const ::testing::TestParamInfo<ThreadMode>& p) {
                           return std::string(modeName(p.param));
                         });

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
