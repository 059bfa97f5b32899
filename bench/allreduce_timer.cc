#include "bench/allreduce_timer.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace nccl_lamport::bench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double elapsedUs(const Event& start, const Event& stop) {
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return static_cast<double>(ms) * 1e3;
}

/** Eager timing of one path: warm-up, then one repetition at a time. */
class EagerRunner {
 public:
  explicit EagerRunner(const AllReduceCall& call) : call_(call) {}

  void warmup(int calls, RankSync& sync) {
    sync.setPhase(std::string("eager warm-up (") + call_.label + ")");
    for (int i = 0; i < calls; ++i) call_.enqueue();
    sync.waitStream(call_.stream);
  }

  /** One repetition; the caller has just passed the barrier. */
  void rep(int iters, RankSync& sync) {
    sync.setPhase(std::string("eager timing (") + call_.label + ")");
    BENCH_CUDA(cudaEventRecord(start_.get(), call_.stream));
    const auto hostStart = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call_.enqueue();
    const auto hostStop = std::chrono::steady_clock::now();
    BENCH_CUDA(cudaEventRecord(stop_.get(), call_.stream));
    sync.waitStream(call_.stream);
    deviceUs_.push_back(elapsedUs(start_, stop_) / iters);
    hostUs_.push_back(std::chrono::duration<double, std::micro>(hostStop - hostStart).count() / iters);
  }

  [[nodiscard]] double deviceMedian() const { return median(deviceUs_); }
  [[nodiscard]] double hostMedian() const { return median(hostUs_); }

 private:
  const AllReduceCall& call_;
  Event start_;
  Event stop_;
  std::vector<double> deviceUs_;
  std::vector<double> hostUs_;
};

/** Graph timing of one path: capture, instantiate, warm-up, one repetition at a time. */
class GraphRunner {
 public:
  explicit GraphRunner(const AllReduceCall& call) : call_(call) {}

  void capture(int calls, RankSync& sync) {
    sync.setPhase(std::string("graph capture (") + call_.label + ")");
    BENCH_CUDA(cudaStreamBeginCapture(call_.stream, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      for (int i = 0; i < calls; ++i) call_.enqueue();
    } catch (...) {
      (void)cudaStreamEndCapture(call_.stream, &graph);  // leave the stream usable
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      throw;
    }
    BENCH_CUDA(cudaStreamEndCapture(call_.stream, &graph));
    try {
      exec_.instantiate(graph);
    } catch (...) {
      (void)cudaGraphDestroy(graph);
      throw;
    }
    (void)cudaGraphDestroy(graph);
    calls_ = calls;
  }

  void warmup(int warmupCalls, RankSync& sync) {
    sync.setPhase(std::string("graph warm-up (") + call_.label + ")");
    const int launches = std::max(1, (warmupCalls + calls_ - 1) / calls_);
    for (int i = 0; i < launches; ++i) BENCH_CUDA(cudaGraphLaunch(exec_.get(), call_.stream));
    sync.waitStream(call_.stream);
  }

  /** One repetition; the caller has just passed the barrier. */
  void rep(int replays, RankSync& sync) {
    sync.setPhase(std::string("graph timing (") + call_.label + ")");
    BENCH_CUDA(cudaEventRecord(start_.get(), call_.stream));
    for (int i = 0; i < replays; ++i) BENCH_CUDA(cudaGraphLaunch(exec_.get(), call_.stream));
    BENCH_CUDA(cudaEventRecord(stop_.get(), call_.stream));
    sync.waitStream(call_.stream);
    deviceUs_.push_back(elapsedUs(start_, stop_) / (static_cast<double>(replays) * calls_));
  }

  [[nodiscard]] double deviceMedian() const { return median(deviceUs_); }

 private:
  const AllReduceCall& call_;
  GraphExec exec_;
  int calls_ = 1;
  Event start_;
  Event stop_;
  std::vector<double> deviceUs_;
};

}  // namespace

void AllReduceCall::enqueue() const {
  const ncclResult_t res = fn(send, recv, count, dtype, op, comm, stream);
  if (res != ncclSuccess) {
    throw BenchError(std::string(label) + " allreduce of " + std::to_string(count) +
                     " elements returned " + ncclGetErrorString(res));
  }
}

namespace {

// Timing order within a repetition: stock, symmetric, then the plugin last, so that recv holds
// the plugin's output afterwards (rank_body.cc's repeat check reads it).
constexpr int kOrder[kPathCount] = {kStock, kSymmetric, kPlugin};

bool present(const AllReduceCall& call) { return call.fn != nullptr; }

PairTiming notRun() {
  PairTiming t{};
  for (int p = 0; p < kPathCount; ++p) t.deviceUs[p] = t.hostUs[p] = kNaN;
  return t;
}

}  // namespace

PairTiming timeEager(const AllReduceCall (&calls)[kPathCount], const TimingSettings& settings,
                     RankSync& sync) {
  std::unique_ptr<EagerRunner> runners[kPathCount];
  for (int p : kOrder) {
    if (!present(calls[p])) continue;
    runners[p] = std::make_unique<EagerRunner>(calls[p]);
    runners[p]->warmup(settings.warmup, sync);
  }
  for (int r = 0; r < settings.reps; ++r) {
    for (int p : kOrder) {
      if (runners[p] == nullptr) continue;
      sync.barrier();
      runners[p]->rep(settings.iters, sync);
    }
  }
  PairTiming t = notRun();
  for (int p = 0; p < kPathCount; ++p) {
    if (runners[p] == nullptr) continue;
    t.deviceUs[p] = runners[p]->deviceMedian();
    t.hostUs[p] = runners[p]->hostMedian();
  }
  return t;
}

PairTiming timeGraph(const AllReduceCall (&calls)[kPathCount], const TimingSettings& settings,
                     RankSync& sync) {
  // Eager calls first, so that any lazy set-up of NCCL or the plugin for this size happens
  // outside the capture, as in an application that runs a step eagerly before capturing it.
  for (int p : kOrder) {
    if (present(calls[p])) EagerRunner(calls[p]).warmup(std::max(1, settings.warmup), sync);
  }
  std::unique_ptr<GraphRunner> runners[kPathCount];
  for (int p : kOrder) {
    if (!present(calls[p])) continue;
    runners[p] = std::make_unique<GraphRunner>(calls[p]);
    runners[p]->capture(settings.graphCalls, sync);
  }
  for (int p : kOrder) {
    if (runners[p] != nullptr) runners[p]->warmup(settings.warmup, sync);
  }
  for (int r = 0; r < settings.reps; ++r) {
    for (int p : kOrder) {
      if (runners[p] == nullptr) continue;
      sync.barrier();
      runners[p]->rep(settings.graphReplays, sync);
    }
  }
  PairTiming t = notRun();
  for (int p = 0; p < kPathCount; ++p) {
    if (runners[p] != nullptr) t.deviceUs[p] = runners[p]->deviceMedian();
  }
  return t;
}

}  // namespace nccl_lamport::bench
