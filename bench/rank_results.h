// nccl-lamport-bench: what each rank writes to its slice of the launcher's shared results area,
// and the few flags ranks read from each other's slices while running (failure, liveness).
//
// Plain data only (the area is an anonymous shared mapping, zeroed by the launcher). The flags
// ranks poll are accessed with __atomic builtins; everything else is written by the owning rank
// and read by the parent after that rank's process has exited.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "bench/bench_options.h"
#include "nccl_lamport.h"

namespace nccl_lamport::bench {

/** Index of the paths in the per-path arrays below: stock NCCL, nccl-lamport, and NCCL's
 *  symmetric kernels (pncclAllReduce on buffers in registered symmetric windows, NCCL >= 2.27). */
enum PathIndex : int { kStock = 0, kPlugin = 1, kSymmetric = 2, kPathCount = 3 };

/** One rank's measurements of one message size. Times: microseconds per call; NaN = not run. */
struct SizeSample {
  uint64_t bytes;
  uint64_t count;
  int32_t measured;           // 1 once every requested phase of this size finished on this rank
  int32_t checked;            // 1 if the correctness phase ran
  int32_t path;               // ncclLamportPath_t that ncclLamportGetAllReducePath reported
  int32_t repeatMismatch;     // 1 if the plugin output changed between the check and the timing
  double eagerUs[kPathCount];  // median over reps of (event time / iters)
  double graphUs[kPathCount];  // median over reps of (event time / (graph calls * replays))
  double hostUs[kPathCount];   // median over reps of (host wall time of the eager launch loop / iters)
  uint64_t wrong[kPathCount];  // elements outside the tolerance
  uint64_t maxUlp;             // plugin vs NCCL, kUlpNaN if a NaN differs
  uint64_t hash[kPathCount];   // FNV-1a of the output bytes of the checked call
  uint64_t lamportCallsDelta;  // ncclLamportCommInfo_t::lamportCalls increase over the checked call
  char firstError[160];        // first wrong element, for the report
};

/** One rank's run: identity, environment, and its state flags. */
struct RankHeader {
  int32_t pid;        // set at start, so peers can tell a crashed rank from a slow one
  int32_t started;    // 1 once the body runs
  int32_t finished;   // 1 when the body returned normally (success or handled failure)
  int32_t failed;     // 1 when the rank gave up; peers stop at their next wait
  int32_t device;
  int32_t cudaDriverVersion;   // cudaDriverGetVersion
  int32_t cudaRuntimeVersion;  // cudaRuntimeGetVersion
  int32_t ncclVersion;         // ncclGetVersion (the real NCCL: the plugin does not wrap it)
  int32_t pluginActive;        // ncclLamportIsActive()
  int32_t commInfoValid;       // 1 if ncclLamportGetCommInfo returned ncclSuccess
  int32_t smMajor;
  int32_t smMinor;
  int32_t sizesDone;           // number of sizes fully measured
  int32_t symmetricAvailable;  // 1 if NCCL's symmetric windows were registered (kSymmetric timed)
  char symmetricWhy[128];      // why not, when symmetricAvailable is 0
  char gpuName[128];
  char busId[32];
  ncclLamportCommInfo_t commInfo;  // right after ncclCommInitRank
  uint64_t lamportCallsTotal;      // counters at the end of the run
  uint64_t ncclCallsTotal;
  char phase[128];   // what the rank was doing last ("size 4096: graph capture (lamport)")
  char error[512];   // why the rank failed; empty if it did not
};

/** A rank's whole slice. */
struct RankSlot {
  RankHeader header;
  SizeSample sizes[kMaxSizes];
};

static_assert(std::is_trivially_copyable_v<RankSlot>, "lives in a raw shared mapping");

}  // namespace nccl_lamport::bench
