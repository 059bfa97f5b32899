// GPU tests of the communicator lifecycle and of stream ordering, one process per GPU (2 forked
// ranks; this gtest process never touches CUDA). Every rank runs with NCCL_LAMPORT_TIMEOUT_MS=20000,
// waits on streams by polling with a deadline, and runs calls that might hang on a second thread
// with a limit, so a hang is a failure with a message (and the launcher kills what still hangs).
//  - TwoStreamsOneComm: calls of one communicator on two streams with no ordering between them
//    (single and grouped); the plugin must order them itself, results stay exact and identical.
//  - AbortWhileAnotherCommIsStuck: ncclCommAbort of one communicator returns (at the latest when
//    NCCL's own device wait ends) while a Lamport kernel of another communicator of the same GPU
//    waits for a peer that never comes, and ncclCommAbort of that one releases its kernel.
//  - FinalizeThenDestroy: ncclCommFinalize and ncclCommDestroy of accelerated communicators
//    succeed; after finalize every call is routed to NCCL.
//  - CreateDestroyCycles: 50 create/use/destroy cycles give back device memory, fds and threads.
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kLamportTimeoutSeconds = 20;  // NCCL_LAMPORT_TIMEOUT_MS below

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

ForkOptions twoRanks(double timeoutSeconds) {
  ForkOptions options;
  options.nRanks = 2;
  options.timeoutSeconds = timeoutSeconds;
  options.env = {{"NCCL_LAMPORT_TIMEOUT_MS", "20000"}};
  return options;
}

/** Records "rank R: <printf text>" for this process's rank. */
void failf(Harness& h, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void failf(Harness& h, const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  h.fail(h.slots[0], buf);
}

/** A non-blocking stream on the current device (the rank's), destroyed with the object. */
struct OwnedStream {
  cudaStream_t stream = nullptr;
  OwnedStream() {
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) stream = nullptr;
  }
  ~OwnedStream() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
};

