// nccl-lamport-bench report: turns the ranks' result slots into rows (times reduced across ranks
// with MAX: a collective is as slow as its slowest rank) and writes them as the
// stdout table, CSV and JSON. Host code only.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/rank_results.h"

namespace nccl_lamport::bench {

/** Facts about the run that the ranks do not measure. */
struct RunInfo {
  std::vector<std::string> argv;
  std::string hostname;
  std::string timestampUtc;   // ISO 8601
  std::string driverRelease;  // kernel module version from /proc/driver/nvidia/version, or ""
  int localGpus = 0;          // GPUs visible on the host
  int nRanks = 0;
  uint64_t seed = 0;
  BenchOptions options;
};

/** One message size, reduced across ranks. Times in us per call, NaN when not measured. */
struct Row {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  size_t bytes = 0;
  size_t count = 0;
  std::string path;            // "lamport", "nccl", or "mixed" when ranks disagree
  double eagerUs[kPathCount] = {kNaN, kNaN, kNaN};  // MAX over ranks, indexed by PathIndex
  double graphUs[kPathCount] = {kNaN, kNaN, kNaN};
  double hostUs[kPathCount] = {kNaN, kNaN, kNaN};
  double eagerSpeedup = kNaN;  // stock time / plugin time (> 1: the plugin is faster)
  double graphSpeedup = kNaN;
  double eagerSymmetricSpeedup = kNaN;  // stock time / NCCL symmetric kernels' time (NaN: n/a)
  double graphSymmetricSpeedup = kNaN;
  double busbwGBs = kNaN;      // plugin path: graph time if measured, else eager
  double algbwGBs = kNaN;
  uint64_t wrong[kPathCount] = {0, 0, 0};  // summed over ranks (kSymmetric: not checked, 0)
  uint64_t maxUlp = 0;                  // max over ranks
  int ranksMeasured = 0;
  bool checked = false;
  bool bitIdentical = true;    // the plugin's output hash is the same on every rank
  bool pathConsistent = true;
  bool repeatMismatch = false;
  bool routeMismatch = false;  // the call's counters disagree with the reported path (a warning)
  std::string firstError;
  std::string check;           // "OK", "-", "12 wrong", "bit-diff across ranks", ...
  bool ok = true;              // false fails the run
};

/** Rows for every size that at least one rank measured. ranks[r] is rank r's slot. */
[[nodiscard]] std::vector<Row> aggregateRows(const std::vector<const RankSlot*>& ranks,
                                             int nSizes);

/** The commit this benchmark was built from (`git describe --always --dirty`, taken at build time
 *  by bench/build_commit.cmake), or "unknown" outside a git checkout. */
[[nodiscard]] const char* buildCommit();
/** "2.28.9" from an NCCL version code (both the old 2.8 and the new encodings). */
[[nodiscard]] std::string ncclVersionString(int code);
/** "13.0" from a CUDA version code (13000). */
[[nodiscard]] std::string cudaVersionString(int code);
/** A time in us with two decimals, "-" for NaN. */
[[nodiscard]] std::string formatUs(double us);

/** The "# ..." header lines: GPU, ranks, versions, plugin and communicator state, settings. */
[[nodiscard]] std::string formatHeader(const RunInfo& info, const std::vector<const RankSlot*>& ranks);
/** The table, one line per row, with its two header lines. */
[[nodiscard]] std::string formatTable(const std::vector<Row>& rows);
/** CSV, one header line then one line per row; unmeasured numbers are empty fields. */
[[nodiscard]] std::string formatCsv(const std::vector<Row>& rows);
/** Everything: run info, options, per-rank environment, rows, and per-rank samples. */
[[nodiscard]] nlohmann::json toJson(const RunInfo& info, const std::vector<const RankSlot*>& ranks,
                                    const std::vector<Row>& rows);

}  // namespace nccl_lamport::bench
