// GPU tests of the error paths, one process per GPU (forked ranks; this gtest process never touches
// CUDA):
//  - bad arguments give exactly NCCL's result code (SPEC 4.8);
//  - NCCL_LAMPORT_ENABLE=0 is a plain pass-through with correct results (SPEC 2), and so is a
//    communicator whose NCCL has P2P turned off (NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL=LOC) or
//    allreduce's algorithm or protocol chosen (NCCL_ALGO, NCCL_PROTO);
//  - the bounded wait (SPEC 5): a rank whose peer never joins gives up after
//    NCCL_LAMPORT_TIMEOUT_MS, reports an error through ncclCommGetAsyncError and can be aborted;
//    ncclCommAbort from another thread releases a kernel waiting for a peer that never comes;
//  - two captures into different graphs on one communicator stay valid (issue 10, point 8).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {
namespace {

using Clock = std::chrono::steady_clock;

double secondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

ForkOptions twoRanks(double timeoutSeconds, std::vector<std::pair<std::string, std::string>> env) {
  return forkRanks(2, timeoutSeconds, std::move(env));
}

/**
 * NCCL's own result code for an allreduce of 16 elements with these (bad) arguments.
 * Linked build: pncclAllReduce, NCCL's allreduce itself (the interposer does not wrap it).
 * Tuner activation: pncclAllReduce is the hooked ncclAllReduce (one function in libnccl), so NCCL's
 * answer comes from ncclReduce with this rank as root, a collective the plugin never takes, which
 * runs the same argument checks in NCCL's enqueue (comm, datatype, op; with NCCL_CHECK_POINTERS
 * sendbuff, and recvbuff on the root). Nothing is launched: every case is refused (checked).
 */
ncclResult_t ncclsOwnResultCode(const void* send, void* recv, ncclDataType_t dtype, ncclRedOp_t op, ncclComm_t comm,
                                const RankSlot& s) {
  if (!tunerActivation()) return pncclAllReduce(send, recv, 16, dtype, op, comm, s.stream);
  return ncclReduce(send, recv, 16, dtype, op, s.rank, comm, s.stream);
}

TEST(Errors, InvalidArgumentsGiveNcclsResultCode) {
  // NCCL validates buffer pointers only when asked to (otherwise a null buffer faults on the GPU).
  const ForkOptions options = twoRanks(120, {{"NCCL_CHECK_POINTERS", "1"}, {"NCCL_CHECK_MODE", "DEBUG_LOCAL"}});
  LAMPORT_RUN_FORKED(options, [](Harness& h, RankContext&) {
    RankSlot& s = h.slots[0];
    std::vector<float> host(1024, 1.0f);
    void* buf = nullptr;
    if (cudaMalloc(&buf, 4096) != cudaSuccess || cudaMemset(buf, 0, 4096) != cudaSuccess) {
      h.fail(s, "cudaMalloc");
      return;
    }
    struct Case {
      const char* what;
      const void* send;
      void* recv;
      ncclDataType_t dtype;
      ncclRedOp_t op;
      ncclComm_t comm;
    };
    const Case cases[] = {
        {"null sendbuff", nullptr, buf, ncclFloat32, ncclSum, s.comm},
        {"null recvbuff", buf, nullptr, ncclFloat16, ncclSum, s.comm},
        {"null sendbuff and recvbuff", nullptr, nullptr, ncclBfloat16, ncclAvg, s.comm},
        {"datatype ncclNumTypes", buf, buf, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, s.comm},
        {"datatype -1", buf, buf, static_cast<ncclDataType_t>(-1), ncclSum, s.comm},
        {"op ncclNumOps (no user op created)", buf, buf, ncclFloat32, static_cast<ncclRedOp_t>(ncclNumOps), s.comm},
        {"op -1", buf, buf, ncclFloat32, static_cast<ncclRedOp_t>(-1), s.comm},
        {"comm nullptr", buf, buf, ncclFloat32, ncclSum, nullptr},
        // Pageable host memory: NCCL's pointer check refuses it; a kernel of ours would fault on
        // it (or, where the device can reach pageable memory, run a call NCCL refuses).
        {"sendbuff in pageable host memory", host.data(), buf, ncclFloat32, ncclSum, s.comm},
        {"recvbuff in pageable host memory", buf, host.data(), ncclBfloat16, ncclSum, s.comm},
    };
    for (const Case& c : cases) {
      // NCCL first: if it accepted the call there would be nothing to compare with (and a fault).
      const ncclResult_t theirs = ncclsOwnResultCode(c.send, c.recv, c.dtype, c.op, c.comm, s);
      if (theirs == ncclSuccess) {
        h.fail(s, std::string(c.what) + ": NCCL itself accepted it (NCCL_CHECK_POINTERS not honoured?)");
        return;
      }
      const ncclResult_t ours = ncclAllReduce(c.send, c.recv, 16, c.dtype, c.op, c.comm, s.stream);
      if (ours != theirs) {
        h.fail(s, std::string(c.what) + ": ncclAllReduce returned " + std::to_string(ours) + ", NCCL returns " +
                      std::to_string(theirs));
      }
      h.failures->addCheck();
    }
    h.syncAll("invalid calls");
    h.checkNoAsyncError("after invalid calls");
    ncclLamportCommInfo_t info{};
    if (ncclLamportGetCommInfo(s.comm, &info) != ncclSuccess || info.lamportCalls != s.base.lamportCalls) {
      h.fail(s, "an invalid call was counted as a Lamport call");
    }
    cudaFree(buf);
    h.begin();  // whether NCCL-bound invalid calls count in ncclCalls is not specified: start afresh
    CallSpec spec;
    spec.count = 4097;
    runCheckedStep(h, spec, 1, true);  // the communicator still works, on the Lamport path
  });
}

TEST(Errors, DisabledIsPlainPassThrough) {
  ForkOptions options = twoRanks(300, {{"NCCL_LAMPORT_ENABLE", "0"}});
  options.requireEligible = false;
  LAMPORT_RUN_FORKED(options, [](Harness& h, RankContext&) {
    if (ncclLamportIsActive() != 0 || h.active) h.fail(h.slots[0], "ncclLamportIsActive() != 0 with NCCL_LAMPORT_ENABLE=0");
    uint64_t call = 0;
    for (ncclDataType_t dtype : {ncclFloat32, ncclFloat16, ncclBfloat16}) {
      for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
        for (size_t count : {size_t{1}, size_t{4097}, kTestOneShotMaxBytes / elementSize(dtype)}) {
          CallSpec spec;
          spec.dtype = dtype;
          spec.op = op;
          spec.count = count;
          spec.sendOffset = call % 2;
          runCheckedStep(h, spec, mixSeed(0xD15AB1E, call++), true);  // path NCCL, checked by Harness
        }
      }
    }
    h.checkCounters("disabled");  // lamportCalls must stay 0
  });
}