/** Polls stream until it is idle or `seconds` pass: cudaSuccess, its error, or cudaErrorNotReady. */
cudaError_t pollStream(cudaStream_t stream, double seconds) {
  const Clock::time_point start = Clock::now();
  cudaError_t err = cudaErrorNotReady;
  while ((err = cudaStreamQuery(stream)) == cudaErrorNotReady && secondsSince(start) < seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return err;
}

/** Every stream idle within `seconds` (each); else a failure (a stuck kernel or a CUDA error). */
bool waitStreams(Harness& h, std::initializer_list<cudaStream_t> streams, double seconds, const char* what) {
  for (cudaStream_t stream : streams) {
    const cudaError_t err = pollStream(stream, seconds);
    if (err != cudaSuccess) {
      failf(h, "%s: stream %p: %s", what, static_cast<void*>(stream),
            err == cudaErrorNotReady ? ("still busy after " + std::to_string(seconds) + " s (a kernel is stuck)").c_str()
                                     : cudaGetErrorString(err));
      return false;
    }
  }
  return true;
}

/** Runs fn on a second thread (the rank's device current there) and returns the seconds it took.
 *  Past `limit` a failure is recorded at once, so a rank later killed for a hang still says where it
 *  was, and another with the real duration once fn returns. */
double timedOnThread(Harness& h, const char* what, double limit, const std::function<void()>& fn) {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  const int device = h.slots[0].device;
  const Clock::time_point start = Clock::now();
  std::thread worker([&] {
    cudaSetDevice(device);
    fn();
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    cv.notify_all();
  });
  bool late = false;
  {
    std::unique_lock<std::mutex> lock(mutex);
    late = !cv.wait_for(lock, std::chrono::duration<double>(limit), [&] { return done; });
  }
  if (late) failf(h, "%s has not returned after %.1f s", what, limit);
  worker.join();
  const double seconds = secondsSince(start);
  if (late) failf(h, "%s returned after %.2f s (limit %.1f s)", what, seconds, limit);
  fprintf(stderr, "rank %d: %s took %.3f s\n", h.slots[0].rank, what, seconds);
  return seconds;
}

/** ncclCommSplit of the harness's communicator into a new 2-rank communicator, which must be
 *  accelerated (a failure if not). nullptr (and a failure) if the split fails. */
ncclComm_t splitAccelerated(Harness& h) {
  ncclComm_t child = nullptr;
  const ncclResult_t rc = ncclCommSplit(h.slots[0].comm, 0, h.slots[0].rank, &child, nullptr);
  if (rc != ncclSuccess || child == nullptr) {
    failf(h, "ncclCommSplit returned %d (%s)", rc, ncclGetErrorString(rc));
    return nullptr;
  }
  ncclLamportCommInfo_t info{};
  if (ncclLamportGetCommInfo(child, &info) != ncclSuccess || !info.known || !info.eligible || info.nRanks != 2) {
    failf(h, "the split communicator is not accelerated (known %d eligible %d nRanks %d: %s)", info.known,
          info.eligible, info.nRanks, info.reason);
  }
  return child;
}

/** A copy of h that drives comm on stream (same rank, failure log and cross-rank check). */
Harness harnessFor(const Harness& h, ncclComm_t comm, cudaStream_t stream) {
  Harness other = h;
  other.slots[0].comm = comm;
  other.slots[0].stream = stream;
  other.begin();
  return other;
}

/** Aborts comm (if any) and forgets it; for the way out of a test that already failed. */
void abortQuietly(ncclComm_t* comm) {
  if (*comm != nullptr) ncclCommAbort(*comm);
  *comm = nullptr;
}

// ---------------------------------------------------------------- 1. two streams, one comm

TEST(Lifecycle, TwoStreamsOneComm) {
  LAMPORT_RUN_FORKED(twoRanks(300), [](Harness& h, RankContext&) {
    RankSlot& slot = h.slots[0];
    const cudaStream_t home = slot.stream;
    OwnedStream s1, s2;
    if (s1.stream == nullptr || s2.stream == nullptr) return failf(h, "cudaStreamCreateWithFlags failed");
    // 1000 single calls cycling s1, the legacy default stream (0: a real stream too, which the
    // plugin once took for "no previous call"), s2; then 200 groups of (s1, s2).
    constexpr int kSingle = 1000, kGroups = 200, kCalls = kSingle + 2 * kGroups;
    auto streamFor = [&](int k) -> cudaStream_t {
      if (k >= kSingle) return k % 2 ? s2.stream : s1.stream;
      return k % 3 == 0 ? s1.stream : k % 3 == 1 ? cudaStream_t{nullptr} : s2.stream;
    };
    std::vector<std::unique_ptr<CheckedCall>> calls;
    for (int k = 0; k < kCalls; ++k) {
      CallSpec spec;
      spec.dtype = ncclBfloat16;
      spec.op = ncclSum;
      spec.count = static_cast<size_t>(std::max(1, (1 << (k % 17)) - k % 3));  // 1 .. 65536 elements
      RankSlot on = slot;
      on.stream = streamFor(k);
      calls.emplace_back(new CheckedCall(spec, on));  // own buffers, output poisoned by stage()
      if (!calls.back()->setupError().empty()) return failf(h, "call %d: %s", k, calls.back()->setupError().c_str());
      calls.back()->stage(mixSeed(0x2575, k));
    }
    if (!waitStreams(h, {s1.stream, s2.stream, nullptr}, 60, "staging")) return;

    const Clock::time_point start = Clock::now();
    auto issue = [&](int k) {
      slot.stream = streamFor(k);  // Harness::allReduce issues on slot.stream
      const ncclResult_t rc = calls[k]->issue(h, slot);
      if (rc != ncclSuccess || !calls[k]->expectLamport) {
        failf(h, "call %d (%s): rc %d (%s), expected on the Lamport path: %d", k, calls[k]->label().c_str(), rc,
              ncclGetErrorString(rc), calls[k]->expectLamport);
        return false;
      }
      return true;
    };
    bool ok = true;
    for (int k = 0; ok && k < kSingle; ++k) ok = issue(k);  // no event, no sync in between
    for (int g = 0; ok && g < kGroups; ++g) {
      const ncclResult_t began = ncclGroupStart();
      if (began != ncclSuccess) {
        failf(h, "group %d: ncclGroupStart returned %d", g, began);
        break;
      }
      ok = issue(kSingle + 2 * g) && issue(kSingle + 2 * g + 1);
      const ncclResult_t ended = ncclGroupEnd();
      if (ended != ncclSuccess) {
        failf(h, "group %d: ncclGroupEnd returned %d (%s)", g, ended, ncclGetErrorString(ended));
        ok = false;
      }
    }
    slot.stream = home;
    const bool idle = waitStreams(h, {s1.stream, s2.stream, nullptr}, 90, "1400 calls on three streams");
    const double seconds = secondsSince(start);
    if (!idle) return abortQuietly(&slot.comm);  // releases the stuck kernels; nothing to verify
    if (seconds > kLamportTimeoutSeconds / 2) {
      failf(h, "1400 small allreduces on two streams took %.1f s (a lost round waits %.0f s)", seconds,
            kLamportTimeoutSeconds);
    }
    h.checkNoAsyncError("two streams");
    if (!ok) return;
    for (int k = 0; k < kCalls; ++k) {
      const std::string label = (k < kSingle ? "single#" : "grouped#") + std::to_string(k) + " " + calls[k]->label();
      const std::string problems = calls[k]->verify(false);  // vs the fp64 reference
      h.failures->addCheck();
      if (!problems.empty()) h.fail(slot, label + ": " + problems);
      h.cross->submit(slot, label, calls[k]->result(), *h.failures);  // bit-identical across ranks
    }
    h.checkCounters("two streams");  // all 1400 ran on the Lamport kernel
  });
}

// ---------------------------------------------------------------- 2. abort while another comm is stuck

TEST(Lifecycle, AbortWhileAnotherCommIsStuck) {
  LAMPORT_RUN_FORKED(twoRanks(180), [](Harness& h, RankContext& ctx) {
    RankSlot& slot = h.slots[0];
    // Rank 0's free flag: set when rank 0 is done, whatever way it leaves; rank 1 waits for it.
    uint32_t* rank0Done = &static_cast<SharedReport*>(const_cast<void*>(ctx.resultsOf(0)))->flag;
    struct Release {
      uint32_t* flag;
      ~Release() {
        if (flag != nullptr) __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
      }
    } release{ctx.rank == 0 ? rank0Done : nullptr};
    OwnedStream streamB;
    if (streamB.stream == nullptr) return failf(h, "cudaStreamCreateWithFlags failed");
    ncclComm_t commB = splitAccelerated(h);  // A is the harness's communicator
    if (commB == nullptr) return;
    Harness hb = harnessFor(h, commB, streamB.stream);
    CallSpec spec;
    spec.dtype = ncclBfloat16;
    spec.count = 4096;
    const bool working = runCheckedStep(h, spec, 1, true).empty() && runCheckedStep(hb, spec, 2, true).empty();

    if (ctx.rank == 1) {  // skips rank 0's next call on B, then aborts both once rank 0 is done
      const Clock::time_point start = Clock::now();
      while (__atomic_load_n(rank0Done, __ATOMIC_ACQUIRE) == 0 && secondsSince(start) < 150) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (__atomic_load_n(rank0Done, __ATOMIC_ACQUIRE) == 0) failf(h, "rank 0 never finished");
      for (ncclComm_t* comm : {&commB, &slot.comm}) {
        const ncclResult_t rc = ncclCommAbort(*comm);
        *comm = nullptr;
        if (rc != ncclSuccess) failf(h, "ncclCommAbort returned %d", rc);
      }
      h.failures->addCheck();
      return;
    }

    CheckedCall lonely(spec, hb.slots[0]);
    lonely.stage(3);
    if (!working || !lonely.setupError().empty() || !hb.syncAll("staging")) {
      abortQuietly(&commB);
      return abortQuietly(&slot.comm);
    }
    const Clock::time_point issued = Clock::now();
    const ncclResult_t rc = lonely.issue(hb, hb.slots[0]);  // rank 1 never joins this one
    if (rc != ncclSuccess || !lonely.expectLamport) {
      failf(h, "the call on B must be a Lamport call that returns ncclSuccess; rc %d", rc);
      abortQuietly(&commB);
      return abortQuietly(&slot.comm);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (cudaStreamQuery(streamB.stream) != cudaErrorNotReady) {
      failf(h, "the call on B ended without its peer: nothing was stuck, so the abort of A proves nothing");
    }

    const ncclComm_t commA = slot.comm;
    ncclResult_t abortedA = ncclInternalError;
    // NCCL 2.28.9's own abort of A waits for the device (seen on 2 x H200: it returned only when
    // B's kernel gave up at its timeout), so the bound is B's timeout; the plugin's own part is
    // bounded at 2 s (releaseComm) and must not abort B's kernel (checked below).
    timedOnThread(h, "ncclCommAbort(A) while a kernel of B waits for its peer", kLamportTimeoutSeconds + 5.0,
                  [&] { abortedA = ncclCommAbort(commA); });
    slot.comm = nullptr;
    if (abortedA != ncclSuccess) failf(h, "ncclCommAbort(A) returned %d", abortedA);
    // Aborting A must not touch B either: B's kernel still waits (its own timeout is not yet due).
    const cudaError_t bState = cudaStreamQuery(streamB.stream);
    if (secondsSince(issued) < kLamportTimeoutSeconds - 5 && bState != cudaErrorNotReady) {
      failf(h, "B's waiting kernel ended (%s) when A was aborted, %.1f s after it was issued",
            cudaGetErrorString(bState), secondsSince(issued));
    }

    ncclResult_t abortedB = ncclInternalError;
    timedOnThread(h, "ncclCommAbort(B) (sets B's abort flag, releasing its kernel)", 5.0,
                  [&] { abortedB = ncclCommAbort(commB); });
    commB = nullptr;
    if (abortedB != ncclSuccess) failf(h, "ncclCommAbort(B) returned %d", abortedB);
    waitStreams(h, {streamB.stream}, 5, "B's stream after ncclCommAbort(B)");  // ended cleanly
    h.failures->addCheck();
  });
}

// ---------------------------------------------------------------- 3. finalize, then destroy

TEST(Lifecycle, FinalizeThenDestroy) {
  LAMPORT_RUN_FORKED(twoRanks(240), [](Harness& h, RankContext&) {
    RankSlot& slot = h.slots[0];
    // A (the harness's), C and D: calls, finalize, destroy.
    OwnedStream streamC, streamD;
    if (streamC.stream == nullptr || streamD.stream == nullptr) return failf(h, "cudaStreamCreateWithFlags failed");
    ncclComm_t commC = splitAccelerated(h);
    ncclComm_t commD = commC ? splitAccelerated(h) : nullptr;
    if (commD == nullptr) return abortQuietly(&commC);
    Harness hc = harnessFor(h, commC, streamC.stream), hd = harnessFor(h, commD, streamD.stream);
    Harness* const all[] = {&h, &hc, &hd};
    const char* const names[] = {"A", "C", "D"};
    for (int i = 0; i < 3; ++i) {
      for (size_t count : {size_t{1}, size_t{4097}, size_t{65536}}) {
        CallSpec spec;
        spec.dtype = count % 2 ? ncclBfloat16 : ncclFloat32;
        spec.count = count;
        runCheckedStep(*all[i], spec, mixSeed(0xF1A, i * 16 + count % 7), true);
      }
      all[i]->checkNoAsyncError(names[i]);
      all[i]->checkCounters(names[i]);
    }
    ncclComm_t* const comms[] = {&slot.comm, &commC, &commD};
    for (int i = 0; i < 3; ++i) {  // blocking communicators: ncclSuccess, never ncclInProgress
      ncclResult_t rc = ncclInternalError;
      const ncclComm_t comm = *comms[i];
      const std::string what = std::string("ncclCommFinalize(") + names[i] + ")";
      timedOnThread(h, what.c_str(), 30, [&] { rc = ncclCommFinalize(comm); });
      if (rc != ncclSuccess) failf(h, "%s returned %d (%s)", what.c_str(), rc, ncclGetErrorString(rc));
    }

    // After finalize the communicator is NCCL's alone: our router must send every call there.
    // (No call is issued: on NCCL 2.28.9 a collective on a finalized communicator is undefined;
    // one run faulted with an illegal address inside NCCL's own kernel.)
    for (ncclDataType_t dtype : {ncclFloat32, ncclFloat16, ncclBfloat16}) {
      ncclLamportPath_t path = ncclLamportPathOneShot;
      ncclLamportGetAllReducePath(slot.comm, 1024, dtype, ncclSum, &path);
      if (path != ncclLamportPathNccl) failf(h, "after ncclCommFinalize a call of dtype %d would still run on Lamport", dtype);
    }
    h.failures->addCheck();

    ncclResult_t destroyed[3] = {ncclSuccess, ncclSuccess, ncclSuccess};
    for (int i = 2; i >= 0; --i) {  // children first, then A
      const ncclComm_t comm = *comms[i];
      if (comm == nullptr) continue;
      const std::string what = std::string("ncclCommDestroy(") + names[i] + ") after ncclCommFinalize";
      timedOnThread(h, what.c_str(), 30, [&] { destroyed[i] = ncclCommDestroy(comm); });
      *comms[i] = nullptr;
    }
    if (destroyed[2] != ncclSuccess) failf(h, "ncclCommDestroy(D) after ncclCommFinalize returned %d (%s)",
                                           destroyed[2], ncclGetErrorString(destroyed[2]));
    if (destroyed[1] != ncclSuccess) fprintf(stderr, "rank %d: note: NCCL's twin C: ncclCommDestroy returned %d\n",
                                             slot.rank, destroyed[1]);
    if (destroyed[0] != ncclSuccess && destroyed[0] != destroyed[1]) {
      failf(h, "ncclCommDestroy(A) (finalized, one call, destroyed) returned %d (%s); C, treated alike, gave %d",
            destroyed[0], ncclGetErrorString(destroyed[0]), destroyed[1]);
    }
    h.failures->addCheck();
  });
}

// ---------------------------------------------------------------- 4. create / use / destroy cycles

int countEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] == '.' ? 0 : 1;
  closedir(d);
  return n;  // /proc/self/fd includes the fd of d itself, every time alike
}

