// The process side of the GPU suite: forked ranks (one process per GPU), the one-process
// runner, the watchdog, and the shared-GPU mode that lets the forked tests run on a machine
// with a single GPU (tests/gpu/shared_gpu.h).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/gpu/gpu_test_support.h"
#include "tests/gpu/shared_gpu.h"

namespace nccl_lamport {
namespace gputest {

ForkOptions forkRanks(int nRanks, double timeoutSeconds, std::vector<std::pair<std::string, std::string>> env,
                      int lamportTimeoutMs) {
  ForkOptions options;
  options.nRanks = nRanks;
  options.timeoutSeconds = timeoutSeconds;
  options.env = std::move(env);
  if (lamportTimeoutMs > 0) options.env.push_back({"NCCL_LAMPORT_TIMEOUT_MS", std::to_string(lamportTimeoutMs)});
  return options;
}

namespace {
class HashRecorder : public CrossRankCheck {
 public:
  explicit HashRecorder(SharedReport* report) : report_(report) {}
  void submit(const RankSlot&, const std::string& label, const std::vector<uint8_t>& result, Failures&) override {
    if (report_->nHashes >= sizeof(report_->hashes) / sizeof(report_->hashes[0])) {
      report_->hashOverflow = 1;
      return;
    }
    SharedReport::Entry& e = report_->hashes[report_->nHashes++];
    e.hash = fnv1a64(result.data(), result.size());
    snprintf(e.label, sizeof(e.label), "%s", label.c_str());
  }

 private:
  SharedReport* report_;
};

int forkedRank(const ForkOptions& options, const RankScenario& scenario, RankContext& ctx, int gpus, bool shared) {
  // Shared-GPU variables first, so a test's own options.env can still override them.
  for (const auto& kv : sharedGpuEnvironment(ctx.rank, shared)) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  for (const auto& kv : options.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  auto* report = static_cast<SharedReport*>(ctx.myResults());
  Failures failures;
  failures.mirrorTo(report->text, sizeof(report->text));
  HashRecorder recorder(report);
  Harness h;
  h.failures = &failures;
  h.cross = &recorder;
  RankSlot slot;
  slot.rank = ctx.rank;
  slot.nRanks = ctx.nRanks;
  slot.device = forkedRankDevice(ctx.rank, gpus, shared);
  cudaError_t err = cudaSetDevice(slot.device);
  if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&slot.stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) {
    failures.add("rank %d: CUDA set-up: %s", ctx.rank, cudaGetErrorString(err));
    return 1;
  }
  const ncclUniqueId id = ctx.uniqueId();
  const ncclResult_t rc = ncclCommInitRank(&slot.comm, ctx.nRanks, id, ctx.rank);
  if (rc != ncclSuccess) {
    failures.add("rank %d: ncclCommInitRank returned %d (%s)", ctx.rank, rc, ncclGetErrorString(rc));
    return 1;
  }
  const std::string activationProblem = activationProblemAfterInit();  // tuner build: NCCL loaded our tuner
  if (!activationProblem.empty()) failures.add("rank %d: %s", ctx.rank, activationProblem.c_str());
  h.slots.push_back(slot);
  h.begin();
  const std::string skip = options.requireEligible ? h.requireEligible() : "";
  if (skip.empty() && failures.count() == 0) scenario(h, ctx);
  RankSlot& s = h.slots[0];
  if (s.comm != nullptr) {  // a scenario that aborted its comm sets it to nullptr
    if (skip.empty()) {
      h.checkNoAsyncError("end of test");
      h.checkCounters("end of test");
    }
    const ncclResult_t destroyed = ncclCommDestroy(s.comm);
    if (destroyed != ncclSuccess) failures.add("rank %d: ncclCommDestroy returned %d", ctx.rank, destroyed);
  }
  cudaStreamDestroy(s.stream);
  report->checks = failures.checks();
  report->failures = failures.count();
  report->state = skip.empty() ? 1 : 2;
  if (!skip.empty()) snprintf(report->text, sizeof(report->text), "%s", skip.c_str());
  return failures.count() ? 1 : 0;
}
}  // namespace

std::string runForked(const ForkOptions& options, const RankScenario& scenario) {
  const int gpus = countCudaDevicesWithoutInit();
  const bool shared = sharedGpuMode();
  const int n = forkedRankCount(options.nRanks, gpus, shared);
  const std::string skip = forkedRankSkipReason(n, gpus, shared);
  if (!skip.empty()) return skip;
  if (tunerActivation()) {  // a misconfigured run of the tuner build fails: it would test nothing
    const std::string problem = tunerActivationEnvProblem();
    if (!problem.empty()) {
      ADD_FAILURE() << problem;
      return "";
    }
  }
  RankLaunch launch = launchRanks(
      n, sizeof(SharedReport), options.timeoutSeconds, [](ncclUniqueId* id) { return ncclGetUniqueId(id); },
      [&](RankContext& ctx) { return forkedRank(options, scenario, ctx, gpus, shared); });
  if (launch.exits.size() != static_cast<size_t>(n)) {
    ADD_FAILURE() << "launchRanks could not start the ranks";
    return "";
  }
  auto report = [&](int r) { return static_cast<const SharedReport*>(launch.resultsOf(r)); };
  int skipped = 0;
  for (int r = 0; r < n; ++r) skipped += report(r)->state == 2 ? 1 : 0;
  if (skipped == n && launch.allSucceeded()) return report(0)->text;
  for (int r = 0; r < n; ++r) {
    const SharedReport* rep = report(r);
    const RankExit& e = launch.exits[r];
    EXPECT_TRUE(e.exitCode == 0 && !e.timedOut && rep->state == 1 && rep->failures == 0 && rep->checks > 0)
        << "rank " << r << ": exit code " << e.exitCode << (e.timedOut ? " (timed out and killed)" : "")
        << ", state " << rep->state << " (1 = finished), " << rep->failures << " failures, " << rep->checks
        << " checks\n" << rep->text;
  }
  const SharedReport* first = report(0);
  for (int r = 1; r < n; ++r) {
    const SharedReport* rep = report(r);
    EXPECT_TRUE(rep->hashOverflow == 0 && first->hashOverflow == 0) << "more results than SharedReport holds";
    EXPECT_EQ(rep->nHashes, first->nHashes) << "rank " << r << " compared a different number of calls";
    int shown = 0;
    for (uint32_t i = 0; i < std::min(rep->nHashes, first->nHashes); ++i) {
      if (rep->hashes[i].hash == first->hashes[i].hash && strcmp(rep->hashes[i].label, first->hashes[i].label) == 0) continue;
      if (shown++ < 5) {
        ADD_FAILURE() << "not bit-identical across ranks: call " << i << " rank 0 \"" << first->hashes[i].label
                      << "\" FNV " << std::hex << first->hashes[i].hash << ", rank " << std::dec << r << " \""
                      << rep->hashes[i].label << "\" FNV " << std::hex << rep->hashes[i].hash;
      }
    }
  }
  return "";
}

// ---------------------------------------------------------------- process helpers

Watchdog::Watchdog(double seconds, std::string what, const Failures* failures) {
  thread_.reset(new std::thread([this, seconds, what, failures] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
    fprintf(stderr, "watchdog: %s still running after %.0f s (a rank is probably stuck); failures so far:\n%s\n",
            what.c_str(), seconds, failures ? failures->text().c_str() : "");
    fflush(stderr);
    _exit(3);
  }));
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_->join();
}

int inProcessGpuCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}