/**
 * NCCL's own settings that keep a communicator on NCCL (plugin/comm/nccl_settings.h): P2P off, or
 * allreduce's algorithm / protocol chosen. No communicator is set up for Lamport (the reason names
 * the variable) and every call goes to NCCL with correct results. Before, the plugin took the
 * calls all the same.
 */
class NcclSettingsOff : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(NcclSettingsOff, EveryCallStaysOnNccl) {
  const auto [variable, value] = GetParam();
  ForkOptions options = twoRanks(300, {{variable, value}});
  options.requireEligible = false;
  const std::string name = variable;
  LAMPORT_RUN_FORKED(options, [name](Harness& h, RankContext&) {
    for (RankSlot& s : h.slots) {
      ncclLamportCommInfo_t info{};
      if (ncclLamportGetCommInfo(s.comm, &info) != ncclSuccess || info.eligible != 0 ||
          std::string(info.reason).find(name) == std::string::npos) {
        h.fail(s, "with " + name + " set the communicator must stay on NCCL and say why; reason: " + info.reason);
      }
    }
    uint64_t call = 0;
    for (size_t count : {size_t{1}, size_t{4097}, kTestOneShotMaxBytes / elementSize(ncclBfloat16)}) {
      CallSpec spec;
      spec.dtype = ncclBfloat16;
      spec.count = count;
      runCheckedStep(h, spec, mixSeed(0xB2BF, call++), true);  // path NCCL, checked by Harness
    }
    h.checkCounters(name.c_str());  // lamportCalls must stay 0
  });
}

INSTANTIATE_TEST_SUITE_P(Errors, NcclSettingsOff,
                         ::testing::Values(std::make_pair("NCCL_P2P_DISABLE", "1"),
                                           std::make_pair("NCCL_P2P_LEVEL", "LOC"),
                                           std::make_pair("NCCL_ALGO", "allreduce:tree"),
                                           std::make_pair("NCCL_PROTO", "Simple")),
                         [](const auto& param) { return std::string(param.param.first).substr(5); });

/** Rank 1's side of the "peer never comes" tests: waits until rank 0 is done, then aborts. */
void peerThatNeverComes(Harness& h, RankContext& ctx) {
  RankSlot& s = h.slots[0];
  uint32_t* done = &static_cast<SharedReport*>(const_cast<void*>(ctx.resultsOf(0)))->flag;
  const Clock::time_point start = Clock::now();
  while (__atomic_load_n(done, __ATOMIC_ACQUIRE) == 0 && secondsBetween(start, Clock::now()) < 150) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (__atomic_load_n(done, __ATOMIC_ACQUIRE) == 0) h.fail(s, "rank 0 never finished");
  const ncclResult_t rc = ncclCommAbort(s.comm);  // its rotation no longer matches rank 0's
  s.comm = nullptr;
  if (rc != ncclSuccess) h.fail(s, "ncclCommAbort returned " + std::to_string(rc));
  h.failures->addCheck();
}

