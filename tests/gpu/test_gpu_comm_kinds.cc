// GPU tests of the kinds of communicator an application can create (issue 3, point 2): splits
// with NCCL_SPLIT_NOCOLOR and one-rank colors, splits with reordered ranks, a split inside a
// group, ncclCommShrink, ncclCommInitRankScalable, config.maxCTAs (and splits that inherit it),
// non-blocking communicators (config.blocking = 0;
// their tests are in test_gpu_comm_kinds_nonblocking.cc, the same executable; shared helpers in
// comm_kinds_support.h), ncclCommRevoke, and several communicators driven from several threads.
// 2 forked ranks, one process per GPU (this gtest process never touches CUDA), except
// NonBlockingGroupedInitOneProcess, which forks ONE process that drives both GPUs.
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
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/comm_kinds_support.h"
#include "tuner/routing.h"

namespace nccl_lamport {
namespace gputest {
namespace {

using namespace comm_kinds;  // NOLINT(build/namespaces): the suite's own helpers

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

TEST(CommKinds, SplitInsideAGroup) {
  // A blocking split inside ncclGroupStart/End, as a thread driving several GPUs must make it: NCCL
  // writes the child only at the outermost ncclGroupEnd, which has to set it up like a
  // communicator initialised in a group (before session 14's fix it stayed on NCCL).
  LAMPORT_RUN_FORKED(ranks(2, 300), [](Harness& h, RankContext&) {
    const int n = h.slots[0].nRanks, rank = h.slots[0].rank;
    ncclComm_t child = nullptr;
    DestroyAtExit guard{&child};
    ncclGroupStart();
    const ncclResult_t rc = ncclCommSplit(h.slots[0].comm, 0, rank, &child, nullptr);
    const ncclResult_t end = ncclGroupEnd();
    h.failures->addCheck();
    if (rc != ncclSuccess || end != ncclSuccess || child == nullptr) {
      return failf(h, "split inside a group: ncclCommSplit %d, ncclGroupEnd %d, child %p", rc, end,
                   static_cast<void*>(child));
    }
    requireAccelerated(h, child, n, rank, "split inside a group");
    OwnedStream stream;
    Harness hc = harnessFor(h, child, stream.stream);
    checkLamportGrowth(hc, runMixed(hc, 0x6A01), "child split inside a group");
    checkLamportGrowth(h, runMixed(h, 0x6A02), "the parent after a split inside a group");
    destroyTimed(h, &child, false, "ncclCommDestroy(child split inside a group)");
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

// ---------------------------------------------------------------- CTA caps

/** Checked calls on comm at 1 element, at its crossover (the longest grid-strided loop a capped
 *  grid runs) and one element past it (NCCL); the counters must follow the harness's paths. */
void runAroundCrossover(Harness& h, ncclComm_t comm, size_t crossoverBytes, uint64_t seed, const char* what) {
  OwnedStream stream;
  Harness hx = harnessFor(h, comm, stream.stream);
  const size_t atCrossover = crossoverBytes / elementSize(ncclBfloat16);
  uint64_t i = 0;
  for (const CallSpec& s : {spec(ncclBfloat16, 1), spec(ncclBfloat16, atCrossover), spec(ncclFloat32, crossoverBytes / 4, ncclAvg),
                            spec(ncclBfloat16, atCrossover + 1)}) {
    runCheckedStep(hx, s, mixSeed(seed, i++), true);
  }
  hx.checkNoAsyncError(what);
  hx.checkCounters(what);
}

/** A blocking communicator of h's ranks made by ncclCommInitRankConfig with config.maxCTAs =
 *  maxCtas; nullptr (and a failure) if NCCL refused. */
ncclComm_t initWithMaxCtas(Harness& h, int maxCtas) {
  ncclUniqueId id;
  if (!shareUniqueId(h, &id)) return nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.maxCTAs = maxCtas;
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, h.slots[0].nRanks, id, h.slots[0].rank, &config);
  if (rc != ncclSuccess || comm == nullptr) {
    failf(h, "ncclCommInitRankConfig(maxCTAs %d) returned %d", maxCtas, rc);
    return nullptr;
  }
  return comm;
}

/**
 * config.maxCTAs (NCCL's cap on the blocks of its kernels, which users set to keep SMs free):
 * a communicator created with maxCTAs = 3 launches at most 3 blocks, and its crossover shrinks to
 * what 3 blocks carry (cappedOneShotMaxBytes, tuner/routing.h); calls up to it are correct. A
 * split without a config inherits the cap, as NCCL copies the parent's config; one with a config
 * that leaves maxCTAs unset does not. Before, the cap was ignored: the crossover stayed at the
 * suite's 256 KiB and the grid spread over every SM. The cap shows in the communicator's reason;
 * the kernel tests cover capped grids (test_gpu_kernel.cu).
 */
TEST(CommKinds, ConfigMaxCtasCapsTheLaunchesAndConfigLessSplitsInheritIt) {
  LAMPORT_RUN_FORKED(ranks(2, 300), [](Harness& h, RankContext&) {
    ncclComm_t comm = initWithMaxCtas(h, 3);
    DestroyAtExit destroyComm{&comm};
    if (comm == nullptr) return;
    // Tuner activation sets the communicator up inside NCCL's init, where the config is not seen:
    // the cap then bounds the grid only (at the first call), and the crossover stays.
    const size_t capped = tunerActivation() ? kTestOneShotMaxBytes : cappedOneShotMaxBytes(3);
    checkCtaCap(h, comm, capped, 3, "maxCTAs 3");
    runAroundCrossover(h, comm, capped, 0xC7A0, "maxCTAs 3");

    OwnedStream stream;
    Harness hc = harnessFor(h, comm, stream.stream);
    ncclComm_t inherited = splitAccelerated(hc);
    DestroyAtExit destroyInherited{&inherited};
    ncclConfig_t childConfig = NCCL_CONFIG_INITIALIZER;
    ncclComm_t configured = splitAccelerated(hc, -1, &childConfig);
    DestroyAtExit destroyConfigured{&configured};
    if (inherited == nullptr || configured == nullptr) return;
    checkCtaCap(h, inherited, capped, 3, "split of the maxCTAs 3 comm without a config");
    checkCtaCap(h, configured, kTestOneShotMaxBytes, 0, "split of the maxCTAs 3 comm with a default config");
    runAroundCrossover(h, inherited, capped, 0xC7A1, "split without a config");
  });
}

/** NCCL_MAX_CTAS replaces every config's maxCTAs (NCCL 2.28 src/init.cc), for our launches too:
 *  the suite's own communicator and one created with config.maxCTAs = 3 both get 2 blocks. */
TEST(CommKinds, NcclMaxCtasReplacesEveryConfigsCap) {
  LAMPORT_RUN_FORKED(ranks(2, 300, {{"NCCL_MAX_CTAS", "2"}}), [](Harness& h, RankContext&) {
    const size_t capped = cappedOneShotMaxBytes(2);
    checkCtaCap(h, h.slots[0].comm, capped, 2, "the suite's communicator under NCCL_MAX_CTAS=2");
    runAroundCrossover(h, h.slots[0].comm, capped, 0xC7A2, "NCCL_MAX_CTAS=2");  // counted there
    h.begin();  // the end-of-test counter check then covers only what follows (nothing)
    ncclComm_t comm = initWithMaxCtas(h, 3);
    DestroyAtExit destroyComm{&comm};
    if (comm == nullptr) return;
    checkCtaCap(h, comm, capped, 2, "maxCTAs 3 under NCCL_MAX_CTAS=2");
  });
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
