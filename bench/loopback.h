// nccl-lamport-bench --loopback N: N ranks as N streams of one process on one GPU, timing every
// kernel variant of bench/loopback_report.h through the real launch function. See that header.
#pragma once

#include <string>
#include <vector>

#include "bench/bench_options.h"

namespace nccl_lamport::bench {

/**
 * Runs the loopback benchmark with nRanks ranks (2..8) on the first visible GPU; prints the table
 * and writes CSV / JSON as the options ask. Returns the process exit status: 0 = every check
 * passed, 1 = a check failed or a kernel gave up, 2 = it cannot run here (no GPU, bad size).
 */
int runLoopback(const BenchOptions& options, int nRanks, const std::vector<std::string>& argv,
                uint64_t seed, const std::string& driverRelease, const std::string& timestampUtc,
                const std::string& hostname);

}  // namespace nccl_lamport::bench
