// GPU tests of the kinds of communicator an application can create (issue 3, point 2): splits
// with NCCL_SPLIT_NOCOLOR and one-rank colors, splits with reordered ranks, ncclCommShrink,
// ncclCommInitRankScalable, non-blocking communicators (config.blocking = 0), ncclCommRevoke, and
// several communicators driven from several threads. 2 forked ranks, one process per GPU (this
// gtest process never touches CUDA), except NonBlockingGroupedInitOneProcess, which forks ONE
// process that drives both GPUs.
//
// Every allreduce is checked against the fp64 reference and NCCL's own result, bit-identical
// across ranks (calls on one-rank communicators are not shared, so they are not compared), with
// outputs poisoned and fresh inputs. "Accelerated" means: ncclLamportGetCommInfo says eligible
// with a workspace, ncclLamportGetAllReducePath is checked before every call, and lamportCalls
// grows by exactly the number of Lamport-sized calls issued.
//
// Non-blocking communicators (what the plugin promises, plugin/comm/deferred_setup.h): the init/split
// call returns ncclSuccess or ncclInProgress; the application polls ncclCommGetAsyncError until
// ncclSuccess, which the plugin holds at ncclInProgress a little longer while it sets up the
// workspace on a helper thread; then the communicator is accelerated. NCCL writes the handle of a
// non-blocking split only when the split is done, so the parent is polled first (as PyTorch does).
// Calls on a non-blocking communicator may return ncclInProgress: it is polled again before its
// stream is waited on (NCCL may not have enqueued the work before that).
//
// Waits are bounded (streams polled for 60 s, readiness for 120 s, NCCL_LAMPORT_TIMEOUT_MS=20000,
// destroy/revoke timed on a second thread), so a hang is a failure that says where it was.
// Not here: ncclCommAbort from another thread while a Lamport kernel waits for a peer that never
// comes is Errors.AbortFromAnotherThreadReleasesWaitingKernel (test_gpu_errors.cc).
#include <dlfcn.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/gpu_test_support.h"

#ifndef NCCL_SHRINK_DEFAULT
#define NCCL_SHRINK_DEFAULT 0x00
#endif
#ifndef NCCL_REVOKE_DEFAULT
#define NCCL_REVOKE_DEFAULT 0x00
#endif