struct Resources {
  size_t freeBytes = 0;
  int fds = 0, threads = 0;
};

/** Returns once both ranks got here: a 1-element pncclAllReduce on the harness's communicator
 *  (NCCL's own call, so the plugin's counters do not move), synced. So a rank never measures while
 *  its peer still maps memory of this GPU from a communicator it has not destroyed yet. */
void barrier(Harness& h, float* scratch) {
  const ncclResult_t rc = pncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, h.slots[0].comm, h.slots[0].stream);
  if (rc != ncclSuccess) failf(h, "barrier: pncclAllReduce returned %d", rc);
  waitStreams(h, {h.slots[0].stream}, 60, "barrier");
}

Resources measure(Harness& h, float* scratch) {
  barrier(h, scratch);
  Resources r;
  cudaDeviceSynchronize();
  size_t total = 0;
  if (cudaMemGetInfo(&r.freeBytes, &total) != cudaSuccess) r.freeBytes = 0;
  r.fds = countEntries("/proc/self/fd");
  r.threads = countEntries("/proc/self/task");
  return r;
}

std::string describe(const Resources& r) {
  char buf[96];
  snprintf(buf, sizeof(buf), "free %.1f MiB, %d fds, %d threads", r.freeBytes / 1048576.0, r.fds, r.threads);
  return buf;
}

