// Where the Lamport one-shot stops paying, read off one nccl-lamport-bench run: the evidence the
// built-in crossovers of tuner/routing.cc come from (docs/crossover-h200.md; the multi-GPU runs measure
// them at 4 and 8 ranks). Host code only.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "bench/report.h"

namespace nccl_lamport::bench {

/** Index of the timing mode in CrossoverEstimate's arrays. */
enum CrossoverMode : int { kEagerMode = 0, kGraphMode = 1 };

/**
 * For each timing mode, scanning the rows by increasing size (bytes; 0 = no such size):
 *  - fasterUpTo: the largest size up to which every size that took the Lamport path and has both
 *    timings was faster than stock NCCL (speedup > 1, the time of a call being its MAX over ranks);
 *  - firstNotFaster: the first such size where it was not (the scan stops there);
 * and firstRoutedToNccl: the first size the plugin sent to NCCL. Sizes above the crossover in
 * force go to NCCL and cannot be compared, so a run meant to find the crossover raises it first
 * (NCCL_LAMPORT_ONESHOT_MAX_BYTES) and covers sizes past the expected answer.
 */
struct CrossoverEstimate {
  size_t fasterUpTo[2] = {0, 0};
  size_t firstNotFaster[2] = {0, 0};
  size_t firstRoutedToNccl = 0;
};

/** The estimate from rows sorted by size (aggregateRows' order). lamportPath: the Row::path of
 *  the kernel being measured ("lamport" for the one-shot, "lamport-2shot" for the two-shot). */
[[nodiscard]] CrossoverEstimate estimateCrossover(const std::vector<Row>& rows,
                                                  const std::string& lamportPath = "lamport");

/** One "# ..." line for the stdout report. */
[[nodiscard]] std::string formatCrossover(const CrossoverEstimate& estimate);

/** {"eager": {"fasterUpToBytes", "firstNotFasterBytes"}, "graph": {...}, "firstRoutedToNcclBytes"},
 *  null where a size is 0. */
[[nodiscard]] nlohmann::json crossoverJson(const CrossoverEstimate& estimate);

}  // namespace nccl_lamport::bench
