// Shared code of the GPU correctness suite (SPEC 7): inputs, fp64 reference, tolerances, one
// checked allreduce call, the per-pattern "harness" that issues a step on every rank it drives,
// the scenarios every launch pattern runs, and the fork-per-rank runner.
//
// Nothing here uses gtest assertions except runForked (the parent side): scenarios run inside
// forked children and worker threads too, so they record failures in a Failures log that the
// test body turns into an EXPECT with the full text.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/rank_launcher.h"
#include "include/nccl_lamport.h"
#include "tests/gpu/activation_mode.h"

namespace nccl_lamport {
namespace gputest {

/** Crossover the suite sets through NCCL_LAMPORT_ONESHOT_MAX_BYTES, so "past it" is cheap. */
constexpr size_t kTestOneShotMaxBytes = size_t{256} << 10;

/** Sets the knobs every GPU test process runs with (before its first NCCL call):
 *  NCCL_LAMPORT_ONESHOT_MAX_BYTES=256K, NCCL_LAMPORT_TIMEOUT_MS=60000 (a lost round becomes an
 *  error, not a 10-minute hang), NCCL_NVLS_ENABLE=0 unless already set. */
void setTestEnvironment();

// ---------------------------------------------------------------- datatypes and host values

size_t elementSize(ncclDataType_t dtype);  // fp32/fp16/bf16, else 0

/** Deterministic generator for test data (splitmix64): the same seed gives the same inputs on
 *  every rank, so any rank can rebuild any rank's input. */
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

/** printf into a std::string (test messages). */
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/** Makes `device` current for a scope, then restores the previous one. */
struct DeviceGuard {
  int previous = -1;
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous) == cudaSuccess && previous != device) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous >= 0) cudaSetDevice(previous);
  }
};

const char* dtypeName(ncclDataType_t dtype);
const char* opName(ncclRedOp_t op);
uint16_t floatToHalfBits(float value);  // round to nearest even, subnormals, Inf/NaN
float halfBitsToFloat(uint16_t bits);
uint16_t floatToBf16Bits(float value);  // round to nearest even
float bf16BitsToFloat(uint16_t bits);
/** Element i of a dtype buffer as a double. */
double loadValue(ncclDataType_t dtype, const uint8_t* data, size_t i);
/** A double rounded to dtype and back (what the dtype can represent). */
double roundToDtype(ncclDataType_t dtype, double value);
/** One unit in the last place of dtype at magnitude m (subnormal spacing near zero). */
double ulpOf(ncclDataType_t dtype, double m);
double minNormalOf(ncclDataType_t dtype);
uint64_t fnv1a64(const void* data, size_t bytes);
uint64_t mixSeed(uint64_t a, uint64_t b);  // splitmix-style, for per-call seeds

// ---------------------------------------------------------------- failures

/** Thread-safe failure log: the first lines verbatim, then a count. */
class Failures {
 public:
  void add(const char* format, ...) __attribute__((format(printf, 2, 3)));
  void addCheck() { std::lock_guard<std::mutex> lock(mutex_); ++checks_; }
  int count() const { std::lock_guard<std::mutex> lock(mutex_); return count_; }
  int checks() const { std::lock_guard<std::mutex> lock(mutex_); return checks_; }
  std::string text() const;
  /** Every change is also copied (NUL-terminated, truncated) to buf: a forked rank that is later
   *  killed still leaves its story in the shared results. */
  void mirrorTo(char* buf, size_t bytes);

 private:
  void mirrorLocked();
  mutable std::mutex mutex_;
  std::string text_;
  int count_ = 0, shown_ = 0, checks_ = 0;
  char* mirror_ = nullptr;
  size_t mirrorBytes_ = 0;
};

// ---------------------------------------------------------------- NCCL's own result

/** Which part of ncclOwnAllReduce to issue. Tuner activation needs two collectives, and NCCL may
 *  reorder or overlap the collectives of one group: a grouped reference issues kReduce for every
 *  rank in one group, then kBroadcast in the next (Harness::referenceStep). Ungrouped: kWhole. */
