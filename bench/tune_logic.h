// nccl-lamport-bench --tune: the decisions between the sweeps and the tuning file (which sizes
// the two-shot sweep measures, whether the sweeps allow a file at all, the entry written). Host
// code only, no CUDA: tests/unit/test_bench_tune.cc covers it; bench/main.cc runs the sweeps.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/report.h"
#include "tuner/tuning_file.h"

namespace nccl_lamport::bench {

/** Why --tune cannot measure with nRanks ranks, or "" when it can (the plugin reads a tuning
 *  file only for 2 or more ranks, and one rank never takes a Lamport path). */
[[nodiscard]] std::string tuneRankProblem(int nRanks);

/** NCCL_LAMPORT_ONESHOT_MAX_BYTES for the two-shot sweep: the measured one-shot crossover, at
 *  least the one 16-byte slot the set-up always allocates. */
[[nodiscard]] size_t twoShotSweepOneShotBound(size_t oneShotMaxBytes);

/** The sizes of the two-shot sweep: those above the one-shot bound as the plugin applies it
 *  (twoShotSweepOneShotBound rounded up to 16 bytes); smaller ones still take the one-shot. */
[[nodiscard]] std::vector<SizeSpec> twoShotSweepSizes(const std::vector<SizeSpec>& sizes,
                                                      size_t oneShotMaxBytes);

/** Why no tuning file may be written from these sweeps' rows, or "": a failed check in either
 *  sweep, or a one-shot sweep in which no size took the Lamport path (plugin not active, or the
 *  communicator not eligible: nothing was measured, a 0 would be a guess). */
[[nodiscard]] std::string tuneRowsProblem(const std::vector<Row>& oneShotRows,
                                          const std::vector<Row>& twoShotRows);

/** The bench command line as the tuning file's "command" member: shell-quoted, each invalid UTF-8
 *  sequence (a Latin-1 file name) replaced by U+FFFD, since JSON strings are UTF-8. */
[[nodiscard]] std::string tuningCommand(const std::vector<std::string>& argv);

}  // namespace nccl_lamport::bench
