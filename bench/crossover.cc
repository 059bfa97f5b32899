#include "bench/crossover.h"

#include <cmath>

namespace nccl_lamport::bench {

namespace {

double speedupOf(const Row& row, int mode) { return mode == kEagerMode ? row.eagerSpeedup : row.graphSpeedup; }

std::string bytesOrDash(size_t bytes) { return bytes == 0 ? "-" : std::to_string(bytes); }

nlohmann::json bytesOrNull(size_t bytes) { return bytes == 0 ? nlohmann::json(nullptr) : nlohmann::json(bytes); }

}  // namespace

CrossoverEstimate estimateCrossover(const std::vector<Row>& rows, const std::string& lamportPath) {
  CrossoverEstimate e;
  bool stopped[2] = {false, false};
  for (const Row& row : rows) {
    if (row.path == "nccl" && e.firstRoutedToNccl == 0) e.firstRoutedToNccl = row.bytes;
    // Past the crossover in force nothing more can be compared; "mixed" rows are broken runs.
    if (row.path != lamportPath || e.firstRoutedToNccl != 0) {
      stopped[0] = stopped[1] = true;
      continue;
    }
    for (int mode : {kEagerMode, kGraphMode}) {
      const double speedup = speedupOf(row, mode);
      if (stopped[mode] || std::isnan(speedup)) continue;
      if (speedup > 1.0) {
        e.fasterUpTo[mode] = row.bytes;
      } else {
        e.firstNotFaster[mode] = row.bytes;
        stopped[mode] = true;
      }
    }
  }
  return e;
}

std::string formatCrossover(const CrossoverEstimate& e) {
  std::string text = "# crossover: one-shot faster than stock NCCL at every size up to " +
                     bytesOrDash(e.fasterUpTo[kGraphMode]) + " bytes (graph), " + bytesOrDash(e.fasterUpTo[kEagerMode]) +
                     " bytes (eager); first size not faster: " + bytesOrDash(e.firstNotFaster[kGraphMode]) + " (graph), " +
                     bytesOrDash(e.firstNotFaster[kEagerMode]) + " (eager)";
  if (e.firstRoutedToNccl != 0) {
    text += "; from " + std::to_string(e.firstRoutedToNccl) +
            " bytes on, calls went to NCCL (the crossover in force: raise NCCL_LAMPORT_ONESHOT_MAX_BYTES to measure past it)";
  }
  return text + "\n";
}

nlohmann::json crossoverJson(const CrossoverEstimate& e) {
  nlohmann::json doc;
  doc["eager"] = {{"fasterUpToBytes", bytesOrNull(e.fasterUpTo[kEagerMode])},
                  {"firstNotFasterBytes", bytesOrNull(e.firstNotFaster[kEagerMode])}};
  doc["graph"] = {{"fasterUpToBytes", bytesOrNull(e.fasterUpTo[kGraphMode])},
                  {"firstNotFasterBytes", bytesOrNull(e.firstNotFaster[kGraphMode])}};
  doc["firstRoutedToNcclBytes"] = bytesOrNull(e.firstRoutedToNccl);
  return doc;
}

}  // namespace nccl_lamport::bench
