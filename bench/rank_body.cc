#include "bench/rank_body.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bench/allreduce_timer.h"
#include "bench/correctness.h"
#include "bench/cuda_util.h"
#include "bench/progress.h"
#include "bench/rank_results.h"
#include "bench/rank_sync.h"
#include "bench/symmetric_windows.h"
#include "nccl_lamport.h"

namespace nccl_lamport::bench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void copyString(char* dst, size_t capacity, const std::string& src) {
  const size_t n = std::min(src.size(), capacity - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

/** A rank's CUDA and NCCL objects. Deleted on success only (see the caveat in cuda_util.h). */
struct RankResources {
  explicit RankResources(size_t maxBytes)
      : send(maxBytes), recv(maxBytes), barrier(sizeof(float)), hostIn(maxBytes),
        hostNccl(maxBytes), hostLamport(maxBytes) {}
  ncclComm_t comm = nullptr;
  Stream stream;
  DeviceBuffer send;
  DeviceBuffer recv;
  DeviceBuffer barrier;
  std::vector<unsigned char> hostIn;
  std::vector<unsigned char> hostNccl;
  std::vector<unsigned char> hostLamport;
  SymmetricWindows symmetric;  // NCCL's symmetric kernels' buffers; open only if symmetricOk
  bool symmetricOk = false;
};

class RankRunner {
 public:
  RankRunner(RankContext& ctx, const RankPlan& plan, RankSync& sync)
      : ctx_(ctx), plan_(plan), opt_(plan.options), sync_(sync), header_(sync.mySlot().header),
        progress_(ctx.rank == 0 && progressWanted(plan.options.quiet, STDERR_FILENO)) {}

  /** Device, identity, versions; before the communicator exists. */
  void describeDevice() {
    sync_.setPhase("cudaSetDevice");
    header_.device = ctx_.rank;
    BENCH_CUDA(cudaSetDevice(ctx_.rank));
    BENCH_CUDA(cudaFree(nullptr));  // create the context now, in parallel on all ranks
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, ctx_.rank));
    copyString(header_.gpuName, sizeof(header_.gpuName), prop.name);
    header_.smMajor = prop.major;
    header_.smMinor = prop.minor;
    char busId[sizeof(header_.busId)] = {};
    if (cudaDeviceGetPCIBusId(busId, sizeof(busId), ctx_.rank) == cudaSuccess) {
      copyString(header_.busId, sizeof(header_.busId), busId);
    }
    int version = 0;
    if (cudaDriverGetVersion(&version) == cudaSuccess) header_.cudaDriverVersion = version;
    if (cudaRuntimeGetVersion(&version) == cudaSuccess) header_.cudaRuntimeVersion = version;
    if (ncclGetVersion(&version) == ncclSuccess) header_.ncclVersion = version;
    header_.pluginActive = ncclLamportIsActive();
  }

  /** ncclCommInitRank through the interposed wrapper, so nccl-lamport sets up its workspace. */
  void initComm(RankResources& res) {
    sync_.setPhase("waiting for rank 0's ncclUniqueId");
    const ncclUniqueId id = ctx_.uniqueId();
    sync_.setPhase("ncclCommInitRank");
    BENCH_NCCL(ncclCommInitRank(&res.comm, ctx_.nRanks, id, ctx_.rank));
    sync_.attach(res.comm, res.stream.get(), static_cast<float*>(res.barrier.get()));
    ncclLamportCommInfo_t info{};
    if (ncclLamportGetCommInfo(res.comm, &info) == ncclSuccess) {
      header_.commInfo = info;
      header_.commInfoValid = 1;
    }
    BENCH_CUDA(cudaMemsetAsync(res.barrier.get(), 0, sizeof(float), res.stream.get()));
    sync_.barrier();
    if (opt_.symmetric) {
      // Collective, on every rank alike (same NCCL everywhere, so the same answer everywhere).
      sync_.setPhase("symmetric windows (ncclCommWindowRegister)");
      std::string why;
      res.symmetricOk = res.symmetric.open(res.comm, res.send.bytes(), &why);
      copyString(header_.symmetricWhy, sizeof(header_.symmetricWhy), why);
    } else {
      copyString(header_.symmetricWhy, sizeof(header_.symmetricWhy), "--no-symmetric");
    }
    header_.symmetricAvailable = res.symmetricOk ? 1 : 0;
  }

