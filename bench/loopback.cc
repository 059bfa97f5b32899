// nccl-lamport-bench --loopback N (bench/loopback.h): one process, N streams on one GPU, the real
// workspaces (cudaMalloc + launchLamportWorkspaceInit: the layout the plugin maps) and the real
// launch function. No NCCL: NCCL refuses two ranks on one GPU.
#include "bench/loopback.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/correctness.h"
#include "bench/cuda_util.h"
#include "bench/loopback_report.h"
#include "bench/stats.h"
#include "kernels/lamport_allreduce.h"

namespace nccl_lamport::bench {
namespace {

constexpr size_t kGuardBytes = 64;  // poisoned bytes after every output, checked untouched
constexpr uint64_t kKernelTimeoutNs = 10ull * 1000 * 1000 * 1000;  // a hang fails, not stalls

LamportDataType toLamport(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return LamportDataType::kFloat32;
    case DType::kFp16: return LamportDataType::kFloat16;
    case DType::kBf16: break;
  }
  return LamportDataType::kBFloat16;
}

/** N simulated ranks on the current device. */
class LoopbackWorld {
 public:
  LoopbackWorld(int nRanks, size_t maxBytes) : nRanks_(nRanks) {
    layout_ = loopbackLayout(nRanks, maxBytes);
    ioBytes_ = layout_.slotBytes + kGuardBytes;
    ranks_.resize(nRanks);
    try {
      allocate();
    } catch (...) {
      release();  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  ~LoopbackWorld() { release(); }
  LoopbackWorld(const LoopbackWorld&) = delete;
  LoopbackWorld& operator=(const LoopbackWorld&) = delete;

 private:
  void allocate() {
    // Modules loaded and grid limits cached before anything is captured (as the plugin does).
    BENCH_CUDA(lamportPrepareKernels(nRanks_));
    BENCH_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&flagsHost_), 2 * nRanks_ * sizeof(uint32_t),
                             cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(flagsHost_, 0, 2 * nRanks_ * sizeof(uint32_t));
    BENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flagsDev_), flagsHost_, 0));
    for (Rank& r : ranks_) {
      BENCH_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
      BENCH_CUDA(cudaMalloc(&r.workspace, layout_.totalBytes()));
      BENCH_CUDA(cudaMalloc(&r.send, ioBytes_));
      BENCH_CUDA(cudaMalloc(&r.recv, ioBytes_));
      BENCH_CUDA(launchLamportWorkspaceInit(r.workspace, layout_, r.stream));
      BENCH_CUDA(cudaEventCreate(&r.start));
      BENCH_CUDA(cudaEventCreate(&r.end));
    }
    syncAll();
  }

  /** Frees what allocate() got, on every path. Kernels still queued (an error left a rank
   *  waiting on its peers) are aborted through the abort flags, and every stream is drained
   *  before any workspace is freed: a peer's kernel may still store into it. */
  void release() {
    if (flagsHost_ != nullptr) {
      for (int r = 0; r < nRanks_; ++r) reinterpret_cast<volatile uint32_t*>(flagsHost_)[nRanks_ + r] = 1;
    }
    for (Rank& r : ranks_) {
      if (r.stream != nullptr) (void)cudaStreamSynchronize(r.stream);
    }
    for (Rank& r : ranks_) {
      for (cudaGraphExec_t e : r.graphs) (void)cudaGraphExecDestroy(e);
      (void)cudaEventDestroy(r.start);
      (void)cudaEventDestroy(r.end);
      (void)cudaFree(r.workspace);
      (void)cudaFree(r.send);
      (void)cudaFree(r.recv);
      if (r.stream != nullptr) (void)cudaStreamDestroy(r.stream);
    }
    if (flagsHost_ != nullptr) (void)cudaFreeHost(flagsHost_);
    ranks_.clear();
    flagsHost_ = nullptr;
  }

 public:
  /** The launch args of rank r for one call of variant v. */
  LamportAllReduceArgs args(int r, const LoopbackVariant& v, size_t count, DType dtype, ReduceOp op) const {
    LamportAllReduceArgs a{};
    a.sendbuff = ranks_[r].send;
    a.recvbuff = ranks_[r].recv;
    a.count = count;
    a.datatype = toLamport(dtype);
    a.op = op == ReduceOp::kAvg ? LamportReduceOp::kAvg : LamportReduceOp::kSum;
    a.rank = r;
    a.layout = layout_;
    for (int p = 0; p < nRanks_; ++p) a.peerBases[p] = ranks_[p].workspace;
    a.abortFlag = flagsDev_ + nRanks_ + r;
    a.errorFlag = flagsDev_ + r;
    a.timeoutNs = kKernelTimeoutNs;
    a.variant = v.baseline  ? LamportKernelVariant::kBaseline
                : v.twoShot ? LamportKernelVariant::kTwoShot
                            : LamportKernelVariant::kFast;
    a.residencyShare = v.residencyShare;
    a.triggerAfterWait = v.triggerAfterWait;
    a.blockThreads = v.baseline ? 0 : v.blockThreads;
    a.disablePdl = v.pdl ? 0 : 1;
    a.vectorsPerThread = v.vectorsPerThread;
    a.fastPass = v.fastPass;
    a.minBlocksPerSm = v.minBlocksPerSm;
    a.remoteSyncDomain = v.remoteSyncDomain ? 1 : 0;
    // All N ranks' grids (and, with PDL, each stream's early-launched next grid) must be resident
    // at once, or a rank waits on a peer's block that cannot get an SM. kFast and the two-shot
    // take a share of the device per launch, counted for the kernel the launcher picks (the
    // single-pass one holds more blocks); the baseline a block count.
    if (v.baseline) {
      a.maxBlocks = std::max(1, lamportAllReduceResidentBlocks(a) / nRanks_);
    } else {
      const int grids = v.pdl ? 2 * nRanks_ : nRanks_;
      a.residencyShare = std::max(v.residencyShare > 0 ? v.residencyShare : kLamportResidencyShare, grids);
    }
    return a;
  }

  void launchAll(const LoopbackVariant& v, size_t count, DType dtype, ReduceOp op) {
    for (int r = 0; r < nRanks_; ++r) {
      BENCH_CUDA(launchLamportAllReduce(args(r, v, count, dtype, op), ranks_[r].stream));
    }
  }

  void syncAll() {
    for (Rank& r : ranks_) BENCH_CUDA(cudaStreamSynchronize(r.stream));
  }

  /** "timed out" / "aborted" if a kernel gave up since the last call, else "". Clears the flags. */
  std::string takeKernelError() {
    std::string why;
    for (int r = 0; r < nRanks_; ++r) {
      const uint32_t e = reinterpret_cast<volatile uint32_t*>(flagsHost_)[r];
      if (e != 0 && why.empty()) why = e == kLamportTimedOut ? "timed out" : "aborted";
      flagsHost_[r] = 0;
    }
    return why;
  }

  /**
   * One checked call of variant v: fresh inputs from runSeed, outputs poisoned, fp64 reference,
   * bit identity across ranks, guard bytes untouched. Returns "OK" or what went wrong.
   */
  std::string check(const LoopbackVariant& v, const SizeSpec& size, DType dtype, ReduceOp op, uint64_t runSeed) {
    std::vector<uint8_t> host(size.bytes);
    for (int r = 0; r < nRanks_; ++r) {
      fillInput(host.data(), size.count, dtype, inputSeed(runSeed, r, size.bytes));
      BENCH_CUDA(cudaMemcpyAsync(ranks_[r].send, host.data(), size.bytes, cudaMemcpyHostToDevice, ranks_[r].stream));
      BENCH_CUDA(cudaMemsetAsync(ranks_[r].recv, 0xff, size.bytes + kGuardBytes, ranks_[r].stream));
    }
    syncAll();
    launchAll(v, size.count, dtype, op);
    syncAll();
    const std::string error = takeKernelError();
    if (!error.empty()) return error;
    InputModel model;
    model.runSeed = runSeed;
    model.bytes = size.bytes;
    model.nRanks = nRanks_;
    model.dtype = dtype;
    model.op = op;
    std::vector<uint8_t> first(size.bytes + kGuardBytes);
    std::vector<uint8_t> out(size.bytes + kGuardBytes);
    for (int r = 0; r < nRanks_; ++r) {
      std::vector<uint8_t>& dst = r == 0 ? first : out;
      BENCH_CUDA(cudaMemcpy(dst.data(), ranks_[r].recv, dst.size(), cudaMemcpyDeviceToHost));
      for (size_t i = size.bytes; i < dst.size(); ++i) {
        if (dst[i] != 0xff) return "wrote past the output (rank " + std::to_string(r) + ")";
      }
      if (r == 0) {
        const CheckSummary s = checkOutputs(model, size.count, first.data(), first.data());
        if (s.wrongLamport > 0) return std::to_string(s.wrongLamport) + " wrong";
      } else if (std::memcmp(first.data(), out.data(), size.bytes) != 0) {
        return "bit-diff across ranks";
      }
    }
    return "OK";
  }

  /** Eager: iters back-to-back calls on every rank per rep; us per call, MAX over ranks, median. */
  double timeEager(const LoopbackVariant& v, const SizeSpec& size, const BenchOptions& o) {
    for (int i = 0; i < o.warmup; ++i) launchAll(v, size.count, o.dtype, o.op);
    syncAll();
    std::vector<double> reps;
    for (int rep = 0; rep < o.reps; ++rep) {
      for (Rank& r : ranks_) BENCH_CUDA(cudaEventRecord(r.start, r.stream));
      for (int i = 0; i < o.iters; ++i) launchAll(v, size.count, o.dtype, o.op);
      for (Rank& r : ranks_) BENCH_CUDA(cudaEventRecord(r.end, r.stream));
      reps.push_back(maxElapsedUs() / o.iters);
    }
    return median(reps);
  }

  /** Graph: graphCalls calls captured per rank, replayed graphReplays times per rep. */
  double timeGraph(const LoopbackVariant& v, const SizeSpec& size, const BenchOptions& o) {
    // One uncaptured call first: lamportPrepareKernels loads only the kernels the plugin uses, so an
    // A/B shape's module (and its grid limit) would otherwise be loaded inside the capture, which
    // the plugin never allows (with --no-check nothing else has launched it yet).
    launchAll(v, size.count, o.dtype, o.op);
    syncAll();
    for (int r = 0; r < nRanks_; ++r) {
      Rank& k = ranks_[r];
      const LamportAllReduceArgs a = args(r, v, size.count, o.dtype, o.op);
      BENCH_CUDA(cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < o.graphCalls; ++i) {
        const cudaError_t err = launchLamportAllReduce(a, k.stream);
        if (err != cudaSuccess) {
          cudaGraph_t broken = nullptr;
          (void)cudaStreamEndCapture(k.stream, &broken);
          if (broken != nullptr) (void)cudaGraphDestroy(broken);
          checkCuda(err, "launchLamportAllReduce (capture)");
        }
      }
      cudaGraph_t graph = nullptr;
      BENCH_CUDA(cudaStreamEndCapture(k.stream, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
      (void)cudaGraphDestroy(graph);
      checkCuda(err, "cudaGraphInstantiate");
      k.graphs.push_back(exec);
    }
    // At least --warmup calls (rounded up to whole graphs, as bench/allreduce_timer.cc does).
    const int warmReplays = std::max(1, (o.warmup + o.graphCalls - 1) / std::max(1, o.graphCalls));
    for (int i = 0; i < warmReplays; ++i) launchGraphs();
    syncAll();
    std::vector<double> reps;
    for (int rep = 0; rep < o.reps; ++rep) {
      for (Rank& r : ranks_) BENCH_CUDA(cudaEventRecord(r.start, r.stream));
      for (int i = 0; i < o.graphReplays; ++i) launchGraphs();
      for (Rank& r : ranks_) BENCH_CUDA(cudaEventRecord(r.end, r.stream));
      reps.push_back(maxElapsedUs() / (static_cast<double>(o.graphCalls) * o.graphReplays));
    }
    for (Rank& r : ranks_) {
      BENCH_CUDA(cudaGraphExecDestroy(r.graphs.back()));
      r.graphs.pop_back();
    }
    return median(reps);
  }

 private:
  struct Rank {
    cudaStream_t stream = nullptr;
    char* workspace = nullptr;
    char* send = nullptr;
    char* recv = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
    std::vector<cudaGraphExec_t> graphs;
  };

  void launchGraphs() {
    for (Rank& r : ranks_) BENCH_CUDA(cudaGraphLaunch(r.graphs.back(), r.stream));
  }

  double maxElapsedUs() {
    double worst = 0;
    for (Rank& r : ranks_) {
      BENCH_CUDA(cudaEventSynchronize(r.end));
      float ms = 0;
      BENCH_CUDA(cudaEventElapsedTime(&ms, r.start, r.end));
      worst = std::max(worst, static_cast<double>(ms) * 1000.0);
    }
    return worst;
  }

  int nRanks_;
  LamportLayout layout_{};
  size_t ioBytes_ = 0;
  std::vector<Rank> ranks_;
  uint32_t* flagsHost_ = nullptr;  // [0, n): error flags; [n, 2n): abort flags (never set)
  uint32_t* flagsDev_ = nullptr;
};

}  // namespace

