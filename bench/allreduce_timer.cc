#include "bench/allreduce_timer.h"

#include <algorithm>
#include <chrono>
#include <limits>
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

PairTiming timeEager(const AllReduceCall (&calls)[kPathCount], const TimingSettings& settings,
                     RankSync& sync) {
  EagerRunner stock(calls[kStock]);
  EagerRunner plugin(calls[kPlugin]);
  stock.warmup(settings.warmup, sync);
  plugin.warmup(settings.warmup, sync);
  for (int r = 0; r < settings.reps; ++r) {
    sync.barrier();
    stock.rep(settings.iters, sync);
    sync.barrier();
    plugin.rep(settings.iters, sync);  // plugin last: recv then holds the plugin's output
  }
  PairTiming t{};
  t.deviceUs[kStock] = stock.deviceMedian();
  t.deviceUs[kPlugin] = plugin.deviceMedian();
  t.hostUs[kStock] = stock.hostMedian();
  t.hostUs[kPlugin] = plugin.hostMedian();
  return t;
}

PairTiming timeGraph(const AllReduceCall (&calls)[kPathCount], const TimingSettings& settings,
                     RankSync& sync) {
  // Eager calls first, so that any lazy set-up of NCCL or the plugin for this size happens
  // outside the capture, as in an application that runs a step eagerly before capturing it.
  EagerRunner(calls[kStock]).warmup(std::max(1, settings.warmup), sync);
  EagerRunner(calls[kPlugin]).warmup(std::max(1, settings.warmup), sync);
  GraphRunner stock(calls[kStock]);
  GraphRunner plugin(calls[kPlugin]);
  stock.capture(settings.graphCalls, sync);
  plugin.capture(settings.graphCalls, sync);
  stock.warmup(settings.warmup, sync);
  plugin.warmup(settings.warmup, sync);
  for (int r = 0; r < settings.reps; ++r) {
    sync.barrier();
    stock.rep(settings.graphReplays, sync);
    sync.barrier();
    plugin.rep(settings.graphReplays, sync);  // plugin last, as in timeEager
  }
  PairTiming t{};
  t.deviceUs[kStock] = stock.deviceMedian();
  t.deviceUs[kPlugin] = plugin.deviceMedian();
  t.hostUs[kStock] = kNaN;
  t.hostUs[kPlugin] = kNaN;
  return t;
}

}  // namespace nccl_lamport::bench