namespace nccl_lamport {
namespace gputest {
namespace {

constexpr double kWaitSeconds = 60, kReadySeconds = 120;

ForkOptions ranks(int n, double timeoutSeconds, std::vector<std::pair<std::string, std::string>> env = {}) {
  return forkRanks(n, timeoutSeconds, std::move(env), 20000);
}

CallSpec spec(ncclDataType_t dtype, size_t count, ncclRedOp_t op = ncclSum) {
  CallSpec s;
  s.dtype = dtype;
  s.count = count;
  s.op = op;
  return s;
}

bool lamportSized(const CallSpec& s) { return s.count > 0 && elementSize(s.dtype) * s.count <= kTestOneShotMaxBytes; }

/** Calls that cover both sides of the suite's 256K crossover: 4 Lamport-sized, 1 past it. */
std::vector<CallSpec> mixedSpecs() {
  return {spec(ncclBfloat16, 4096), spec(ncclFloat32, 1, ncclAvg), spec(ncclFloat16, 65537),
          spec(ncclBfloat16, kTestOneShotMaxBytes / 2), spec(ncclBfloat16, kTestOneShotMaxBytes / 2 + 64, ncclAvg)};
}

/** runCheckedStep for every spec of mixedSpecs() on a blocking comm; the Lamport-sized count. */
uint64_t runMixed(Harness& hx, uint64_t seed) {
  uint64_t lamport = 0, i = 0;
  for (const CallSpec& s : mixedSpecs()) {
    runCheckedStep(hx, s, mixSeed(seed, i++), true);
    lamport += lamportSized(s) ? 1 : 0;
  }
  return lamport;
}

/** ncclResult_t from a call on a non-blocking communicator: both of these mean "accepted". */
bool accepted(ncclResult_t rc) { return rc == ncclSuccess || rc == ncclInProgress; }

/** One checked allreduce (and NCCL's reference) on a non-blocking communicator. */
bool nonBlockingStep(Harness& hx, const CallSpec& s, uint64_t seed, const char* what) {
  RankSlot& slot = hx.slots[0];
  CheckedCall call(s, slot);
  if (!call.setupError().empty()) return failf(hx, "%s: %s", what, call.setupError().c_str()), false;
  call.stage(seed);
  const std::string label = std::string(what) + " " + call.label();
  if (!waitStreams(hx, {slot.stream}, kWaitSeconds, "staging")) return false;
  ncclResult_t rc = call.issue(hx, slot);
  if (!accepted(rc)) failf(hx, "%s: ncclAllReduce returned %d (%s)", label.c_str(), rc, ncclGetErrorString(rc));
  if (lamportSized(s) && !call.expectLamport) failf(hx, "%s: Lamport-sized but not accelerated", label.c_str());
  if (!waitCommReady(hx, slot.comm, kWaitSeconds, label.c_str())) return false;
  rc = call.issueReference();
  if (!accepted(rc)) failf(hx, "%s: NCCL's own allreduce (reference) returned %d", label.c_str(), rc);
  if (!waitCommReady(hx, slot.comm, kWaitSeconds, label.c_str())) return false;
  if (!waitStreams(hx, {slot.stream}, kWaitSeconds, label.c_str())) return false;
  const std::string problems = call.verify(true);
  hx.failures->addCheck();
  if (!problems.empty()) failf(hx, "%s: %s", label.c_str(), problems.c_str());
  hx.cross->submit(slot, label, call.result(), *hx.failures);
  return true;
}

/** ncclCommInitRankConfig(blocking = 0) on a fresh id shared over h's comm; nullptr on failure.
 *  Returns right after the call (the communicator is then usually still in progress). */
ncclComm_t startNonBlockingInit(Harness& h, ncclResult_t* rcOut = nullptr) {
  ncclUniqueId id;
  if (!shareUniqueId(h, &id)) return nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, h.slots[0].nRanks, id, h.slots[0].rank, &config);
  if (rcOut != nullptr) *rcOut = rc;
  if (!accepted(rc) || comm == nullptr) {
    failf(h, "non-blocking ncclCommInitRankConfig returned %d (%s), comm %p", rc, ncclGetErrorString(rc),
          static_cast<void*>(comm));
    return nullptr;
  }
  return comm;
}

/** ncclCommDestroy on a second thread with a limit; ncclInProgress is fine for non-blocking comms. */
void destroyTimed(Harness& h, ncclComm_t* comm, bool nonBlocking, const char* what) {
  if (*comm == nullptr) return;
  ncclResult_t rc = ncclInternalError;
  const ncclComm_t c = *comm;
  timedOnThread(h, what, 30, [&] { rc = ncclCommDestroy(c); });
  *comm = nullptr;
  if (rc != ncclSuccess && !(nonBlocking && rc == ncclInProgress)) {
    failf(h, "%s returned %d (%s)", what, rc, ncclGetErrorString(rc));
  }
  h.failures->addCheck();
}

/** Destroys *comm at scope exit unless the test already destroyed or aborted it (set it to null). */
struct DestroyAtExit {
  ncclComm_t* comm;
  ~DestroyAtExit() {
    if (*comm != nullptr) ncclCommDestroy(*comm);
  }
};

/** A real NCCL entry point the loaded library may lack (SKIP then); called through the plugin's
 *  wrapper when it has one (RTLD_DEFAULT finds libnccl-lamport.so before libnccl; in tuner
 *  activation it finds NCCL's own entry, whose hook leads to the same wrapper). */
template <typename Fn>
Fn entryPoint(const char* name) {
  const std::string real = std::string("p") + name;
  if (dlsym(RTLD_DEFAULT, real.c_str()) == nullptr) return nullptr;
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}
using ShrinkFn = ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
using ScalableFn = ncclResult_t (*)(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*);
using RevokeFn = ncclResult_t (*)(ncclComm_t, int);

// ---------------------------------------------------------------- splits

/** Checked calls on a one-rank child: NCCL's path (not accelerated), results right. */
void oneRankChild(Harness& h, ncclComm_t child, const char* what) {
  OwnedStream stream;
  Harness hc = harnessFor(h, child, stream.stream);
  NoCrossCheck none;  // the other rank has no part in these calls
  hc.cross = &none;
  const ncclLamportCommInfo_t info = commInfo(child);
  h.failures->addCheck();
  if (info.eligible || hc.slots[0].nRanks != 1 || hc.slots[0].rank != 0) {
    failf(h, "%s: one-rank child: eligible %d nRanks %d rank %d (expected 0, 1, 0)", what, info.eligible,
          hc.slots[0].nRanks, hc.slots[0].rank);
  }
  uint64_t i = 0;
  for (const CallSpec& s : mixedSpecs()) runCheckedStep(hc, s, mixSeed(0x1AA, i++), true);  // path NCCL (Harness)
  hc.checkNoAsyncError(what);
  hc.checkCounters(what);  // lamportCalls 0, ncclCalls 5
}

TEST(CommKinds, SplitNoColorAndOneRankColors) {
  LAMPORT_RUN_FORKED(ranks(2, 300), [](Harness& h, RankContext&) {
    const int rank = h.slots[0].rank;
    // Rank 1 opts out: it gets a null comm, rank 0 a one-rank comm.
    ncclComm_t child = nullptr;
    ncclResult_t rc = ncclCommSplit(h.slots[0].comm, rank == 0 ? 0 : NCCL_SPLIT_NOCOLOR, 0, &child, nullptr);
    h.failures->addCheck();
    if (rc != ncclSuccess || (rank == 0) != (child != nullptr)) {
      return failf(h, "split with NCCL_SPLIT_NOCOLOR on rank 1: rc %d, child %p", rc, static_cast<void*>(child));
    }
    if (child != nullptr) oneRankChild(h, child, "NOCOLOR split");
    destroyTimed(h, &child, false, "ncclCommDestroy(one-rank child)");
    uint64_t lamport = runMixed(h, 0x0C01);  // the parent still works, accelerated
    // Two colors, one rank each: two one-rank comms, neither accelerated.
    rc = ncclCommSplit(h.slots[0].comm, rank, 0, &child, nullptr);
    if (rc != ncclSuccess || child == nullptr) return failf(h, "split into one-rank colors: rc %d", rc);
    oneRankChild(h, child, "color per rank");
    destroyTimed(h, &child, false, "ncclCommDestroy(one-rank child)");
    lamport += runMixed(h, 0x0C02);
    checkLamportGrowth(h, lamport, "parent after one-rank splits");
  });
}

TEST(CommKinds, SplitOneColorReversedRanks) {
  LAMPORT_RUN_FORKED(ranks(2, 300), [](Harness& h, RankContext&) {
    const int n = h.slots[0].nRanks, rank = h.slots[0].rank;
    // key reverses the order: the child's rank r is the parent's n-1-r (its own workspace and rank
    // numbering; results are still bit-identical across ranks).
    OwnedStream stream;
    ncclComm_t child = splitAccelerated(h, n - 1 - rank);
    DestroyAtExit guard{&child};
    if (child == nullptr) return;
    requireAccelerated(h, child, n, n - 1 - rank, "reversed split");
    requireAccelerated(h, h.slots[0].comm, n, rank, "the parent after the split");
    Harness hc = harnessFor(h, child, stream.stream);
    // Alternate parent and child, each on its own stream, 40 calls with no wait in between.
    std::vector<std::unique_ptr<CheckedCall>> calls;
    uint64_t lamport[2] = {0, 0};
    for (int k = 0; k < 40; ++k) {
      Harness& hx = k % 2 ? hc : h;
      const size_t count = 1 + static_cast<size_t>(k) * 997 % 20000;
      const CallSpec s = spec(k % 3 ? ncclBfloat16 : ncclFloat32, count, k % 4 ? ncclSum : ncclAvg);
      calls.emplace_back(new CheckedCall(s, hx.slots[0]));
      if (!calls.back()->setupError().empty()) return failf(h, "%s", calls.back()->setupError().c_str());
      calls.back()->stage(mixSeed(0x5E7, k));
      lamport[k % 2] += 1;
    }
    if (!waitStreams(h, {h.slots[0].stream, stream.stream}, kWaitSeconds, "staging")) return;
    for (int k = 0; k < 40; ++k) {
      Harness& hx = k % 2 ? hc : h;
      const ncclResult_t rc = calls[k]->issue(hx, hx.slots[0]);
      if (rc != ncclSuccess || !calls[k]->expectLamport) {
        failf(h, "call %d: rc %d, on Lamport %d", k, rc, calls[k]->expectLamport);
      }
    }
    if (!waitStreams(h, {h.slots[0].stream, stream.stream}, kWaitSeconds, "40 alternating calls")) {
      abortQuietly(&child);
      return abortQuietly(&h.slots[0].comm);
    }
    for (int k = 0; k < 40; ++k) calls[k]->issueReference();
    if (!waitStreams(h, {h.slots[0].stream, stream.stream}, kWaitSeconds, "references")) return abortQuietly(&child);
    for (int k = 0; k < 40; ++k) {
      Harness& hx = k % 2 ? hc : h;
      const std::string label = (k % 2 ? "child#" : "parent#") + std::to_string(k) + " " + calls[k]->label();
      const std::string problems = calls[k]->verify(true);
      h.failures->addCheck();
      if (!problems.empty()) failf(h, "%s: %s", label.c_str(), problems.c_str());
      hx.cross->submit(hx.slots[0], label, calls[k]->result(), *h.failures);
    }
    checkLamportGrowth(h, lamport[0], "parent");
    checkLamportGrowth(hc, lamport[1], "reversed child");
    calls.clear();
    destroyTimed(h, &child, false, "ncclCommDestroy(reversed child)");
  });
}

// ---------------------------------------------------------------- shrink, scalable init

TEST(CommKinds, ShrinkChild) {
  const ShrinkFn shrink = entryPoint<ShrinkFn>("ncclCommShrink");
  if (shrink == nullptr) GTEST_SKIP() << "the loaded NCCL has no ncclCommShrink (NCCL 2.27+)";
  // Every GPU: with 2 the child is a one-rank comm (NCCL rejects excluding nobody, see below),
  // with 3 or more it has n-1 ranks and must be accelerated.
  LAMPORT_RUN_FORKED(ranks(0, 300), [shrink](Harness& h, RankContext&) {
    const int n = h.slots[0].nRanks, rank = h.slots[0].rank;
    int exclude[1] = {n - 1};
    ncclComm_t child = nullptr;
    if (rank != n - 1) {  // an excluded rank must not call
      const ncclResult_t rc = shrink(h.slots[0].comm, exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT);
      h.failures->addCheck();
      if (rc != ncclSuccess || child == nullptr) {
        return failf(h, "ncclCommShrink (exclude rank %d) returned %d", n - 1, rc);
      }
      if (n - 1 == 1) {
        oneRankChild(h, child, "shrunk to one rank");
      } else {
        requireAccelerated(h, child, n - 1, rank, "shrunk comm");
        OwnedStream stream;
        Harness hc = harnessFor(h, child, stream.stream);
        NoCrossCheck none;  // rank n-1 does not take part: keep the hash lists of all ranks alike
        hc.cross = &none;
        checkLamportGrowth(hc, runMixed(hc, 0x5A1), "shrunk comm");
      }
      destroyTimed(h, &child, false, "ncclCommDestroy(shrunk comm)");
    }
    uint64_t lamport = runMixed(h, 0x5A2);  // the parent, all ranks, still accelerated
    // Excluding nobody: NCCL 2.27/2.28 answer ncclInvalidArgument (excludeRanksCount must be > 0)
    // and the plugin must pass that through; a NCCL that accepts it must give an accelerated copy.
    int none[1] = {-1};
    ncclComm_t copy = nullptr;
    const ncclResult_t rc = shrink(h.slots[0].comm, none, 0, &copy, nullptr, NCCL_SHRINK_DEFAULT);
    h.failures->addCheck();
    fprintf(stderr, "rank %d: ncclCommShrink excluding nobody returned %d (%s)\n", rank, rc, ncclGetErrorString(rc));
    if (rc == ncclSuccess && copy != nullptr) {
      requireAccelerated(h, copy, n, rank, "shrink excluding nobody");
      OwnedStream stream;
      Harness hc = harnessFor(h, copy, stream.stream);
      checkLamportGrowth(hc, runMixed(hc, 0x5A3), "shrink excluding nobody");
      destroyTimed(h, &copy, false, "ncclCommDestroy(shrink excluding nobody)");
    } else if (rc != ncclInvalidArgument || copy != nullptr) {
      failf(h, "ncclCommShrink excluding nobody: rc %d comm %p (expected ncclInvalidArgument and no comm, or a comm)",
            rc, static_cast<void*>(copy));
    }
    lamport += runMixed(h, 0x5A4);
    checkLamportGrowth(h, lamport, "parent after shrink");
  });
}

TEST(CommKinds, InitRankScalable) {
  const ScalableFn scalable = entryPoint<ScalableFn>("ncclCommInitRankScalable");
  if (scalable == nullptr) GTEST_SKIP() << "the loaded NCCL has no ncclCommInitRankScalable (NCCL 2.23+)";
  LAMPORT_RUN_FORKED(ranks(2, 300), [scalable](Harness& h, RankContext&) {
    ncclUniqueId id;
    if (!shareUniqueId(h, &id)) return;
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = scalable(&comm, h.slots[0].nRanks, h.slots[0].rank, 1, &id, nullptr);
    if (rc != ncclSuccess || comm == nullptr) return failf(h, "ncclCommInitRankScalable(nId=1) returned %d", rc);
    requireAccelerated(h, comm, h.slots[0].nRanks, h.slots[0].rank, "ncclCommInitRankScalable");
    OwnedStream stream;
    Harness hs = harnessFor(h, comm, stream.stream);
    uint64_t lamport = runMixed(hs, 0x5CA1);
    lamport += runMixed(hs, 0x5CA2);
    checkLamportGrowth(hs, lamport, "scalable-init comm");
    destroyTimed(h, &comm, false, "ncclCommDestroy(scalable-init comm)");
  });
}

// ---------------------------------------------------------------- non-blocking communicators

/** For a non-blocking split: the parent until NCCL has finished the split (the child's handle is
 *  written at its end: null until then), then the child until it reports ncclSuccess. */
bool waitNonBlockingChild(Harness& h, ncclComm_t parent, ncclComm_t* child, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const ncclResult_t state = pollAsyncError(parent, kReadySeconds);
    const ncclComm_t c = __atomic_load_n(child, __ATOMIC_ACQUIRE);
    if (state == ncclSuccess && c != nullptr) break;
    if ((state != ncclSuccess && state != ncclInProgress) || secondsSince(start) > kReadySeconds) {
      failf(h, "%s: the parent reports %d (%s) and the child is %p after %.1f s", what, state,
            ncclGetErrorString(state), static_cast<void*>(c), secondsSince(start));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return waitCommReady(h, *child, kReadySeconds, what);
}

TEST(CommKinds, NonBlockingInitSplitAndCalls) {
  LAMPORT_RUN_FORKED(ranks(2, 400), [](Harness& h, RankContext&) {
    const int n = h.slots[0].nRanks, rank = h.slots[0].rank;
    ncclResult_t initRc = ncclInternalError;
    const auto start = std::chrono::steady_clock::now();
    ncclComm_t nb = startNonBlockingInit(h, &initRc);
    if (nb == nullptr) return;
    if (!waitCommReady(h, nb, kReadySeconds, "non-blocking init")) return abortQuietly(&nb);
    fprintf(stderr, "rank %d: non-blocking init returned %d, ready after %.3f s\n", rank, initRc, secondsSince(start));
    requireAccelerated(h, nb, n, rank, "non-blocking comm once ready");
    OwnedStream sn, sc;
    Harness hn = harnessFor(h, nb, sn.stream);
    uint64_t lamportN = 0, lamportC = 0, i = 0;
    for (const CallSpec& s : mixedSpecs()) {
      if (!nonBlockingStep(hn, s, mixSeed(0x0B1, i++), "non-blocking")) return abortQuietly(&nb);
      lamportN += lamportSized(s) ? 1 : 0;
    }
    checkLamportGrowth(hn, lamportN, "non-blocking comm");
    // A split with config NULL inherits non-blocking: poll again; the child is accelerated too.
    ncclComm_t child = nullptr;
    const ncclResult_t rc = ncclCommSplit(nb, 0, rank, &child, nullptr);
    if (!accepted(rc)) {
      failf(h, "ncclCommSplit of a non-blocking comm returned %d (%s)", rc, ncclGetErrorString(rc));
    } else if (waitNonBlockingChild(h, nb, &child, "split of a non-blocking comm")) {
      requireAccelerated(h, child, n, rank, "non-blocking split once ready");
      Harness hc = harnessFor(h, child, sc.stream);
      for (int round = 0; round < 2; ++round) {  // alternating child and parent
        for (const CallSpec& s : mixedSpecs()) {
          if (!nonBlockingStep(hc, s, mixSeed(0x0B2, i++), "nb child") ||
              !nonBlockingStep(hn, s, mixSeed(0x0B3, i++), "nb parent")) {
            abortQuietly(&child);
            return abortQuietly(&nb);
          }
          lamportC += lamportSized(s) ? 1 : 0;
          lamportN += lamportSized(s) ? 1 : 0;
        }
      }
      checkLamportGrowth(hc, lamportC, "non-blocking split");
      checkLamportGrowth(hn, lamportN, "non-blocking comm after its split");
    }
    destroyTimed(h, &child, true, "ncclCommDestroy(non-blocking split)");
    destroyTimed(h, &nb, true, "ncclCommDestroy(non-blocking comm)");
  });
}

TEST(CommKinds, NonBlockingDestroyBeforeReady) {
  LAMPORT_RUN_FORKED(ranks(2, 400), [](Harness& h, RankContext&) {
    const int rank = h.slots[0].rank;
    // Destroy right after the init call, while NCCL and then the plugin's helper thread are still
    // setting it up. Iterations 3 and 4 let rank 1 destroy later than rank 0 (50, 200 ms), so one
    // rank's set-up may already be in its exchange when the other rank's communicator is gone.
    for (int it = 0; it < 5; ++it) {
      ncclResult_t initRc = ncclInternalError;
      ncclComm_t nb = startNonBlockingInit(h, &initRc);
      if (nb == nullptr) return;
      if (it >= 3 && rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(it == 3 ? 50 : 200));
      // NCCL's own rule: ncclCommDestroy of a communicator still in progress returns
      // ncclInvalidArgument (ncclCommEnsureReady); ncclCommAbort is the way out, and must work.
      ncclResult_t rc = ncclInternalError;
      const ncclComm_t c = nb;
      nb = nullptr;
      timedOnThread(h, "ncclCommDestroy right after a non-blocking init", 30, [&] { rc = ncclCommDestroy(c); });
      if (rc == ncclInvalidArgument) {
        timedOnThread(h, "ncclCommAbort of a communicator still in progress", 30, [&] { rc = ncclCommAbort(c); });
      }
      if (rc != ncclSuccess && rc != ncclInProgress) {
        failf(h, "ending a non-blocking comm right after its init returned %d (%s)", rc, ncclGetErrorString(rc));
      }
      h.failures->addCheck();
      if (h.failures->count() > 0) return;
    }
    // The process is still healthy: the blocking parent and a new non-blocking comm work.
    checkLamportGrowth(h, runMixed(h, 0xDE5), "parent after early destroys");
    ncclComm_t nb = startNonBlockingInit(h);
    if (nb == nullptr || !waitCommReady(h, nb, kReadySeconds, "non-blocking init after early destroys")) {
      return abortQuietly(&nb);
    }
    requireAccelerated(h, nb, h.slots[0].nRanks, rank, "non-blocking comm after early destroys");
    OwnedStream sn;
    Harness hn = harnessFor(h, nb, sn.stream);
    uint64_t lamport = 0, i = 0;
    for (const CallSpec& s : mixedSpecs()) {
      if (!nonBlockingStep(hn, s, mixSeed(0xDE6, i++), "after early destroys")) return abortQuietly(&nb);
      lamport += lamportSized(s) ? 1 : 0;
    }
    checkLamportGrowth(hn, lamport, "non-blocking comm after early destroys");
    destroyTimed(h, &nb, true, "ncclCommDestroy(non-blocking comm)");
  });
}

TEST(CommKinds, NonBlockingGroupedInitOneProcess) {
  // nccl-tests -g 2 style: one thread creates both GPUs' non-blocking comms in ONE group.
  const std::string skip = runInOneProcess(300, [](Failures& failures) -> std::string {
    constexpr int n = 2;
    Harness h;
    NoCrossCheck none;  // the ranks' results are compared below, byte for byte
    h.failures = &failures;
    h.cross = &none;
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return failures.add("ncclGetUniqueId failed"), "";
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    std::vector<ncclComm_t> comms(n, nullptr);
    ncclResult_t rc = ncclGroupStart();
    for (int i = 0; i < n; ++i) {
      RankSlot s;
      s.rank = i;
      s.nRanks = n;
      s.device = i;
      if (cudaSetDevice(i) != cudaSuccess ||
          cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess) {
        failures.add("CUDA set-up of GPU %d failed", i);
      }
      const ncclResult_t init = ncclCommInitRankConfig(&comms[i], n, id, i, &config);
      if (!accepted(init)) failures.add("grouped non-blocking ncclCommInitRankConfig(rank %d) returned %d", i, init);
      h.slots.push_back(s);
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (rc != ncclSuccess || !accepted(ended)) failures.add("ncclGroupStart %d / ncclGroupEnd %d", rc, ended);
    for (int i = 0; i < n; ++i) {
      h.slots[i].comm = comms[i];
      if (comms[i] == nullptr || pollAsyncError(comms[i], kReadySeconds) != ncclSuccess) {
        failures.add("rank %d: comm %p never became ready", i, static_cast<void*>(comms[i]));
      }
    }
    std::string skipReason;
    if (failures.count() == 0) {
      h.begin();
      skipReason = h.requireEligible();  // a skip only when the GPUs lack NVLink P2P
    }
    constexpr int kRounds = 6;
    for (int round = 0; failures.count() == 0 && skipReason.empty() && round < kRounds; ++round) {
      uint64_t k = 0;
      for (const CallSpec& s : mixedSpecs()) {
        std::vector<std::unique_ptr<CheckedCall>> row;
        for (RankSlot& slot : h.slots) {
          row.emplace_back(new CheckedCall(s, slot));
          row.back()->stage(mixSeed(0x1F0 + round, k));
        }
        ++k;
        // Ours in one group, then NCCL's own result: one group, or in tuner activation a reduce
        // group and a broadcast group (NCCL may reorder the collectives of one group).
        std::vector<std::pair<bool, ReferencePart>> phases = {{false, ReferencePart::kWhole}};
        if (tunerActivation()) {
          phases.insert(phases.end(), {{true, ReferencePart::kReduce}, {true, ReferencePart::kBroadcast}});
        } else {
          phases.emplace_back(true, ReferencePart::kWhole);
        }
        for (const auto& [reference, part] : phases) {
          rc = reference ? pncclGroupStart() : ncclGroupStart();
          for (RankSlot& slot : h.slots) {
            const ncclResult_t call = reference ? row[slot.index]->issueReference(part) : row[slot.index]->issue(h, slot);
            if (!accepted(call)) failures.add("rank %d: %s returned %d", slot.rank, s.label().c_str(), call);
          }
          const ncclResult_t end = reference ? pncclGroupEnd() : ncclGroupEnd();
          if (rc != ncclSuccess || !accepted(end)) {
            failures.add("%s: group start %d end %d", s.label().c_str(), rc, end);
          }
          for (RankSlot& slot : h.slots) {
            const ncclResult_t state = pollAsyncError(slot.comm, kWaitSeconds);
            const cudaError_t idle = state == ncclSuccess ? pollStream(slot.stream, kWaitSeconds) : cudaErrorNotReady;
            if (state != ncclSuccess || idle != cudaSuccess) {
              failures.add("rank %d: %s: async state %d, stream %s", slot.rank, s.label().c_str(), state,
                           cudaGetErrorString(idle));
            }
          }
        }
        for (RankSlot& slot : h.slots) {
          const std::string problems = row[slot.index]->verify(true);
          failures.addCheck();
          if (!problems.empty()) {
            failures.add("rank %d: %s: %s", slot.rank, row[slot.index]->label().c_str(), problems.c_str());
          }
          if (lamportSized(s) && !row[slot.index]->expectLamport) failures.add("rank %d: not accelerated", slot.rank);
        }
        const std::string diff = firstDifference(row[0]->result(), row[1]->result());
        if (!diff.empty()) failures.add("%s: ranks 0 and 1 differ: %s", s.label().c_str(), diff.c_str());
        if (failures.count() > 0) break;
      }
    }
    if (failures.count() == 0 && skipReason.empty()) {
      // Exact per-path counters; with the per-call check above: every Lamport-sized call ran on Lamport.
      h.checkNoAsyncError("grouped non-blocking");
      h.checkCounters("grouped non-blocking");
    }
    for (RankSlot& slot : h.slots) {
      DeviceGuard guard(slot.device);
      if (slot.comm != nullptr && !accepted(ncclCommDestroy(slot.comm))) {
        failures.add("rank %d: ncclCommDestroy failed", slot.rank);
      }
      if (slot.stream != nullptr) cudaStreamDestroy(slot.stream);
    }
    return skipReason;
  });
  if (!skip.empty()) GTEST_SKIP() << skip;
}

// ---------------------------------------------------------------- revoke

TEST(CommKinds, RevokeAcceleratedComm) {
  const RevokeFn revoke = entryPoint<RevokeFn>("ncclCommRevoke");
  if (revoke == nullptr) GTEST_SKIP() << "the loaded NCCL has no ncclCommRevoke (NCCL 2.28+)";
  LAMPORT_RUN_FORKED(ranks(2, 400), [revoke](Harness& h, RankContext&) {
    OwnedStream stream;
    for (int inFlight = 0; inFlight < 2; ++inFlight) {
      // inFlight 0: revoke after synced Lamport calls; 1: right after 10 calls not yet waited for
      // (the plugin must stop or finish its kernels: the stream must become idle).
      ncclComm_t b = splitAccelerated(h);
      if (b == nullptr) return;
      Harness hb = harnessFor(h, b, stream.stream);
      checkLamportGrowth(hb, runMixed(hb, 0x4E0 + inFlight), "before revoke");
      std::vector<std::unique_ptr<CheckedCall>> pending;
      for (int k = 0; inFlight && k < 10; ++k) {
        pending.emplace_back(new CheckedCall(spec(ncclBfloat16, 4096), hb.slots[0]));
        pending.back()->stage(k);
        pending.back()->issue(hb, hb.slots[0]);
      }
      ncclResult_t rc = ncclInternalError;
      timedOnThread(h, "ncclCommRevoke", 30, [&] { rc = revoke(b, NCCL_REVOKE_DEFAULT); });
      if (!accepted(rc)) failf(h, "ncclCommRevoke returned %d (%s)", rc, ncclGetErrorString(rc));
      double waited = 0;
      const ncclResult_t state = pollAsyncError(b, 30, &waited);
      fprintf(stderr, "rank %d: after ncclCommRevoke the comm reports %d (%s) after %.3f s\n", h.slots[0].rank, state,
              ncclGetErrorString(state), waited);
      if (state == ncclInProgress) failf(h, "ncclCommGetAsyncError still reports ncclInProgress 30 s after revoke");
      if (!waitStreams(h, {stream.stream}, kWaitSeconds, "stream after revoke")) return abortQuietly(&b);
      ncclLamportPath_t path = ncclLamportPathOneShot;
      ncclLamportGetAllReducePath(b, 4096, ncclBfloat16, ncclSum, &path);  // revoked: NCCL's from now on
      if (path != ncclLamportPathNccl) failf(h, "a revoked communicator would still run allreduce on Lamport");
      pending.clear();
      destroyTimed(h, &b, false, "ncclCommDestroy after ncclCommRevoke");
    }
    // A later communicator works and is accelerated; so does the parent.
    ncclComm_t c = splitAccelerated(h);
    if (c == nullptr) return;
    Harness hc = harnessFor(h, c, stream.stream);
    checkLamportGrowth(hc, runMixed(hc, 0x4E5), "new comm after revokes");
    destroyTimed(h, &c, false, "ncclCommDestroy(new comm)");
    checkLamportGrowth(h, runMixed(h, 0x4E6), "parent after revokes");
  });
}

// ---------------------------------------------------------------- several comms, several threads

TEST(CommKinds, ThreeCommsTwoThreadsInterleaved) {
  // CUDA_DEVICE_MAX_CONNECTIONS=32: each stream gets its own hardware queue. With fewer queues two
  // streams may share one, and then the launch order of two threads (which differs between ranks)
  // could put one comm's waiting kernel in front of another comm's: a false dependency that
  // deadlocks any spinning collective, NCCL's own too. Not what this test is about.
  LAMPORT_RUN_FORKED(ranks(2, 400, {{"CUDA_DEVICE_MAX_CONNECTIONS", "32"}}), [](Harness& h, RankContext&) {
    constexpr int kIterations = 200;
    OwnedStream sB, sC1, sC2;
    ncclComm_t b = splitAccelerated(h), c = b ? splitAccelerated(h) : nullptr;
    DestroyAtExit guardB{&b}, guardC{&c};
    if (c == nullptr) return;
    Harness hb = harnessFor(h, b, sB.stream), hc = harnessFor(h, c, sC1.stream);
    // Thread 0 drives A and B, thread 1 drives C on two streams; each comm is driven by one
    // thread only, so every comm sees the same call order on every rank.
    struct Planned {
      Harness* hx;
      cudaStream_t stream;
      std::unique_ptr<CheckedCall> call;
    };
    std::vector<Planned> plan[2];
    uint64_t lamport[3] = {0, 0, 0};
    for (int it = 0; it < kIterations; ++it) {
      for (int j = 0; j < 3; ++j) {
        Harness* hx = j == 0 ? &h : j == 1 ? &hb : &hc;
        const cudaStream_t st = j == 0 ? h.slots[0].stream : j == 1 ? sB.stream : it % 2 ? sC2.stream : sC1.stream;
        RankSlot slot = hx->slots[0];
        slot.stream = st;
        const size_t count = 1 + static_cast<size_t>(it * 131 + j * 977) % 16384;
        const CallSpec s = spec(j == 1 ? ncclFloat32 : ncclBfloat16, count, it % 5 ? ncclSum : ncclAvg);
        plan[j == 2].push_back(Planned{hx, st, std::unique_ptr<CheckedCall>(new CheckedCall(s, slot))});
        if (!plan[j == 2].back().call->setupError().empty()) return failf(h, "cudaMalloc failed");
        plan[j == 2].back().call->stage(mixSeed(0x3C0 + j, it));
        ++lamport[j];
      }
    }
    const std::vector<cudaStream_t> all = {h.slots[0].stream, sB.stream, sC1.stream, sC2.stream};
    if (!waitStreams(h, all, kWaitSeconds, "staging")) return;
    auto drive = [&](int t) {
      cudaSetDevice(h.slots[0].device);
      for (size_t k = 0; k < plan[t].size(); ++k) {
        Planned& p = plan[t][k];
        p.hx->slots[0].stream = p.stream;
        const ncclResult_t rc = p.call->issue(*p.hx, p.hx->slots[0]);
        if (rc != ncclSuccess || !p.call->expectLamport) {
          failf(h, "thread %d call %zu: rc %d, on Lamport %d", t, k, rc, p.call->expectLamport);
        }
        // Wait now and then, so the two threads' calls interleave differently over the run.
        if (k % 20 == 19 && !waitStreams(h, {p.stream}, kWaitSeconds, "a thread's stream")) return;
      }
    };
    std::thread t1(drive, 1);
    drive(0);
    t1.join();
    if (!waitStreams(h, all, kWaitSeconds, "600 interleaved calls")) {
      abortQuietly(&c);
      abortQuietly(&b);
      return abortQuietly(&h.slots[0].comm);
    }
    for (int t = 0; t < 2; ++t) {
      for (size_t k = 0; k < plan[t].size(); k += 10) plan[t][k].call->issueReference();  // every 10th vs NCCL
    }
    if (!waitStreams(h, all, kWaitSeconds, "references")) return;
    for (int t = 0; t < 2; ++t) {
      for (size_t k = 0; k < plan[t].size(); ++k) {
        Planned& p = plan[t][k];
        const std::string label = format("t%d#%zu ", t, k) + p.call->label();
        const std::string problems = p.call->verify(k % 10 == 0);
        h.failures->addCheck();
        if (!problems.empty()) failf(h, "%s: %s", label.c_str(), problems.c_str());
        h.cross->submit(h.slots[0], label, p.call->result(), *h.failures);
      }
    }
    hb.slots[0].stream = sB.stream;
    checkLamportGrowth(h, lamport[0], "comm A");
    checkLamportGrowth(hb, lamport[1], "comm B");
    checkLamportGrowth(hc, lamport[2], "comm C");
    plan[0].clear();
    plan[1].clear();
    destroyTimed(h, &c, false, "ncclCommDestroy(C)");
    destroyTimed(h, &b, false, "ncclCommDestroy(B)");
  });
}

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