/** Split a new communicator off the harness's, run 10 checked calls on it, destroy it. */
bool createUseDestroy(Harness& h, int cycle) {
  const int before = h.failures->count();
  ncclComm_t child = splitAccelerated(h);
  if (child == nullptr) return false;
  Harness hc = harnessFor(h, child, h.slots[0].stream);
  const size_t counts[] = {1, 7, 64, 1000, 4097, 8192, 16385, 32768, 65535, 65536};
  for (int i = 0; i < 10; ++i) {
    CallSpec spec;
    spec.dtype = i % 2 ? ncclBfloat16 : ncclFloat32;
    spec.op = i % 3 ? ncclSum : ncclAvg;
    spec.count = counts[i];
    spec.sendOffset = i % 4 == 3 ? 1 : 0;
    runCheckedStep(hc, spec, mixSeed(0xC7C1E + cycle, i), i == 0);  // NCCL reference once per cycle
  }
  hc.checkNoAsyncError("cycle");
  hc.checkCounters("cycle");
  if (hc.slots[0].expectLamport != 10) failf(h, "cycle %d: only %llu of 10 calls on the Lamport path", cycle,
                                              static_cast<unsigned long long>(hc.slots[0].expectLamport));
  const ncclResult_t rc = ncclCommDestroy(child);
  if (rc != ncclSuccess) failf(h, "cycle %d: ncclCommDestroy returned %d (%s)", cycle, rc, ncclGetErrorString(rc));
  return h.failures->count() == before;
}

