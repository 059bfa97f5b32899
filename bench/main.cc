// nccl-lamport-bench: stock NCCL (pncclAllReduce) against nccl-lamport (ncclAllReduce through the
// interposer) in one run, one process per local GPU, eager and CUDA-graph timing, correctness
// against an fp64 reference. This file: options, orchestration, output. The parent process never
// initialises CUDA or NCCL (every rank is a forked child, see rank_launcher.h).
#include <nccl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cctype>
#include <fstream>
#include <sstream>
#include <iostream>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/bench_options.h"
#include "bench/crossover.h"
#include "bench/loopback.h"
#include "bench/rank_body.h"
#include "bench/rank_launcher.h"
#include "bench/rank_results.h"
#include "bench/report.h"
#include "bench/result_file.h"
#include "bench/tune_logic.h"
#include "tuner/routing.h"
#include "tuner/tuning_file.h"

#ifndef NCCL_LAMPORT_BENCH_SOURCE_DIR
#define NCCL_LAMPORT_BENCH_SOURCE_DIR ""
#endif

namespace nccl_lamport::bench {
namespace {

// The driver release from /proc ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64
// 580.159.04 Release Build ..."): the first word after "Kernel Module" made of digits and dots.
std::string readDriverRelease() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  const size_t at = line.find("Kernel Module");
  if (at == std::string::npos) return "";
  std::istringstream words(line.substr(at + 13));
  std::string word;
  while (words >> word) {
    if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) &&
        word.find_first_not_of("0123456789.") == std::string::npos) {
      return word;
    }
  }
  return "";
}

std::string utcNow() {
  const time_t now = time(nullptr);
  struct tm tmUtc {};
  gmtime_r(&now, &tmUtc);
  char text[32];
  strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tmUtc);
  return text;
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string executableDir() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  path[n] = '\0';
  std::string dir(path);
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? "." : dir.substr(0, slash);
}

std::string findPlotScript() {
  const std::string exeDir = executableDir();
  const std::string candidates[] = {
      exeDir + "/plot_results.py",
      exeDir + "/../share/nccl-lamport/plot_results.py",
      std::string(NCCL_LAMPORT_BENCH_SOURCE_DIR) + "/plot_results.py",
  };
  for (const std::string& path : candidates) {
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return "";
}

// Draws the PNG from the JSON with plot_results.py. False (with a message) when it cannot.
bool runPlot(const std::string& jsonPath, const std::string& pngPath) {
  const std::string script = findPlotScript();
  if (script.empty()) {
    std::fprintf(stderr, "nccl-lamport-bench: --plot: plot_results.py not found next to the "
                         "executable; no plot written\n");
    return false;
  }
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    std::fprintf(stderr, "nccl-lamport-bench: --plot needs python3 with matplotlib, which is not "
                         "available here; no plot written (run %s later on the JSON)\n",
                 script.c_str());
    return false;
  }
  const std::string command = shellJoin({"python3", script, jsonPath, "--output", pngPath});
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "nccl-lamport-bench: --plot: '%s' failed\n", command.c_str());
    return false;
  }
  std::printf("# plot written to %s\n", pngPath.c_str());
  return true;
}

std::string describeRankFailures(const RankLaunch& launch, const std::vector<const RankSlot*>& slots,
                                 double timeoutSeconds) {
  std::string text;
  for (size_t r = 0; r < launch.exits.size(); ++r) {
    const RankExit& e = launch.exits[r];
    const RankHeader& h = slots[r]->header;
    std::string line;
    if (e.timedOut) {
      line = "timed out after " + std::to_string(static_cast<int>(timeoutSeconds)) +
             " s and was killed (last phase: " + std::string(h.phase[0] != '\0' ? h.phase : "start") + ")";
    } else if (e.exitCode > 128) {
      line = "killed by signal " + std::to_string(e.exitCode - 128) + " (last phase: " +
             std::string(h.phase[0] != '\0' ? h.phase : "start") + ")";
    } else if (e.exitCode < 0) {
      line = "never started (fork failed)";
    } else if (e.exitCode != 0) {
      line = h.error[0] != '\0' ? std::string(h.error)
                                : "exited with status " + std::to_string(e.exitCode) + " (last phase: " +
                                      std::string(h.phase[0] != '\0' ? h.phase : "start") + ")";
    }
    if (!line.empty()) text += "nccl-lamport-bench: rank " + std::to_string(r) + ": " + line + "\n";
  }
  return text;
}

/** One sweep's ranks and their rows (exits empty: the ranks could not be set up, said on stderr). */
struct Sweep {
  RankLaunch launch;
  std::vector<const RankSlot*> slots;
  std::vector<Row> rows;
};