enum class ReferencePart { kWhole, kReduce, kBroadcast };

/**
 * NCCL's own allreduce of (sendbuff, count, datatype, op) into recvbuff on comm and stream: the
 * suite's reference, never reaching nccl-lamport's Lamport path, in either build
 * (tests/gpu/activation_mode.h):
 *  - linked / LD_PRELOAD: pncclAllReduce, NCCL's profiling alias, which the interposer does not wrap;
 *  - tuner activation: pncclAllReduce is the same function as ncclAllReduce inside libnccl and its
 *    entry is hooked, so it would run ours. There: ncclReduce to root 0, then ncclBroadcast from
 *    root 0 on the same stream (collectives the plugin never takes). That is NCCL's arithmetic
 *    with another summation order than its allreduce, which compare()'s NCCL bound covers (it
 *    never asks for bit-identity with NCCL).
 * On a non-blocking communicator an ncclInProgress of the reduce is waited out (bounded) before
 * the broadcast. Returns the first error, or the last call's result.
 */
ncclResult_t ncclOwnAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                              ReferencePart part = ReferencePart::kWhole);

// ---------------------------------------------------------------- ranks and the harness

/** One rank driven by this process or thread. */
struct RankSlot {
  int index = 0;  // position in Harness::slots
  int rank = 0, nRanks = 0, device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  ncclLamportCommInfo_t base{};  // counters when the harness began
  uint64_t expectLamport = 0, expectNccl = 0;  // allreduce calls issued per expected path
};

/** How results of one call are proven bit-identical across ranks. */
class CrossRankCheck {
 public:
  virtual ~CrossRankCheck() = default;
  virtual void submit(const RankSlot& slot, const std::string& label,
                      const std::vector<uint8_t>& result, Failures& failures) = 0;
};

/** "" when a and b are equal, else where they first differ. */
std::string firstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

/** Which group calls wrap one step: none (one ungrouped call per rank), or (p)ncclGroupStart/End
 *  around the calls of every rank this caller drives (nccl-tests -g N, or per thread). */
enum class Grouping { kNone, kGrouped };

class Harness {
 public:
  std::vector<RankSlot> slots;
  Grouping grouping = Grouping::kNone;
  bool wrongCurrentDevice = false;  // issue with another GPU current (SPEC 5: must not matter)
  cudaStreamCaptureMode captureMode = cudaStreamCaptureModeGlobal;
  CrossRankCheck* cross = nullptr;
  Failures* failures = nullptr;
  bool active = true;  // ncclLamportIsActive() when begin() ran

  /** Snapshots every slot's counters; call once the communicators exist. */
  void begin();
  /** "" when every communicator is eligible. Otherwise a skip reason when the GPUs lack NVLink P2P
   *  (so ineligibility is right), or "" plus a recorded failure when they have it. */
  std::string requireEligible();
  /** Path the plugin must take for this call (from the comm's agreed state and table). */
  ncclLamportPath_t expectedPath(const RankSlot& slot, size_t count, ncclDataType_t dtype,
                                 ncclRedOp_t op) const;
  /** ncclAllReduce through the plugin; checks ncclLamportGetAllReducePath first and counts the
   *  call towards the expected path. */
  ncclResult_t allReduce(RankSlot& slot, const void* send, void* recv, size_t count,
                         ncclDataType_t dtype, ncclRedOp_t op);
  /** Runs fn for every slot as one step, grouped as configured; reference=true uses pnccl group
   *  calls (fn must then issue NCCL's own result, through referenceStep). False (and a failure)
   *  on any error. */
  bool step(bool reference, const std::function<ncclResult_t(RankSlot&)>& fn, const char* what);
  /** NCCL's reference for every slot (fn issues ncclOwnAllReduce with the part it is given): one
   *  step in the linked build; in tuner activation a kReduce step, then a kBroadcast step. */
  bool referenceStep(const std::function<ncclResult_t(RankSlot&, ReferencePart)>& fn, const char* what);
  bool syncAll(const char* what);
  /** ncclCommGetAsyncError must report ncclSuccess on every slot. */
  void checkNoAsyncError(const char* what);
  /** lamportCalls / ncclCalls grew by exactly what was issued since begin(). */
  void checkCounters(const char* what);
  void fail(const RankSlot& slot, const std::string& text);
};

