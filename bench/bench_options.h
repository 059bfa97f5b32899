// nccl-lamport-bench: what one run measures (the parsed command line) and the pure helpers that
// turn option text into values: byte sizes with K/M/G suffixes, the list of message sizes,
// datatype and op names. No CUDA, no NCCL calls: the CPU tests cover all of it.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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
  bool check = true;                     // --check / --no-check
  uint64_t seed = 0;                     // --seed (0 on the command line: pick from the clock)
  double timeoutSeconds = 600.0;         // --timeout: whole run, every rank
  bool verbose = false;                  // --verbose: rank 0 reports progress on stderr
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

/**
 * Parses a byte count: digits, optionally followed by K, M or G (binary: 1K = 1024), optionally
 * followed by "B" or "iB" ("64K", "64KB", "64KiB", "8m" all work). False on anything else,
 * on a negative number or on overflow.
 */
[[nodiscard]] bool parseBytes(const std::string& text, size_t* out);

/** Short label of a byte count: "8", "2K", "16M"; a count that is no whole K/M/G stays in bytes. */
[[nodiscard]] std::string formatBytesShort(size_t bytes);

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
