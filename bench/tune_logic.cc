#include "bench/tune_logic.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "bench/crossover.h"
#include "kernels/lamport_layout.h"  // kLamportVectorBytes: the slot unit the one-shot bound is rounded to

namespace nccl_lamport::bench {

std::string tuneRankProblem(int nRanks) {
  if (nRanks >= 2) return "";
  return "--tune needs 2 or more ranks (this run has " + std::to_string(nRanks) +
         "): one rank always takes NCCL, and the plugin reads a tuning file only for 2 or more";
}

size_t twoShotSweepOneShotBound(size_t oneShotMaxBytes) { return std::max(oneShotMaxBytes, kLamportVectorBytes); }

std::vector<SizeSpec> twoShotSweepSizes(const std::vector<SizeSpec>& sizes, size_t oneShotMaxBytes) {
  // The plugin rounds the one-shot bound up to whole slots; sizes up to it still take the one-shot,
  // and a one-shot row would end the two-shot scan of estimateCrossover at once.
  const size_t bound = (twoShotSweepOneShotBound(oneShotMaxBytes) + kLamportVectorBytes - 1) / kLamportVectorBytes * kLamportVectorBytes;
  std::vector<SizeSpec> above;
  for (const SizeSpec& size : sizes) {
    if (size.bytes > bound) above.push_back(size);
  }
  return above;
}

std::string tuneRowsProblem(const std::vector<Row>& oneShotRows, const std::vector<Row>& twoShotRows) {
  for (const std::vector<Row>* rows : {&oneShotRows, &twoShotRows}) {
    for (const Row& row : *rows) {
      if (!row.ok) {
        return std::string("a check failed at ") + std::to_string(row.bytes) + " bytes in the " +
               (rows == &oneShotRows ? "one-shot" : "two-shot") + " sweep (" + row.check + ")";
      }
    }
  }
  const bool measured = std::any_of(oneShotRows.begin(), oneShotRows.end(),
                                    [](const Row& row) { return row.path == "lamport"; });
  if (!measured) {
    return "no size took the Lamport one-shot (nccl-lamport not active, or the communicator not "
           "eligible: see the header), so nothing was measured";
  }
  return "";
}

std::string tuningCommand(const std::vector<std::string>& argv) {
  // nlohmann-json's dump with the replace handler swaps each invalid UTF-8 sequence for U+FFFD;
  // parsing that back gives the clean string (the tuning file's writer dumps without it).
  const std::string quoted = nlohmann::json(shellJoin(argv)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted).get<std::string>();
}

}  // namespace nccl_lamport::bench