// ---------------------------------------------------------------- one checked call

enum class InputKind { kRandom, kSpecial };

struct CallSpec {
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  size_t count = 1;
  size_t sendOffset = 0;  // elements past a 256-byte aligned base (NCCL needs element alignment)
  size_t recvOffset = 0;
  bool inPlace = false;
  InputKind input = InputKind::kRandom;
  unsigned specialShift = 0;  // rotates the special-value pattern
  std::string label() const;
};

/** Rank `rank`'s input for (spec, seed): a pure function, so every rank can build the reference. */
void generateInput(const CallSpec& spec, uint64_t seed, int rank, int nRanks,
                   std::vector<uint8_t>* out);

/**
 * One allreduce call on one rank with its own device buffers: 256-byte guards around every region,
 * outputs poisoned with 0xFF, a private copy of the input for the NCCL reference (ncclOwnAllReduce on
 * the same comm), the fp64 reference of every rank's input.
 *
 * An element passes when: reference NaN -> result NaN (and not the all-ones poison); reference
 * rounding to +-Inf -> exactly that Inf; otherwise finite and within tol of the reference (sign of
 * zero ignored: the plugin writes -0.0 as +0.0). With S = sum over ranks of |x| (S / n for avg):
 *   ours vs fp64:  tol = 1 ulp(dtype, |ref|) + n * 2^-24 * S
 *   NCCL vs fp64:  that + n * ulp(dtype, S) + n * min normal (NCCL rounds every step in the
 *                  dtype and may flush subnormals; a failure here is a harness/NCCL problem)
 *   ours vs NCCL:  the sum of both bounds.
 * Also checked: guard bytes untouched, sendbuff unchanged by an out-of-place call.
 */
class CheckedCall {
 public:
  CheckedCall(const CallSpec& spec, const RankSlot& slot);
  ~CheckedCall();
  CheckedCall(const CheckedCall&) = delete;
  CheckedCall& operator=(const CheckedCall&) = delete;

  const std::string& setupError() const { return setupError_; }
  /** Fresh inputs for seed: host generation, async upload, poisoning (on the slot's stream). */
  void stage(uint64_t seed);
  ncclResult_t issue(Harness& h, RankSlot& slot);  // ncclAllReduce (the plugin)
  /** NCCL's own result into the private copy (ncclOwnAllReduce). */
  ncclResult_t issueReference(ReferencePart part = ReferencePart::kWhole);
  /** After the stream is synced: "" or what is wrong (vs fp64, vs NCCL, guards, input). */
  std::string verify(bool withReference);
  const std::vector<uint8_t>& result() const { return result_; }
  std::string label() const;
  bool expectLamport = false;  // set by issue()

 private:
  char* region(char* base, size_t offset) const { return base + 256 + offset * elem_; }
  enum class Against { kOursVsFp64, kNcclVsFp64, kOursVsNccl };
  std::string compare(const uint8_t* got, const uint8_t* nccl, Against against) const;

  CallSpec spec_;
  int rank_, nRanks_, device_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  uint64_t seed_ = 0;
  size_t elem_, bytes_, sendAlloc_, recvAlloc_;
  char *send_ = nullptr, *recv_ = nullptr, *refIn_ = nullptr, *refOut_ = nullptr;
  std::vector<uint8_t> input_, result_;
  std::vector<double> ref_, sumAbs_;
  std::string setupError_;
};

/** The helper of SPEC 7: runs spec on every slot (plugin, then NCCL reference), syncs, verifies,
 *  compares across ranks. Returns the failure description ("" when all is well); failures are
 *  also recorded in h.failures. */
std::string runCheckedStep(Harness& h, const CallSpec& spec, uint64_t seed, bool withReference);