/** Sets rank 0's done flag when it goes out of scope, whatever path rank 0 took. */
struct ReleasePeer {
  uint32_t* flag;
  ~ReleasePeer() { __atomic_store_n(flag, 1u, __ATOMIC_RELEASE); }
};

/** Rank 0: a working call with its peer, then a Lamport call the peer never joins (issued). */
bool issueLonelyCall(Harness& h, CheckedCall& lonely) {
  RankSlot& s = h.slots[0];
  CallSpec spec;
  spec.count = 4096;
  if (!runCheckedStep(h, spec, 1, true).empty()) return false;
  lonely.stage(2);
  if (!lonely.setupError().empty() || !h.syncAll("staging")) return false;
  const ncclResult_t rc = lonely.issue(h, s);
  if (rc != ncclSuccess || !lonely.expectLamport) {
    h.fail(s, "the lonely call must be a one-shot call that returns ncclSuccess; rc " + std::to_string(rc));
    return false;
  }
  fprintf(stderr, "rank 0: issued an allreduce that rank 1 never joins\n");
  return true;
}

TEST(Errors, TimeoutWhenPeerSkipsCall) {
  const ForkOptions options = twoRanks(200, {{"NCCL_LAMPORT_TIMEOUT_MS", "2000"}});
  LAMPORT_RUN_FORKED(options, [](Harness& h, RankContext& ctx) {
    if (ctx.rank == 1) {
      CallSpec spec;
      spec.count = 4096;
      runCheckedStep(h, spec, 1, true);
      return peerThatNeverComes(h, ctx);
    }
    ReleasePeer release{&static_cast<SharedReport*>(ctx.myResults())->flag};
    RankSlot& s = h.slots[0];
    CallSpec spec;
    spec.count = 4096;
    CheckedCall lonely(spec, s);
    if (!issueLonelyCall(h, lonely)) return;
    const Clock::time_point issued = Clock::now();
    const cudaError_t err = cudaStreamSynchronize(s.stream);
    const double waited = secondsBetween(issued, Clock::now());
    if (err != cudaSuccess) h.fail(s, std::string("the kernel must give up cleanly: ") + cudaGetErrorString(err));
    if (waited < 1.0 || waited > 30.0) {
      h.fail(s, "cudaStreamSynchronize returned after " + std::to_string(waited) +
                    " s with NCCL_LAMPORT_TIMEOUT_MS=2000 (expected about 2 s, well under 60 s)");
    }
    ncclResult_t asyncError = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(s.comm, &asyncError);
    if (rc != ncclSuccess || asyncError == ncclSuccess || asyncError == ncclInProgress) {
      h.fail(s, "after the timeout ncclCommGetAsyncError must report an error: rc " + std::to_string(rc) +
                    " asyncError " + std::to_string(asyncError));
    }
    const Clock::time_point abortStart = Clock::now();
    const ncclResult_t aborted = ncclCommAbort(s.comm);
    const double abortSeconds = secondsBetween(abortStart, Clock::now());
    s.comm = nullptr;
    if (aborted != ncclSuccess || abortSeconds > 20.0) {
      h.fail(s, "ncclCommAbort returned " + std::to_string(aborted) + " after " + std::to_string(abortSeconds) + " s");
    }
    h.failures->addCheck();
  });
}