Sweep runSweep(const BenchOptions& opt, const std::vector<SizeSpec>& sizes, int nRanks, uint64_t seed) {
  RankPlan plan;
  plan.options = opt;
  plan.sizes = sizes;
  plan.seed = seed;
  Sweep sweep;
  sweep.launch = launchRanks(
      nRanks, sizeof(RankSlot), opt.timeoutSeconds,
      [](ncclUniqueId* id) { return ncclGetUniqueId(id); },
      [&plan](RankContext& ctx) { return runRank(ctx, plan); });
  if (sweep.launch.exits.empty()) {
    std::fprintf(stderr, "nccl-lamport-bench: could not set up the ranks (shared memory)\n");
    return sweep;
  }
  for (int r = 0; r < nRanks; ++r) sweep.slots.push_back(static_cast<const RankSlot*>(sweep.launch.resultsOf(r)));
  sweep.rows = aggregateRows(sweep.slots, static_cast<int>(sizes.size()));
  return sweep;
}

/**
 * --tune FILE (docs/tuning-file.md): a sweep with the one-shot bound raised to --max-bytes gives
 * the one-shot crossover; at 4+ ranks a second sweep above it with the two-shot bound raised gives
 * the two-shot one. The knobs are set in this (parent) process before the ranks fork; an older
 * tuning file is unset so that it cannot steer the measurement.
 */
int runTune(BenchOptions opt, const std::vector<SizeSpec>& sizes, const RunInfo& info) {
  unsetenv("NCCL_LAMPORT_TUNING_FILE");
  opt.symmetric = false;  // the crossovers are against stock NCCL; the third column costs time
  setenv("NCCL_LAMPORT_ONESHOT_MAX_BYTES", std::to_string(opt.maxBytes).c_str(), 1);
  unsetenv("NCCL_LAMPORT_TWOSHOT_MAX_BYTES");
  const int mode = opt.graph() ? kGraphMode : kEagerMode;
  std::printf("# tune: one-shot sweep, %d ranks\n", info.nRanks);
  Sweep one = runSweep(opt, sizes, info.nRanks, info.seed);
  if (one.launch.exits.empty() || !one.launch.allSucceeded()) {
    std::fputs(describeRankFailures(one.launch, one.slots, opt.timeoutSeconds).c_str(), stderr);
    return kExitFailed;
  }
  std::fputs((formatHeader(info, one.slots) + formatTable(one.rows)).c_str(), stdout);
  TuningEntry entry;
  entry.nRanks = info.nRanks;
  entry.smArch = one.slots[0]->header.smMajor * 10 + one.slots[0]->header.smMinor;
  entry.ncclVersion = ncclVersionString(one.slots[0]->header.ncclVersion);
  entry.date = info.timestampUtc;
  entry.command = tuningCommand(info.argv);
  entry.oneShotMaxBytes = estimateCrossover(one.rows).fasterUpTo[mode];
  std::vector<Row> twoRows;
  if (info.nRanks >= kTwoShotMinRanks) {
    const std::vector<SizeSpec> above = twoShotSweepSizes(sizes, entry.oneShotMaxBytes);
    if (!above.empty()) {
      setenv("NCCL_LAMPORT_ONESHOT_MAX_BYTES", std::to_string(twoShotSweepOneShotBound(entry.oneShotMaxBytes)).c_str(), 1);
      setenv("NCCL_LAMPORT_TWOSHOT_MAX_BYTES", std::to_string(opt.maxBytes).c_str(), 1);
      std::printf("# tune: two-shot sweep above %zu bytes\n", entry.oneShotMaxBytes);
      Sweep two = runSweep(opt, above, info.nRanks, info.seed);
      if (two.launch.exits.empty() || !two.launch.allSucceeded()) {
        std::fputs(describeRankFailures(two.launch, two.slots, opt.timeoutSeconds).c_str(), stderr);
        return kExitFailed;
      }
      std::fputs(formatTable(two.rows).c_str(), stdout);
      entry.twoShotMaxBytes = estimateCrossover(two.rows, "lamport-2shot").fasterUpTo[mode];
      twoRows = std::move(two.rows);
    }
  }
  const std::string problem = tuneRowsProblem(one.rows, twoRows);
  if (!problem.empty()) {
    std::fprintf(stderr, "nccl-lamport-bench: --tune: %s; no tuning file written\n", problem.c_str());
    return kExitFailed;
  }
  // The result first: a file that cannot be written after all (a full disk) loses no measurement.
  std::printf("# tune (%s timing): one-shot up to %zu bytes, two-shot up to %zu bytes\n",
              mode == kGraphMode ? "graph" : "eager", entry.oneShotMaxBytes, entry.twoShotMaxBytes);
  std::fflush(stdout);
  if (!writeResultFile(opt.tunePath, formatTuningFile(entry), "tuning")) return kExitFailed;
  std::printf("# tune: written to %s\n", opt.tunePath.c_str());
  return kExitOk;
}

