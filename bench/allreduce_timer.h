// nccl-lamport-bench timing: eager and CUDA-graph timing of one allreduce path at one size, and
// the A/B pairs that alternate the two paths repetition by repetition (same process, comm,
// stream and buffers), so slow drift of clocks or temperature hits both columns alike.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>

#include "bench/cuda_util.h"
#include "bench/rank_results.h"
#include "bench/rank_sync.h"

namespace nccl_lamport::bench {

/** ncclAllReduce's signature: pncclAllReduce (stock NCCL) or ncclAllReduce (interposed). */
using AllReduceFn = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t);

/** One fully specified allreduce call. */
struct AllReduceCall {
  AllReduceFn fn = nullptr;
  const char* label = "";  // "nccl", "nccl-symmetric" or "lamport", for messages
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;

  /** Enqueues the call; throws BenchError if it returns an error. */
  void enqueue() const;
};

struct TimingSettings {
  int warmup = 20;        // eager calls (graph: replays enough to cover as many calls) untimed
  int iters = 100;        // eager calls per repetition
  int reps = 7;           // repetitions; the median is reported
  int graphCalls = 20;    // calls captured in one graph
  int graphReplays = 5;   // graph launches per repetition
};

/** Medians of every path, indexed by PathIndex. Times in us per call; NaN if not run (a call
 *  whose fn is null, e.g. NCCL's symmetric kernels where the NCCL has none, is skipped). */
struct PairTiming {
  double deviceUs[kPathCount];
  double hostUs[kPathCount];  // eager only: host wall time of the launch loop / iters
};

/**
 * Eager: warm-up of both paths, then reps x (barrier, stock rep, barrier, plugin rep). One rep:
 * events around iters back-to-back calls; host time around the launch loop alone.
 */
[[nodiscard]] PairTiming timeEager(const AllReduceCall (&calls)[kPathCount],
                                   const TimingSettings& settings, RankSync& sync);

/**
 * Graph: each path's graphCalls calls captured into one graph (thread-local capture mode, on
 * the call's non-default stream), instantiated, warmed up; then reps x (barrier, graphReplays
 * launches of the stock graph; barrier, same for the plugin graph). Per call =
 * event time / (graphCalls * graphReplays).
 */
[[nodiscard]] PairTiming timeGraph(const AllReduceCall (&calls)[kPathCount],
                                   const TimingSettings& settings, RankSync& sync);

}  // namespace nccl_lamport::bench