// ---------------------------------------------------------------- scenarios (every pattern)

/** Comm info, eligibility, the path at 1, c, c+1 elements (c = crossover) and for unsupported
 *  types/ops/count 0, with real calls at both sides of the crossover. */
void scenarioCommInfoAndRouting(Harness& h);
/** Sum and avg of dtype at counts from 1 to past the crossover, odd counts, unaligned pointers,
 *  in-place and out-of-place. */
void scenarioSweep(Harness& h, ncclDataType_t dtype);
/** -0.0, NaN, +-Inf, subnormals (including +0/-0 pairs that form the sentinel word). */
void scenarioSpecialValues(Harness& h);
/** Messages of 1 to 6 MB (sum and avg, every dtype, aligned, misaligned and in place), for a
 *  crossover raised to 16 MB: at 2 ranks on an H200 the one-shot runs its grid-strided stash kernel
 *  there (the single pass holds at most about 946 KB; kernels/lamport_allreduce.h). */
void scenarioLargeMessages(Harness& h);
/** `calls` back-to-back calls of varying size, dtype and op without syncing; every 10th checked. */
void scenarioBackToBack(Harness& h, int calls);
/** Capture 10 calls of different sizes, replay `replays` times with new inputs, check 4 of them
 *  after every replay. */
void scenarioCudaGraph(Harness& h, int replays);

// ---------------------------------------------------------------- one process per GPU

struct ForkOptions {
  int nRanks = 0;  // 0: every visible GPU
  double timeoutSeconds = 300;
  std::vector<std::pair<std::string, std::string>> env;  // set in each rank before NCCL starts
  bool requireEligible = true;
};

/** Options for `nRanks` forked ranks (0: every visible GPU), killed after `timeoutSeconds`;
 *  `lamportTimeoutMs` > 0 also sets NCCL_LAMPORT_TIMEOUT_MS in each rank (a stuck kernel then
 *  fails the test instead of hanging it until the launcher's kill). */
ForkOptions forkRanks(int nRanks, double timeoutSeconds, std::vector<std::pair<std::string, std::string>> env = {},
                      int lamportTimeoutMs = 0);

/** Shared by a forked rank and the parent (one per rank in the launcher's results area). */
struct SharedReport {
  uint32_t state;  // 0 running, 1 done, 2 skipped
  uint32_t checks, failures, nHashes, hashOverflow;
  uint32_t flag;  // free cross-process flag for a scenario (__atomic_* only)
  char text[8192];
  struct Entry {
    uint64_t hash;
    char label[56];
  } hashes[4096];
};

using RankScenario = std::function<void(Harness&, RankContext&)>;

/** Forks one process per rank (parent never touches CUDA), each inits its comm with
 *  ncclCommInitRank and runs scenario; records gtest failures for bad exits, failures, missing
 *  checks and any hash that differs between ranks. Returns a skip reason, or "". */
std::string runForked(const ForkOptions& options, const RankScenario& scenario);

#define LAMPORT_RUN_FORKED(options, ...)                                      \
  do {                                                                             \
    const std::string lamportSkip_ = ::nccl_lamport::gputest::runForked(options, __VA_ARGS__); \
    if (!lamportSkip_.empty()) GTEST_SKIP() << lamportSkip_;                       \
  } while (0)

/** Aborts the process with a message if a test outlives its budget (in-process patterns, where a
 *  lost rank would otherwise hang the test until ctest kills it without a word). */
class Watchdog {
 public:
  Watchdog(double seconds, std::string what, const Failures* failures);
  ~Watchdog();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::unique_ptr<std::thread> thread_;
};

/** cudaGetDeviceCount in this process (in-process patterns only); 0 without a driver. */
int inProcessGpuCount();

// ---------------------------------------------------------------- bounded waits, extra communicators
// For tests that drive several communicators, non-blocking ones, or calls that might never end:
// every wait has a deadline and a late one is a failure that says what was stuck.

/** Seconds since start (steady clock). */
double secondsSince(std::chrono::steady_clock::time_point start);