TEST(Lifecycle, CreateDestroyCycles) {
  LAMPORT_RUN_FORKED(twoRanks(600), [](Harness& h, RankContext&) {
    constexpr int kCycles = 50;
    float* scratch = nullptr;
    if (cudaMalloc(&scratch, sizeof(float)) != cudaSuccess) return failf(h, "cudaMalloc");
    barrier(h, scratch);                    // NCCL connects the parent lazily: before the baseline
    if (!createUseDestroy(h, -1)) return;  // warm-up: NCCL's and CUDA's one-time state
    const Resources base = measure(h, scratch);
    std::string trend = "baseline: " + describe(base);
    const Clock::time_point start = Clock::now();
    for (int cycle = 0; cycle < kCycles; ++cycle) {
      if (!createUseDestroy(h, cycle)) return failf(h, "stopped at cycle %d", cycle);
      if ((cycle + 1) % 10 == 0) trend += "; after " + std::to_string(cycle + 1) + ": " + describe(measure(h, scratch));
    }
    const Resources end = measure(h, scratch);
    fprintf(stderr, "rank %d: %d cycles in %.1f s; %s\n", h.slots[0].rank, kCycles, secondsSince(start), trend.c_str());
    const double lostMiB = (static_cast<double>(base.freeBytes) - static_cast<double>(end.freeBytes)) / 1048576.0;
    if (base.freeBytes == 0 || end.freeBytes == 0 || lostMiB > 64) {
      failf(h, "device memory not given back: %.1f MiB less free after %d cycles (slack 64 MiB); %s", lostMiB,
            kCycles, trend.c_str());
    }
    if (base.fds < 0 || end.fds - base.fds > 2) {
      failf(h, "fds leak: %d -> %d after %d cycles (slack 2); %s", base.fds, end.fds, kCycles, trend.c_str());
    }
    if (base.threads < 0 || end.threads - base.threads > 2) {
      failf(h, "threads leak: %d -> %d after %d cycles (slack 2); %s", base.threads, end.threads, kCycles,
            trend.c_str());
    }
    cudaFree(scratch);
    h.failures->addCheck();
  });
}

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