int runBench(int argc, char** argv) {
  BenchOptions opt;
  const int parsed = parseCommandLine(std::vector<std::string>(argv, argv + argc), &opt, std::cout, std::cerr);
  if (parsed >= 0) return parsed;
  if (opt.loopback > 0) {
    const uint64_t seed =
        opt.seed != 0 ? opt.seed
                      : static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) | 1;
    return runLoopback(opt, opt.loopback, std::vector<std::string>(argv, argv + argc), seed, readDriverRelease(),
                       utcNow(), hostName());
  }
  std::string sizeError;
  const std::vector<SizeSpec> sizes =
      makeSizeList(opt.minBytes, opt.maxBytes, opt.stepFactor, elementSize(opt.dtype), &sizeError);
  if (sizes.empty()) {
    std::fprintf(stderr, "nccl-lamport-bench: %s\n", sizeError.c_str());
    return kExitUsage;
  }

  const int localGpus = countCudaDevicesWithoutInit();
  if (localGpus == 0) {
    std::fprintf(stderr, "nccl-lamport-bench: no CUDA GPU found; it needs at least 1 (2 or more "
                         "for a meaningful run)\n");
    return kExitUsage;
  }
  if (opt.gpus > localGpus) {
    std::fprintf(stderr, "nccl-lamport-bench: --gpus %d, but only %d CUDA GPU(s) are visible\n",
                 opt.gpus, localGpus);
    return kExitUsage;
  }
  const int nRanks = opt.gpus > 0 ? opt.gpus : localGpus;
  if (!opt.tunePath.empty() && !tuneRankProblem(nRanks).empty()) {
    std::fprintf(stderr, "nccl-lamport-bench: %s\n", tuneRankProblem(nRanks).c_str());
    return kExitUsage;
  }
  if (nRanks == 1) {
    std::fprintf(stderr, "nccl-lamport-bench: running with 1 rank (%d GPU(s) visible): every call "
                         "takes the NCCL path, nccl-lamport needs 2 or more GPUs\n", localGpus);
  }

  RunInfo info;
  info.argv.assign(argv, argv + argc);
  info.hostname = hostName();
  info.timestampUtc = utcNow();
  info.driverRelease = readDriverRelease();
  info.localGpus = localGpus;
  info.nRanks = nRanks;
  info.seed = opt.seed != 0 ? opt.seed
                            : static_cast<uint64_t>(
                                  std::chrono::system_clock::now().time_since_epoch().count()) | 1;
  info.options = opt;

  if (!opt.tunePath.empty()) return runTune(opt, sizes, info);
  Sweep sweep = runSweep(opt, sizes, nRanks, info.seed);
  if (sweep.launch.exits.empty()) return kExitFailed;
  const RankLaunch& launch = sweep.launch;
  const std::vector<const RankSlot*>& slots = sweep.slots;
  const std::vector<Row>& rows = sweep.rows;

  std::string out = formatHeader(info, slots);
  if (nRanks == 1) out += "# 1 rank: both columns are stock NCCL (nccl-lamport takes 2 or more GPUs)\n";
  out += formatTable(rows);
  const CrossoverEstimate crossover = estimateCrossover(rows);
  if (nRanks > 1) out += formatCrossover(crossover);
  bool ok = launch.allSucceeded() && rows.size() == sizes.size();
  int routeMismatches = 0;
  for (const Row& row : rows) {
    ok = ok && row.ok;
    routeMismatches += row.routeMismatch ? 1 : 0;
    if (!row.ok && !row.firstError.empty()) {
      out += "# " + std::to_string(row.bytes) + " bytes: first wrong element: " + row.firstError + "\n";
    }
  }
  if (routeMismatches > 0) {
    out += "# warning: at " + std::to_string(routeMismatches) +
           " size(s) nccl-lamport's call counters disagree with ncclLamportGetAllReducePath "
           "(JSON: check.routeMismatch)\n";
  }
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  std::fputs(describeRankFailures(launch, slots, opt.timeoutSeconds).c_str(), stderr);

  if (!opt.csvPath.empty()) ok = writeResultFile(opt.csvPath, formatCsv(rows), "CSV") && ok;
  std::string jsonPath = opt.jsonPath;
  bool tempJson = false;
  if (jsonPath.empty() && !opt.plotPath.empty()) {
    char tmpl[] = "/tmp/nccl-lamport-bench-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) {
      close(fd);
      jsonPath = tmpl;
      tempJson = true;
    }
  }
  if (!jsonPath.empty()) {
    nlohmann::json doc = toJson(info, slots, rows);
    doc["crossover"] = crossoverJson(crossover);
    const bool written = writeResultFile(jsonPath, resultJsonText(doc), "JSON");
    ok = (written || tempJson) && ok;
    if (written && !opt.plotPath.empty()) (void)runPlot(jsonPath, opt.plotPath);
  }
  if (tempJson) unlink(jsonPath.c_str());
  if (!ok) std::fprintf(stderr, "nccl-lamport-bench: FAILED (see the check column and the lines above)\n");
  return ok ? 0 : kExitFailed;
}

}  // namespace
}  // namespace nccl_lamport::bench

int main(int argc, char** argv) {
  try {
    return nccl_lamport::bench::runBench(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl-lamport-bench: %s\n", e.what());
    return 1;
  }
}
