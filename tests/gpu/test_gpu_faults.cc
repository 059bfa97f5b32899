// Faults of one rank during a stream of Lamport calls (issue 10, evidence): one rank is killed
// (SIGKILL) or stopped (SIGSTOP) after 200 checked-in calls; the survivor keeps calling and must
// see its call end within NCCL_LAMPORT_TIMEOUT_MS (3 s here), ncclCommGetAsyncError report an
// error, ncclCommAbort return within 5 s, and its process exit normally. Two forked ranks, one
// per GPU, or both on GPU 0 in shared-GPU mode (tests/gpu/shared_gpu.h). Each result is printed:
//   fault <kind>: <calls> calls, error after <s> s (<code>), abort <s> s
// Faults.NcclErrorAnswersTheNextSmallCall: once NCCL itself reports the communicator failed, a
// small call gets NCCL's error at once (SPEC 4.8, issue 10 point 5).
// Label gpu; SKIPPED without a GPU (or, outside shared-GPU mode, with fewer than two).
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>

#include "bench/rank_launcher.h"
#include "include/nccl_lamport.h"
#include "tests/gpu/activation_mode.h"
#include "tests/gpu/shared_gpu.h"

namespace nccl_lamport {
namespace gputest {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTimeoutMs = 3000;  // NCCL_LAMPORT_TIMEOUT_MS of the ranks
constexpr int kCallsBeforeFault = 200;
constexpr size_t kCount = 4096;  // bf16: 8 KiB, far below the crossover: every call is a Lamport call

/** One rank's findings, in the launcher's shared results area. */
struct FaultReport {
  int pid;
  uint32_t victimReady;  // the victim finished its calls and is about to be signalled
  int calls;
  double errorSeconds, abortSeconds;
  int asyncError, callResult;
  char text[1024];
};

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int fail(FaultReport* report, const std::string& what) {
  snprintf(report->text, sizeof(report->text), "%s", what.c_str());
  return 1;
}

/**
 * Error parity (SPEC 4.8): once NCCL itself has marked the communicator failed (a large call, on
 * NCCL, runs into the killed peer: NCCL's socket transport of shared-GPU mode notices the closed
 * connection), a small call that would be a Lamport call gets NCCL's error at once, as from NCCL,
 * instead of ncclSuccess and a kernel that waits for a dead peer. Exit 2 (reported as "NCCL did
 * not notice") when NCCL reports nothing within 30 s: then there is nothing to compare.
 */
int ncclErrorAnswersTheNextCall(ncclComm_t comm, cudaStream_t stream, void* small, FaultReport* report) {
  constexpr size_t kLargeCount = size_t{64} << 20;  // fp32: 256 MiB, far past the crossover
  void* large = nullptr;
  if (cudaMalloc(&large, kLargeCount * 4) != cudaSuccess) return fail(report, "cudaMalloc of the large buffer");
  ncclLamportPath_t path = ncclLamportPathOneShot;
  ncclLamportGetAllReducePath(comm, kLargeCount, ncclFloat32, ncclSum, &path);
  if (path != ncclLamportPathNccl) return fail(report, "the large call would not go to NCCL");
  const ncclResult_t issued = ncclAllReduce(large, large, kLargeCount, ncclFloat32, ncclSum, comm, stream);
  // NCCL's own state: pncclCommGetAsyncError, which the interposer does not wrap. In tuner
  // activation it is the hooked ncclCommGetAsyncError itself; our wrapper adds only a Lamport
  // kernel's error, and this rank's Lamport calls all ended cleanly before the fault, so the
  // answer is still NCCL's.
  const auto getAsyncError = reinterpret_cast<decltype(&ncclCommGetAsyncError)>(pncclCommGetAsyncError);
  // The premise is NCCL's communicator state, not the large call's own result: NCCL may fail
  // that call at once (its connection to the dead peer is made in the call) before, or without,
  // marking the communicator failed; only a marked communicator makes NCCL refuse the next call.
  // (Seen in tuner activation on one H200: the large call returned ncclRemoteError at once, and
  // the small call then took the Lamport path as stock NCCL would have taken it.)
  (void)issued;
  ncclResult_t ncclState = ncclSuccess;
  const Clock::time_point start = Clock::now();
  while (ncclState == ncclSuccess && since(start) < 30) {
    if (getAsyncError(comm, &ncclState) != ncclSuccess) ncclState = ncclInternalError;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  report->errorSeconds = since(start);
  report->asyncError = ncclState;
  if (ncclState == ncclSuccess || ncclState == ncclInProgress) {
    snprintf(report->text, sizeof(report->text), "NCCL did not notice the dead peer within 30 s");
    ncclCommAbort(comm);
    return 2;
  }
  const Clock::time_point calling = Clock::now();
  report->callResult = ncclAllReduce(small, small, kCount, ncclBfloat16, ncclSum, comm, stream);
  const double callSeconds = since(calling);
  const Clock::time_point aborting = Clock::now();
  ncclCommAbort(comm);
  report->abortSeconds = since(aborting);
  if (report->callResult == ncclSuccess) {
    return fail(report, "the small call returned ncclSuccess on a communicator NCCL reports failed (" +
                            std::to_string(ncclState) + ")");
  }
  if (callSeconds > 1) return fail(report, "the small call took " + std::to_string(callSeconds) + " s");
  return 0;
}

int faultRank(RankContext& ctx, int gpus, bool shared, int signal, bool ncclFirst) {
  // The launcher's stride between ranks' results (resultBytesPerRank) may exceed sizeof(FaultReport):
  // address every slice through it, as runFault reads them.
  auto* report = static_cast<FaultReport*>(ctx.myResults());
  auto* victim = static_cast<FaultReport*>(const_cast<void*>(ctx.resultsOf(1)));
  report->pid = getpid();
  for (const auto& [name, value] : sharedGpuEnvironment(ctx.rank, shared)) setenv(name.c_str(), value.c_str(), 1);
  setenv("NCCL_LAMPORT_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
  cudaStream_t stream = nullptr;
  void* buf = nullptr;
  if (cudaSetDevice(forkedRankDevice(ctx.rank, gpus, shared)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc(&buf, kCount * 2) != cudaSuccess || cudaMemset(buf, 0, kCount * 2) != cudaSuccess) {
    return fail(report, "CUDA set-up failed");
  }
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, ctx.nRanks, ctx.uniqueId(), ctx.rank) != ncclSuccess) return fail(report, "init failed");
  const std::string activationProblem = activationProblemAfterInit();  // tuner build: NCCL loaded our tuner
  if (!activationProblem.empty()) return fail(report, activationProblem);
  ncclLamportPath_t path = ncclLamportPathNccl;
  if (ncclLamportGetAllReducePath(comm, kCount, ncclBfloat16, ncclSum, &path) != ncclSuccess ||
      path != ncclLamportPathOneShot) {
    return fail(report, "the communicator is not accelerated: nothing to test");
  }
  for (int i = 0; i < kCallsBeforeFault; ++i) {
    if (ncclAllReduce(buf, buf, kCount, ncclBfloat16, ncclSum, comm, stream) != ncclSuccess) {
      return fail(report, "a call before the fault failed");
    }
    if (i % 20 == 19 && cudaStreamSynchronize(stream) != cudaSuccess) return fail(report, "sync before the fault");
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess) return fail(report, "sync before the fault");
  report->calls = kCallsBeforeFault;

  if (ctx.rank == 1) {  // the victim
    __atomic_store_n(&report->victimReady, 1u, __ATOMIC_RELEASE);
    raise(signal);
    pause();  // SIGSTOP: the survivor ends this process with SIGKILL once it is done
    _exit(0);
  }
  const Clock::time_point waitStart = Clock::now();
  while (__atomic_load_n(&victim->victimReady, __ATOMIC_ACQUIRE) == 0 && since(waitStart) < 60) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the signal has landed
  if (ncclFirst) return ncclErrorAnswersTheNextCall(comm, stream, buf, report);

  // Keep calling until a call or NCCL's async state reports the fault.
  const Clock::time_point start = Clock::now();
  const double limit = kTimeoutMs / 1000.0 + 10;
  ncclResult_t async = ncclSuccess, call = ncclSuccess;
  while (since(start) < limit && async == ncclSuccess && call == ncclSuccess) {
    call = ncclAllReduce(buf, buf, kCount, ncclBfloat16, ncclSum, comm, stream);
    if (call == ncclSuccess) ++report->calls;
    while (call == ncclSuccess && cudaStreamQuery(stream) == cudaErrorNotReady && since(start) < limit) {
      if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async != ncclSuccess) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (async == ncclSuccess && ncclCommGetAsyncError(comm, &async) != ncclSuccess) async = ncclInternalError;
  }
  report->errorSeconds = since(start);
  report->asyncError = async;
  report->callResult = call;
  if (async == ncclSuccess) ncclCommGetAsyncError(comm, &async);
  const Clock::time_point aborting = Clock::now();
  const ncclResult_t aborted = ncclCommAbort(comm);
  report->abortSeconds = since(aborting);
  cudaStreamSynchronize(stream);  // our aborted kernel ended: the stream is free
  cudaGetLastError();
  if (signal == SIGSTOP && victim->pid > 0) kill(victim->pid, SIGKILL);
  std::string problems;
  if (async == ncclSuccess) problems += "ncclCommGetAsyncError never reported the fault; ";
  if (report->errorSeconds > kTimeoutMs / 1000.0 + 5) problems += "the fault was reported late; ";
  if (aborted != ncclSuccess) problems += "ncclCommAbort returned " + std::to_string(aborted) + "; ";
  if (report->abortSeconds > 5) problems += "ncclCommAbort took more than 5 s; ";
  return problems.empty() ? 0 : fail(report, problems);
}

void runFault(int signal, const char* kind, bool ncclFirst = false) {
  const int gpus = countCudaDevicesWithoutInit();
  const bool shared = sharedGpuMode();
  const std::string skip = forkedRankSkipReason(2, gpus, shared);
  if (!skip.empty()) GTEST_SKIP() << skip;
  if (tunerActivation()) {  // a misconfigured run of the tuner build fails: it would test nothing
    const std::string problem = tunerActivationEnvProblem();
    ASSERT_TRUE(problem.empty()) << problem;
  }
  RankLaunch launch = launchRanks(
      2, sizeof(FaultReport), 120, [](ncclUniqueId* id) { return ncclGetUniqueId(id); },
      [&](RankContext& ctx) { return faultRank(ctx, gpus, shared, signal, ncclFirst); });
  ASSERT_EQ(launch.exits.size(), 2u) << "launchRanks could not start the ranks";
  const auto* survivor = static_cast<const FaultReport*>(launch.resultsOf(0));
  const auto* victim = static_cast<const FaultReport*>(launch.resultsOf(1));
  printf("fault %s: %d calls, error after %.2f s (async %d, call %d), abort %.2f s; survivor exit %d%s\n", kind,
         survivor->calls, survivor->errorSeconds, survivor->asyncError, survivor->callResult, survivor->abortSeconds,
         launch.exits[0].exitCode, launch.exits[0].timedOut ? " (timed out)" : "");
  EXPECT_EQ(victim->victimReady, 1u) << "the victim never reached the fault: " << victim->text;
  if (ncclFirst && launch.exits[0].exitCode == 2) GTEST_SKIP() << survivor->text;
  EXPECT_TRUE(launch.exits[0].exitCode == 0 && !launch.exits[0].timedOut) << "survivor: " << survivor->text;
  EXPECT_NE(survivor->asyncError, ncclSuccess);
}

TEST(Faults, PeerKilledDuringLamportCalls) { runFault(SIGKILL, "SIGKILL"); }

TEST(Faults, PeerStoppedDuringLamportCalls) { runFault(SIGSTOP, "SIGSTOP"); }

TEST(Faults, NcclErrorAnswersTheNextSmallCall) { runFault(SIGKILL, "SIGKILL, NCCL first", true); }

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