  /** Correctness (if on) and timings of sizes[index]. */
  void measure(RankResources& res, int index) {
    const SizeSpec& size = plan_.sizes[index];
    SizeSample& sample = sync_.mySlot().sizes[index];
    std::memset(&sample, 0, sizeof(sample));
    sample.bytes = size.bytes;
    sample.count = size.count;
    for (int p = 0; p < kPathCount; ++p) {
      sample.eagerUs[p] = kNaN;
      sample.graphUs[p] = kNaN;
      sample.hostUs[p] = kNaN;
    }
    sync_.setContext("size " + std::to_string(size.bytes) + " B");
    auto progress = [&](const char* phase) {
      if (progress_) showProgress(formatProgress(index, static_cast<int>(plan_.sizes.size()), size.bytes, phase));
    };

    const ncclDataType_t dtype = toNccl(opt_.dtype);
    const ncclRedOp_t op = toNccl(opt_.op);
    ncclLamportPath_t path = ncclLamportPathNccl;
    BENCH_NCCL(ncclLamportGetAllReducePath(res.comm, size.count, dtype, op, &path));
    sample.path = path;

    AllReduceCall calls[kPathCount];
    for (int p = 0; p < kPathCount; ++p) {
      calls[p].fn = p == kPlugin ? &ncclAllReduce : &pncclAllReduce;
      calls[p].label = p == kStock ? "nccl" : p == kPlugin ? "lamport" : "nccl-symmetric";
      calls[p].send = p == kSymmetric ? res.symmetric.send() : res.send.get();
      calls[p].recv = p == kSymmetric ? res.symmetric.recv() : res.recv.get();
      calls[p].count = size.count;
      calls[p].dtype = dtype;
      calls[p].op = op;
      calls[p].comm = res.comm;
      calls[p].stream = res.stream.get();
    }
    if (!res.symmetricOk) calls[kSymmetric].fn = nullptr;  // not timed: "n/a"

    sync_.setPhase("input upload");
    fillInput(res.hostIn.data(), size.count, opt_.dtype, inputSeed(plan_.seed, ctx_.rank, size.bytes));
    BENCH_CUDA(cudaMemcpyAsync(res.send.get(), res.hostIn.data(), size.bytes,
                               cudaMemcpyHostToDevice, res.stream.get()));
    if (res.symmetricOk) {
      BENCH_CUDA(cudaMemcpyAsync(res.symmetric.send(), res.send.get(), size.bytes, cudaMemcpyDeviceToDevice,
                                 res.stream.get()));
    }
    sync_.waitStream(res.stream.get());
    progress("check");
    if (opt_.check) check(res, calls, size, sample);

    TimingSettings settings;
    settings.warmup = opt_.warmup;
    settings.iters = opt_.iters;
    settings.reps = opt_.reps;
    settings.graphCalls = opt_.graphCalls;
    settings.graphReplays = opt_.graphReplays;
    if (opt_.eager()) {
      progress("eager");
      const PairTiming t = timeEager(calls, settings, sync_);
      for (int p = 0; p < kPathCount; ++p) {
        sample.eagerUs[p] = t.deviceUs[p];
        sample.hostUs[p] = t.hostUs[p];
      }
    }
    if (opt_.graph()) {
      progress("graph");
      const PairTiming t = timeGraph(calls, settings, sync_);
      for (int p = 0; p < kPathCount; ++p) sample.graphUs[p] = t.deviceUs[p];
    }
    // The timed calls ran on the same input; the plugin went last, and its rank-ordered fp32
    // accumulation is deterministic, so its output must be the checked one, bit for bit.
    if (sample.checked != 0 && path != ncclLamportPathNccl) {
      sync_.setPhase("repeat check");
      download(res, res.hostLamport.data(), size.bytes);
      if (fnv1a64(res.hostLamport.data(), size.bytes) != sample.hash[kPlugin]) sample.repeatMismatch = 1;
    }
    sample.measured = 1;
    header_.sizesDone = index + 1;
    if (opt_.verbose && ctx_.rank == 0) {
      if (progress_) clearProgress();
      std::fprintf(stderr, "nccl-lamport-bench: rank 0 done with %zu bytes (%s)\n", size.bytes,
                   path == ncclLamportPathNccl ? "nccl" : path == ncclLamportPathTwoShot ? "lamport-2shot" : "lamport");
    }
  }

  /** Final barrier, counters, ncclCommDestroy. */
  void tearDown(RankResources& res) {
    if (progress_) clearProgress();
    sync_.setContext("");
    sync_.setPhase("teardown");
    sync_.barrier();  // nobody unmaps its workspace while a peer may still write into it
    ncclLamportCommInfo_t info{};
    if (ncclLamportGetCommInfo(res.comm, &info) == ncclSuccess) {
      header_.lamportCallsTotal = info.lamportCalls;
      header_.ncclCallsTotal = info.ncclCalls;
    }
    if (res.symmetricOk) {
      sync_.setPhase("symmetric windows (ncclCommWindowDeregister)");
      res.symmetric.close();  // collective, before the communicator goes
    }
    sync_.setPhase("ncclCommDestroy");
    BENCH_NCCL(ncclCommDestroy(res.comm));
    res.comm = nullptr;
  }

