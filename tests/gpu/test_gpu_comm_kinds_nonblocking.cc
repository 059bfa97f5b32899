// GPU tests of non-blocking communicators (config.blocking = 0; issue 3, point 2), split from
// test_gpu_comm_kinds.cc, whose file comment describes the checks, the bounded waits and what the
// plugin promises for non-blocking communicators (plugin/comm/deferred_setup.h). 2 forked ranks,
// except NonBlockingGroupedInitOneProcess, which forks ONE process that drives both GPUs.
#include <chrono>
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

/**
 * A split whose config sets maxCTAs, where NCCL writes the child only later: a non-blocking split
 * (at the end of NCCL's job on the parent) and a blocking split inside a group (at the group's
 * end). The cap must reach the child all the same; under tuner activation it waits under the
 * child's variable until the handle is written (plugin/comm/pending_children.h, kNoteOnly), and
 * bounds the grid only (the crossover was agreed inside NCCL's init).
 */
TEST(CommKinds, LateWrittenSplitChildrenKeepTheirConfigsMaxCtas) {
  LAMPORT_RUN_FORKED(ranks(2, 300), [](Harness& h, RankContext&) {
    const int rank = h.slots[0].rank;
    const size_t capped = tunerActivation() ? kTestOneShotMaxBytes : cappedOneShotMaxBytes(3);
    ncclComm_t nb = startNonBlockingInit(h);
    if (nb == nullptr) return;
    if (!waitCommReady(h, nb, kReadySeconds, "non-blocking init")) return abortQuietly(&nb);
    ncclConfig_t nbConfig = NCCL_CONFIG_INITIALIZER;
    nbConfig.blocking = 0;
    nbConfig.maxCTAs = 3;
    ncclComm_t child = nullptr;
    const ncclResult_t rc = ncclCommSplit(nb, 0, rank, &child, &nbConfig);
    if (!accepted(rc)) {
      failf(h, "non-blocking ncclCommSplit with maxCTAs 3 returned %d (%s)", rc, ncclGetErrorString(rc));
    } else if (waitNonBlockingChild(h, nb, &child, "non-blocking split with maxCTAs 3")) {
      checkCtaCap(h, child, capped, 3, "non-blocking split with maxCTAs 3");
    }
    destroyTimed(h, &child, true, "ncclCommDestroy(non-blocking split with maxCTAs 3)");
    destroyTimed(h, &nb, true, "ncclCommDestroy(non-blocking comm)");

    ncclConfig_t groupedConfig = NCCL_CONFIG_INITIALIZER;
    groupedConfig.maxCTAs = 3;
    ncclComm_t grouped = nullptr;
    DestroyAtExit destroyGrouped{&grouped};
    const ncclResult_t started = ncclGroupStart();
    const ncclResult_t split = ncclCommSplit(h.slots[0].comm, 0, rank, &grouped, &groupedConfig);
    const ncclResult_t ended = ncclGroupEnd();
    if (started != ncclSuccess || split != ncclSuccess || ended != ncclSuccess || grouped == nullptr) {
      return failf(h, "grouped ncclCommSplit with maxCTAs 3: start %d, split %d, end %d, child %p", started, split,
                   ended, static_cast<void*>(grouped));
    }
    checkCtaCap(h, grouped, capped, 3, "grouped split with maxCTAs 3");
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

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