TEST(Errors, AbortFromAnotherThreadReleasesWaitingKernel) {
  // The default-length wait (10 minutes): only the abort can release the kernel in time.
  const ForkOptions options = twoRanks(150, {{"NCCL_LAMPORT_TIMEOUT_MS", "600000"}});
  LAMPORT_RUN_FORKED(options, [](Harness& h, RankContext& ctx) {
    if (ctx.rank == 1) {
      CallSpec spec;
      spec.count = 4096;
      runCheckedStep(h, spec, 1, true);
      return peerThatNeverComes(h, ctx);
    }
    ReleasePeer release{&static_cast<SharedReport*>(ctx.myResults())->flag};
    RankSlot& s = h.slots[0];
    CallSpec spec;
    spec.count = 4096;
    CheckedCall lonely(spec, s);
    if (!issueLonelyCall(h, lonely)) return;
    const Clock::time_point issued = Clock::now();
    Clock::time_point abortStart, abortEnd;
    ncclResult_t aborted = ncclInternalError;
    const ncclComm_t comm = s.comm;
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      abortStart = Clock::now();
      fprintf(stderr, "rank 0: aborting from another thread while the kernel waits\n");
      aborted = ncclCommAbort(comm);
      abortEnd = Clock::now();
    });
    const cudaError_t err = cudaStreamSynchronize(s.stream);
    const Clock::time_point synced = Clock::now();
    aborter.join();
    s.comm = nullptr;
    if (aborted != ncclSuccess || secondsBetween(abortStart, abortEnd) > 20.0) {
      h.fail(s, "ncclCommAbort returned " + std::to_string(aborted) + " after " +
                    std::to_string(secondsBetween(abortStart, abortEnd)) + " s");
    }
    if (err != cudaSuccess) h.fail(s, std::string("the released kernel must end cleanly: ") + cudaGetErrorString(err));
    if (synced < abortStart) {
      h.fail(s, "the stream finished " + std::to_string(secondsBetween(issued, synced)) +
                    " s after the lonely call, before the abort: the kernel did not wait for its peer");
    } else if (secondsBetween(abortStart, synced) > 20.0) {
      h.fail(s, "the kernel ran on for " + std::to_string(secondsBetween(abortStart, synced)) + " s after the abort");
    }
    h.failures->addCheck();
  });
}

TEST(Errors, TwoCapturesOnOneCommStayValid) {
  // Issue 10, point 8: calls of one communicator captured into two different graphs at once, from
  // two streams. Ordering the second after the first (an event across the two captures) would
  // join the graphs and invalidate the user's captures; both must end, replay and be correct.
  LAMPORT_RUN_FORKED(twoRanks(180, {}), [](Harness& h, RankContext&) {
    RankSlot& s = h.slots[0];
    constexpr size_t kCount = 1024;
    OwnedStream first, second;
    float* buf[2] = {nullptr, nullptr};
    if (first.stream == nullptr || second.stream == nullptr || cudaMalloc(&buf[0], kCount * 4) != cudaSuccess ||
        cudaMalloc(&buf[1], kCount * 4) != cudaSuccess) {
      return h.fail(s, "CUDA set-up failed");
    }
    cudaGraph_t graph[2] = {nullptr, nullptr};
    cudaError_t err = cudaStreamBeginCapture(first.stream, cudaStreamCaptureModeThreadLocal);
    ncclResult_t rc0 = ncclAllReduce(buf[0], buf[0], kCount, ncclFloat32, ncclSum, s.comm, first.stream);
    if (err == cudaSuccess) err = cudaStreamBeginCapture(second.stream, cudaStreamCaptureModeThreadLocal);
    ncclResult_t rc1 = ncclAllReduce(buf[1], buf[1], kCount, ncclFloat32, ncclSum, s.comm, second.stream);
    const cudaError_t end1 = cudaStreamEndCapture(second.stream, &graph[1]);
    const cudaError_t end0 = cudaStreamEndCapture(first.stream, &graph[0]);
    if (err != cudaSuccess || rc0 != ncclSuccess || rc1 != ncclSuccess || end0 != cudaSuccess || end1 != cudaSuccess) {
      cudaGetLastError();
      return h.fail(s, std::string("captures: begin ") + cudaGetErrorString(err) + ", calls " + std::to_string(rc0) +
                           "/" + std::to_string(rc1) + ", end " + cudaGetErrorString(end0) + " / " +
                           cudaGetErrorString(end1));
    }
    for (int replay = 0; replay < 3; ++replay) {
      bool ok = true;
      for (int g = 0; g < 2 && ok; ++g) {
        std::vector<float> host(kCount, static_cast<float>(s.rank + 1 + g));
        cudaGraphExec_t exec = nullptr;
        ok = cudaMemcpy(buf[g], host.data(), kCount * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaGraphInstantiate(&exec, graph[g], 0) == cudaSuccess && cudaGraphLaunch(exec, s.stream) == cudaSuccess &&
             cudaStreamSynchronize(s.stream) == cudaSuccess &&
             cudaMemcpy(host.data(), buf[g], kCount * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
        if (exec != nullptr) cudaGraphExecDestroy(exec);
        const float expected = static_cast<float>(3 + 2 * g);  // (1 + g) + (2 + g) over the two ranks
        for (size_t i = 0; ok && i < kCount; ++i) ok = host[i] == expected;
        if (!ok) h.fail(s, "graph " + std::to_string(g) + " replay " + std::to_string(replay) + ": wrong result or error");
      }
      if (!ok) break;
    }
    for (cudaGraph_t g : graph) cudaGraphDestroy(g);
    cudaFree(buf[0]);
    cudaFree(buf[1]);
    s.expectLamport += 2;  // both captured calls (4 KiB) are Lamport calls, counted at capture
    h.failures->addCheck();
  });
}

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