 private:
  void download(RankResources& res, void* host, size_t bytes) {
    BENCH_CUDA(cudaMemcpyAsync(host, res.recv.get(), bytes, cudaMemcpyDeviceToHost, res.stream.get()));
    sync_.waitStream(res.stream.get());
  }

  /** One call of each path on poisoned outputs, compared with the fp64 reference. */
  void check(RankResources& res, const AllReduceCall (&calls)[kPathCount], const SizeSpec& size,
             SizeSample& sample) {
    // The symmetric kernels are timed, not checked: they are stock NCCL's own allreduce.
    std::vector<unsigned char>* outputs[kPathCount] = {&res.hostNccl, &res.hostLamport, nullptr};
    for (int p : {kStock, kPlugin}) {
      sync_.setPhase(std::string("check (") + calls[p].label + ")");
      ncclLamportCommInfo_t before{};
      ncclLamportCommInfo_t after{};
      const bool counted = ncclLamportGetCommInfo(res.comm, &before) == ncclSuccess;
      BENCH_CUDA(cudaMemsetAsync(res.recv.get(), 0xFF, size.bytes, res.stream.get()));
      calls[p].enqueue();
      download(res, outputs[p]->data(), size.bytes);
      if (p == kPlugin && counted && ncclLamportGetCommInfo(res.comm, &after) == ncclSuccess) {
        sample.lamportCallsDelta = after.lamportCalls - before.lamportCalls;
      }
    }
    sync_.setPhase("check (host reference)");
    InputModel model;
    model.runSeed = plan_.seed;
    model.bytes = size.bytes;
    model.nRanks = ctx_.nRanks;
    model.dtype = opt_.dtype;
    model.op = opt_.op;
    const CheckSummary summary = checkOutputs(model, size.count, res.hostNccl.data(), res.hostLamport.data());
    sample.wrong[kStock] = summary.wrongNccl;
    sample.wrong[kPlugin] = summary.wrongLamport;
    sample.maxUlp = summary.maxUlpLamportVsNccl;
    sample.hash[kStock] = fnv1a64(res.hostNccl.data(), size.bytes);
    sample.hash[kPlugin] = fnv1a64(res.hostLamport.data(), size.bytes);
    copyString(sample.firstError, sizeof(sample.firstError), summary.firstError);
    sample.checked = 1;
  }

  RankContext& ctx_;
  const RankPlan& plan_;
  const BenchOptions& opt_;
  RankSync& sync_;
  RankHeader& header_;
  const bool progress_;  // rank 0 draws the progress line (bench/progress.h says when)
};

}  // namespace

int runRank(RankContext& ctx, const RankPlan& plan) {
  RankSlot& slot = *static_cast<RankSlot*>(ctx.myResults());
  RankHeader& header = slot.header;
  __atomic_store_n(&header.pid, static_cast<int32_t>(getpid()), __ATOMIC_RELEASE);
  __atomic_store_n(&header.started, 1, __ATOMIC_RELEASE);
  // Stop a little before the launcher kills us, so the rank can still say why.
  const double margin = std::min(10.0, 0.05 * plan.options.timeoutSeconds);
  RankSync sync(ctx, std::max(1.0, plan.options.timeoutSeconds - margin));
  RankRunner runner(ctx, plan, sync);
  RankResources* res = nullptr;
  try {
    runner.describeDevice();
    size_t maxBytes = 0;
    for (const SizeSpec& size : plan.sizes) maxBytes = std::max(maxBytes, size.bytes);
    sync.setPhase("allocation");
    res = new RankResources(maxBytes);
    runner.initComm(*res);
    for (int i = 0; i < static_cast<int>(plan.sizes.size()); ++i) runner.measure(*res, i);
    runner.tearDown(*res);
    delete res;
    __atomic_store_n(&header.finished, 1, __ATOMIC_RELEASE);
    return 0;
  } catch (const std::exception& e) {
    // res is leaked on purpose: freeing device memory synchronises with work that may never end.
    const std::string why = sync.phase().empty() ? e.what() : sync.phase() + ": " + e.what();
    copyString(header.error, sizeof(header.error), why);
    __atomic_store_n(&header.failed, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&header.finished, 1, __ATOMIC_RELEASE);
    std::fprintf(stderr, "nccl-lamport-bench: rank %d (GPU %d) failed: %s\n", ctx.rank, ctx.rank,
                 why.c_str());
    return 1;
  }
}

}  // namespace nccl_lamport::bench
