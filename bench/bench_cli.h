// nccl-lamport-bench's command line: the CLI11 definition of every option (its --help is the
// user-facing reference of the benchmark) and the conversion of the option text into BenchOptions.
// No CUDA, no NCCL calls: tests/unit/test_bench_cli.cc runs it on the CPU.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "bench/bench_options.h"

namespace nccl_lamport::bench {

/** Exit statuses of nccl-lamport-bench (listed at the end of --help). */
constexpr int kExitOk = 0;      // every check passed (or --help / --version)
constexpr int kExitFailed = 1;  // a check failed, a rank failed, or a result file could not be written
constexpr int kExitUsage = 2;   // bad options, or no GPU to run on

/**
 * Parses argv (argv[0] is the program name) into *opt. Returns -1 when the run should go on,
 * else the exit status: kExitOk after --help / --version (text on `out`), kExitUsage after a bad
 * option (one line naming it on `err`).
 */
int parseCommandLine(const std::vector<std::string>& argv, BenchOptions* opt, std::ostream& out,
                     std::ostream& err);

/** The --help text (for tests and the README). */
std::string helpText();

}  // namespace nccl_lamport::bench
