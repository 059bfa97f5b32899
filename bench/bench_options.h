// nccl-lamport-bench: what one run measures (the parsed command line) and the pure helpers that
// turn option text into values: the list of message sizes,
// datatype and op names. No CUDA, no NCCL calls: the CPU tests cover all of it.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/byte_size.h"

namespace nccl_lamport::bench {

/** Datatypes the bench measures (the ones nccl-lamport accelerates). */
enum class DType { kBf16, kFp16, kFp32 };

/** Reductions the bench measures. */
enum class ReduceOp { kSum, kAvg };

/** Which timing modes run. */
enum class TimingMode { kEager, kGraph, kBoth };

/** Everything the command line sets. Defaults are the documented defaults of --help. */
struct BenchOptions {
  int gpus = 0;                          // --gpus; 0 = every local GPU
  size_t minBytes = 8;                   // --min-bytes
  size_t maxBytes = size_t{16} << 20;    // --max-bytes
  double stepFactor = 2.0;               // --step-factor
  DType dtype = DType::kBf16;            // --dtype
  ReduceOp op = ReduceOp::kSum;          // --op
  int iters = 100;                       // --iters: eager calls per timed repetition
  int warmup = 20;                       // --warmup: untimed calls before timing
  int reps = 7;                          // --reps: timed repetitions (median taken)
  int graphCalls = 20;                   // --graph-calls: allreduce calls captured in one graph
  int graphReplays = 5;                  // --graph-replays: graph launches per timed repetition
  TimingMode mode = TimingMode::kBoth;   // --mode
  bool check = true;                     // --no-check clears it
  uint64_t seed = 0;                     // --seed (0 on the command line: pick from the clock)
  double timeoutSeconds = 600.0;         // --timeout: whole run, every rank
  bool verbose = false;                  // --verbose: rank 0 prints one line per finished size on stderr
  bool quiet = false;                    // --quiet: no progress line on stderr
  bool symmetric = true;                 // --no-symmetric clears it: NCCL's symmetric kernels column
  std::string tunePath;                  // --tune: measure the crossovers, write them to this file
  std::string csvPath;                   // --csv
  std::string jsonPath;                  // --json
  std::string plotPath;                  // --plot
  int loopback = 0;                      // --loopback N: N ranks as streams on one GPU (0 = off)

  [[nodiscard]] bool eager() const { return mode != TimingMode::kGraph; }
  [[nodiscard]] bool graph() const { return mode != TimingMode::kEager; }
};

/** One message size of the sweep. bytes == count * element size, always. */
struct SizeSpec {
  size_t bytes = 0;
  size_t count = 0;
};

/** The most sizes one run measures (the shared results area is sized for it). */
constexpr int kMaxSizes = 256;

// Byte counts use the knobs' syntax (common/byte_size.h): parseByteSize / formatByteSize.

/**
 * The sweep: minBytes, minBytes*factor, ... up to maxBytes, each rounded down to whole elements
 * (at least one element), duplicates removed. Empty with *error set when the arguments are
 * invalid (min > max, factor <= 1, zero element size, more than kMaxSizes sizes).
 */
[[nodiscard]] std::vector<SizeSpec> makeSizeList(size_t minBytes, size_t maxBytes,
                                                 double factor, size_t elementSize,
                                                 std::string* error);

[[nodiscard]] size_t elementSize(DType dtype);
[[nodiscard]] ncclDataType_t toNccl(DType dtype);
[[nodiscard]] ncclRedOp_t toNccl(ReduceOp op);
/** Canonical names: "bf16", "fp16", "fp32"; "sum", "avg"; "eager", "graph", "both". */
[[nodiscard]] const char* name(DType dtype);
[[nodiscard]] const char* name(ReduceOp op);
[[nodiscard]] const char* name(TimingMode mode);
/** Accepts the canonical names and the usual aliases (bfloat16, half, float16, float, float32). */
[[nodiscard]] bool parseDType(const std::string& text, DType* out);
[[nodiscard]] bool parseReduceOp(const std::string& text, ReduceOp* out);
[[nodiscard]] bool parseTimingMode(const std::string& text, TimingMode* out);

/** argv joined into one line a POSIX shell would split back the same way. */
[[nodiscard]] std::string shellJoin(const std::vector<std::string>& argv);

}  // namespace nccl_lamport::bench
