// nccl-lamport-bench: what one rank (one forked process, one GPU) does. Runs in the child
// process only; the parent never touches CUDA or NCCL.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/bench_options.h"
#include "bench/rank_launcher.h"

namespace nccl_lamport::bench {

/** What every rank measures; identical on all ranks (copied into each child by fork). */
struct RankPlan {
  BenchOptions options;
  std::vector<SizeSpec> sizes;
  uint64_t seed = 0;  // run seed of the inputs
};

/**
 * The body given to launchRanks: cudaSetDevice(rank), ncclCommInitRank through the interposed
 * wrapper, then for each size the correctness check (if on) and the timings, written to the
 * rank's RankSlot. Returns 0 on success, 1 on any failure (the reason is in the slot's header and
 * on stderr). A failed rank sets its failed flag so its peers stop at their next wait.
 */
int runRank(RankContext& ctx, const RankPlan& plan);

}  // namespace nccl_lamport::bench