std::string runInOneProcess(double timeoutSeconds, const std::function<std::string(Failures&)>& body) {
  const int gpus = countCudaDevicesWithoutInit();
  if (gpus < 2) return format("needs 2 GPUs, this machine has %d", gpus);
  RankLaunch launch = launchRanks(
      1, sizeof(SharedReport), timeoutSeconds, [](ncclUniqueId* id) { return ncclGetUniqueId(id); },
      [&](RankContext& ctx) {
        auto* report = static_cast<SharedReport*>(ctx.myResults());
        Failures failures;
        failures.mirrorTo(report->text, sizeof(report->text));
        const std::string skip = body(failures);
        report->checks = failures.checks();
        report->failures = failures.count();
        report->state = skip.empty() ? 1 : 2;
        if (!skip.empty()) snprintf(report->text, sizeof(report->text), "%s", skip.c_str());
        return failures.count() ? 1 : 0;
      });
  if (launch.exits.size() != 1) {
    ADD_FAILURE() << "launchRanks could not start the process";
    return "";
  }
  const auto* rep = static_cast<const SharedReport*>(launch.resultsOf(0));
  if (rep->state == 2 && launch.allSucceeded()) return rep->text;
  const RankExit& e = launch.exits[0];
  EXPECT_TRUE(e.exitCode == 0 && !e.timedOut && rep->state == 1 && rep->failures == 0 && rep->checks > 0)
      << "exit code " << e.exitCode << (e.timedOut ? " (timed out and killed)" : "") << ", state " << rep->state
      << ", " << rep->failures << " failures, " << rep->checks << " checks\n" << rep->text;
  return "";
}


}  // namespace gputest
}  // namespace nccl_lamport
