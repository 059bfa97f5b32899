// nccl-lamport-bench --loopback: the kernel variants it compares and its report (table, CSV,
// JSON). Host code only, no CUDA: covered by the CPU tests.
//
// Loopback = N ranks as N streams of one process on ONE GPU, real workspaces, the real kernels and
// launch function (launchLamportAllReduce), no NCCL (NCCL refuses two ranks on one GPU). The
// "peer" stores land in local HBM, so there is no NVLink hop: absolute times are below the
// multi-GPU ones, but kernel and launch changes move both alike.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "kernels/lamport_layout.h"
#include "kernels/lamport_types.h"

namespace nccl_lamport::bench {

/** One kernel configuration the loopback run times (kernels/lamport_allreduce.h options). */
struct LoopbackVariant {
  std::string name;       // column label: "baseline", "fast", "fast-nopdl", "fast-t512", ...
  bool baseline = false;  // LamportKernelVariant::kBaseline (else kFast)
  bool twoShot = false;   // the two-shot kernel (nRanks >= 4 only)
  int blockThreads = 0;   // kFast data threads per block; 0 = the launcher's default
  bool pdl = true;        // kFast: programmatic dependent launch
  int residencyShare = 0;  // kFast: 1/share of the device per launch; 0 = the launcher's default
  int triggerAfterWait = 0;  // kFast/kTwoShot, PDL's launch_dependents: 0 = the launcher's choice,
                             // > 0 = only after the waits (late), < 0 = early
  int vectorsPerThread = 0;  // kFast A/B shape (LamportAllReduceArgs): 0 = shipped (1); bf16 only
  LamportFastPass fastPass = LamportFastPass::kAuto;  // kFast: how its grid walks the message
  int minBlocksPerSm = 0;    // kFast A/B register cap (LamportAllReduceArgs): 0 = none; bf16 only
  bool remoteSyncDomain = true;  // CUDA's remote memory-sync domain, as the plugin launches by
                                 // default (NCCL_MEM_SYNC_DOMAIN); loopbackVariants leaves the
                                 // baseline and fast-domain0 in the default domain
};

/**
 * The variants of a loopback run at nRanks, baseline first (the ratios are baseline / variant):
 * baseline, fast, fast without PDL, fast with 256 and 512 data threads, fast without the
 * co-residency bound, kLamportResidencyShare (fast-nobound: what the bound costs), the earlier default (an
 * eighth of the device, early PDL trigger: fast-share8-early), a quarter with the early trigger
 * (fast-share4-early), the late trigger always (fast-late), and two-shot (default and
 * twoshot-share8-early, twoshot-t256) where nRanks >= 4. For bf16 at 2, 4 and 8 ranks also the
 * kernel shapes of kernels/lamport_oneshot_variants.cu: more vectors per data thread (fast-k2,
 * fast-k4), register caps (fast-cap5, fast-cap7), the single-pass kernel without its block
 * barrier (fast-1pass-nobar) and the stash kernel with cp.async prefetch (fast-stash-prefetch).
 * At every size: the grid-strided kernel (fast-strided), session 5's default (fast-nostash: the
 * single pass where it fits, else the plain grid-strided kernel), the stash kernel (fast-stash)
 * and 128 data threads (fast-t128, the block size below 128 KB).
 */
[[nodiscard]] std::vector<LoopbackVariant> loopbackVariants(int nRanks, DType dtype = DType::kBf16);

/** The workspace layout of a loopback run at nRanks whose largest message is maxBytes: the slot
 *  every variant's launch is checked against (kernels/lamport_allreduce.h). */
[[nodiscard]] LamportLayout loopbackLayout(int nRanks, size_t maxBytes);

/** One message size: per variant, us per call (MAX over ranks, median over reps); NaN = not run. */
struct LoopbackRow {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  size_t bytes = 0;
  size_t count = 0;
  std::vector<double> graphUs;  // indexed like the variants
  std::vector<double> eagerUs;
  std::vector<std::string> check;  // per variant: "OK", "-", "12 wrong", "bit-diff", "timed out", ...
  bool ok = true;
};

/** Facts printed in the header and stored in the JSON. */
struct LoopbackInfo {
  int nRanks = 0;
  std::string gpuName;
  int device = 0;
  int smCount = 0;
  int cudaRuntimeVersion = 0;
  int cudaDriverVersion = 0;
  std::string driverRelease;
  std::string timestampUtc;
  std::string hostname;
  std::vector<std::string> argv;
  uint64_t seed = 0;
  BenchOptions options;
};

/** variant time / baseline time as "baseline / variant" (> 1: faster than baseline); NaN if unknown. */
[[nodiscard]] double loopbackRatio(double baselineUs, double variantUs);
/** The "# ..." header, including the no-NVLink-hop line. */
[[nodiscard]] std::string formatLoopbackHeader(const LoopbackInfo& info,
                                               const std::vector<LoopbackVariant>& variants);
/** One table per timing mode: a column per variant, then baseline/variant ratios, then checks. */
[[nodiscard]] std::string formatLoopbackTable(const std::vector<LoopbackVariant>& variants,
                                              const std::vector<LoopbackRow>& rows, const BenchOptions& options);
/** CSV: one line per (size, variant):
 *  bytes,count,variant,graph_us,eager_us,graph_x_baseline,eager_x_baseline,check (empty: not run). */
[[nodiscard]] std::string formatLoopbackCsv(const std::vector<LoopbackVariant>& variants,
                                            const std::vector<LoopbackRow>& rows);
/** Writes the CSV and JSON files the options name (bench/result_file.h); false when one could not
 *  be written (exit status 1, as --help says). */
[[nodiscard]] bool writeLoopbackFiles(const BenchOptions& options, const LoopbackInfo& info,
                                      const std::vector<LoopbackVariant>& variants,
                                      const std::vector<LoopbackRow>& rows);
[[nodiscard]] nlohmann::json loopbackJson(const LoopbackInfo& info, const std::vector<LoopbackVariant>& variants,
                                          const std::vector<LoopbackRow>& rows);

}  // namespace nccl_lamport::bench