int runLoopback(const BenchOptions& options, int nRanks, const std::vector<std::string>& argv, uint64_t seed,
                const std::string& driverRelease, const std::string& timestampUtc, const std::string& hostname) {
  if (nRanks < 2 || nRanks > 8) {
    std::fprintf(stderr, "nccl-lamport-bench: --loopback takes 2 to 8 ranks, not %d\n", nRanks);
    return 2;
  }
  std::string sizeError;
  const std::vector<SizeSpec> sizes =
      makeSizeList(options.minBytes, options.maxBytes, options.stepFactor, elementSize(options.dtype), &sizeError);
  if (sizes.empty()) {
    std::fprintf(stderr, "nccl-lamport-bench: %s\n", sizeError.c_str());
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "nccl-lamport-bench: --loopback needs a CUDA GPU; none found\n");
    return 2;
  }
  LoopbackInfo info;
  info.nRanks = nRanks;
  info.argv = argv;
  info.seed = seed;
  info.options = options;
  info.driverRelease = driverRelease;
  info.timestampUtc = timestampUtc;
  info.hostname = hostname;
  const std::vector<LoopbackVariant> variants = loopbackVariants(nRanks, options.dtype);
  std::vector<LoopbackRow> rows;
  bool ok = true;
  try {
    BENCH_CUDA(cudaSetDevice(0));
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    info.gpuName = prop.name;
    info.smCount = prop.multiProcessorCount;
    (void)cudaRuntimeGetVersion(&info.cudaRuntimeVersion);
    (void)cudaDriverGetVersion(&info.cudaDriverVersion);
    std::fputs(formatLoopbackHeader(info, variants).c_str(), stdout);
    std::fflush(stdout);
    LoopbackWorld world(nRanks, sizes.back().bytes);
    uint64_t round = 0;
    for (const SizeSpec& size : sizes) {
      LoopbackRow row;
      row.bytes = size.bytes;
      row.count = size.count;
      row.graphUs.assign(variants.size(), LoopbackRow::kNaN);
      row.eagerUs.assign(variants.size(), LoopbackRow::kNaN);
      row.check.assign(variants.size(), "-");
      for (size_t v = 0; v < variants.size(); ++v) {
        if (options.check) {
          row.check[v] = world.check(variants[v], size, options.dtype, options.op, seed + 0x9E3779B97F4A7C15ull * ++round);
          if (row.check[v] != "OK") row.ok = false;
          // A kernel that gave up leaves the ranks' rotation states apart: nothing after is valid.
          if (row.check[v] == "timed out" || row.check[v] == "aborted") throw BenchError(variants[v].name + ": a kernel gave up at " + std::to_string(size.bytes) + " bytes");
        }
        if (options.eager()) row.eagerUs[v] = world.timeEager(variants[v], size, options);
        if (options.graph()) row.graphUs[v] = world.timeGraph(variants[v], size, options);
        const std::string error = world.takeKernelError();
        if (!error.empty()) throw BenchError(variants[v].name + ": a kernel " + error + " while timing " + std::to_string(size.bytes) + " bytes");
        // The check above follows another variant's calls; this one follows the variant's own
        // timed calls (its own clearing and rotation over all three buffers, graph replays).
        if (options.check && row.check[v] == "OK") {
          const std::string again = world.check(variants[v], size, options.dtype, options.op, seed + 0x9E3779B97F4A7C15ull * ++round);
          if (again == "timed out" || again == "aborted") throw BenchError(variants[v].name + ": a kernel gave up after timing " + std::to_string(size.bytes) + " bytes");
          if (again != "OK") {
            row.check[v] = "after timing: " + again;
            row.ok = false;
          }
        }
      }
      ok = ok && row.ok;
      rows.push_back(row);
      if (options.verbose) std::fprintf(stderr, "loopback: %zu bytes done\n", size.bytes);
    }
  } catch (const BenchError& e) {
    std::fprintf(stderr, "nccl-lamport-bench: loopback: %s\n", e.what());
    ok = false;
  }
  std::fputs(formatLoopbackTable(variants, rows, options).c_str(), stdout);
  const bool written = writeLoopbackFiles(options, info, variants, rows);  // a failure is on stderr
  if (!ok || rows.size() != sizes.size()) {
    std::fprintf(stderr, "nccl-lamport-bench: loopback FAILED (see the check column and the lines above)\n");
    return 1;
  }
  return written ? 0 : 1;  // --help: 1 when a --csv/--json file could not be written
}

}  // namespace nccl_lamport::bench