/** Records "rank R: <printf text>" against h.slots[0] (the rank a forked process drives). */
void failf(Harness& h, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/** A non-blocking stream on the current device, destroyed with the object (nullptr if creation failed). */
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
cudaError_t pollStream(cudaStream_t stream, double seconds);

/** Every stream idle within `seconds` (each); else a failure naming it (a stuck kernel or a CUDA error). */
bool waitStreams(Harness& h, const std::vector<cudaStream_t>& streams, double seconds, const char* what);

/** Runs fn on a second thread (h.slots[0]'s device current there) and returns the seconds it took.
 *  Past `limit` a failure is recorded at once, so a rank later killed for a hang still says where it
 *  was, and another with the real duration once fn returns. */
double timedOnThread(Harness& h, const char* what, double limit, const std::function<void()>& fn);

/** ncclCommSplit of h's communicator (color 0; key < 0 means the rank, so the order is kept) into
 *  a communicator that must be accelerated (a failure if not). nullptr (and a failure) if the split
 *  fails. */
ncclComm_t splitAccelerated(Harness& h, int key = -1, ncclConfig_t* config = nullptr);

/** A copy of h that drives comm on stream (same failure log and cross-rank check); rank and nRanks
 *  are the communicator's own (ncclCommUserRank / ncclCommCount); counters snapshotted. */
Harness harnessFor(const Harness& h, ncclComm_t comm, cudaStream_t stream);

/** Aborts *comm (if any) and sets it to nullptr; for the way out of a test that already failed. */
void abortQuietly(ncclComm_t* comm);

/** Polls ncclCommGetAsyncError(comm) until it stops reporting ncclInProgress or `seconds` pass.
 *  Returns the last state (ncclInProgress when time ran out, the call's own error if it failed);
 *  *waited gets the seconds spent. */
ncclResult_t pollAsyncError(ncclComm_t comm, double seconds, double* waited = nullptr);

/** pollAsyncError, and a failure naming `what` unless the state became ncclSuccess. */
bool waitCommReady(Harness& h, ncclComm_t comm, double seconds, const char* what);

/** Rank 0 makes a new ncclUniqueId and every rank of h's (blocking, ready) communicator receives
 *  it through NCCL's own broadcast (pncclBroadcast: the plugin plays no part, in either build). False and a failure
 *  if any step fails (every rank learns of a failure on rank 0). */
bool shareUniqueId(Harness& h, ncclUniqueId* id);

/** Checks nothing: for calls on communicators other ranks are not part of (one-rank splits), whose
 *  results must not enter the cross-rank comparison. */
class NoCrossCheck : public CrossRankCheck {
 public:
  void submit(const RankSlot&, const std::string&, const std::vector<uint8_t>&, Failures&) override {}
};

/** ncclLamportGetCommInfo(comm) now (all zero if the call fails). */
ncclLamportCommInfo_t commInfo(ncclComm_t comm);

/** Fails unless comm is accelerated (known, eligible, a workspace) with nRanks ranks and, when
 *  rank >= 0, with that rank. */
void requireAccelerated(Harness& h, ncclComm_t comm, int nRanks, int rank, const char* what);

/** Acceleration shown by the counters: hx's communicator ran exactly `expected` (> 0) allreduces
 *  on Lamport since hx.begin(); also Harness::checkCounters and checkNoAsyncError. Prints both
 *  counters' growth. */
void checkLamportGrowth(Harness& hx, uint64_t expected, const char* what);

/** Runs body in ONE forked process that drives every GPU itself (a gtest process whose other tests
 *  fork ranks must not initialise CUDA). body returns a skip reason or ""; its Failures come back
 *  through shared memory and become a gtest failure here, as do a bad exit, a timeout (the process
 *  is killed after timeoutSeconds) and a run without checks. Returns the skip reason or "". */
std::string runInOneProcess(double timeoutSeconds, const std::function<std::string(Failures&)>& body);

}  // namespace gputest
}  // namespace nccl_lamport
