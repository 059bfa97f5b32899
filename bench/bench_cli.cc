#include "bench/bench_cli.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <ostream>
#include <sstream>
#include <utility>

#include "bench/result_file.h"

#ifndef NCCL_LAMPORT_VERSION
#define NCCL_LAMPORT_VERSION "unknown"
#endif

namespace nccl_lamport::bench {

namespace {

/** Option text converted after CLI11 has parsed (sizes and names have their own parsers). */
struct OptionText {
  std::string minBytes = "8";
  std::string maxBytes = "16M";
  std::string dtype = "bf16";
  std::string op = "sum";
  std::string mode = "both";
  std::string seed = "0";  // CLI11 2.1 reads "-1" and 2^64 as 2^64 - 1 without a word
};

/** A whole decimal number of 0 .. 2^64 - 1: no sign, nothing around it. */
bool parseSeed(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  unsigned long long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const unsigned digit = static_cast<unsigned>(c - '0');
    if (value > (~0ull - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

constexpr const char* kDescription =
    "nccl-lamport-bench: allreduce time per call of stock NCCL, NCCL's symmetric kernels (where\n"
    "the NCCL has them) and nccl-lamport, in one run, one process per local GPU, eager and\n"
    "CUDA-graph timing, every result checked against an fp64 reference.\n"
    "Times are microseconds per call: the median over --reps repetitions on each rank, then the\n"
    "maximum over ranks. The table goes to stdout, progress to stderr.\n";

constexpr const char* kFooter =
    "SIZE: a byte count, binary units, as the NCCL_LAMPORT_*_BYTES variables take them:\n"
    "  8, 4096, 64K, 64KiB, 64KB (all 65536), 8M, 1G.\n"
    "\n"
    "Exit status:\n"
    "  0  every size measured and every check passed (also after --help, --version)\n"
    "  1  a check failed, a rank failed or timed out, a --csv/--json/--tune file could not be\n"
    "     written, or --tune measured nothing (no size took the Lamport path)\n"
    "  2  bad options (also: two outputs naming one file, --tune with 1 rank or with\n"
    "     --csv/--json/--plot, --plot, --gpus, --timeout or --no-symmetric with --loopback,\n"
    "     an output path that cannot be written), or no CUDA GPU to run on\n"
    "\n"
    "Examples:\n"
    "  nccl-lamport-bench                                  all local GPUs, 8 bytes to 16 MiB\n"
    "  nccl-lamport-bench --max-bytes 1M --mode graph --json out.json --plot out.png\n"
    "  nccl-lamport-bench --tune lamport-tuning.json       measure the crossovers of this machine\n"
    "  nccl-lamport-bench --loopback 2                     kernel speed on one GPU (no NVLink)\n";

constexpr size_t kNameColumn = 30;  // option names; descriptions start here
constexpr size_t kTextColumns = 62;  // descriptions wrap here: 92 columns in all

/** Word-wraps a description to kTextColumns (CLI11 2.1 indents the lines after a newline but
 *  does not wrap). */
std::string wrap(const std::string& text) {
  std::istringstream words(text);
  std::string word, out, line;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > kTextColumns) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

/** A range check whose text stays out of the option's name column ("N", not "N:INT in [2 - 8]"). */
CLI::Validator range(double lo, double hi) { return CLI::Range(lo, hi).description(""); }

/** Builds the parser; the bound variables must outlive it. */
void defineOptions(CLI::App& app, BenchOptions* opt, OptionText* text, CLI::Option** graphCalls) {
  app.set_version_flag("--version", std::string("nccl-lamport-bench ") + NCCL_LAMPORT_VERSION);
  app.footer(kFooter);
  app.get_formatter()->column_width(kNameColumn);
  app.get_formatter()->label("REQUIRED", "");

  app.add_option("-g,--gpus", opt->gpus, "ranks, one process per GPU (0 = every local GPU)")
      ->type_name("N")
      ->check(range(0, 4096))
      ->capture_default_str()
      ->group("What to measure");
  app.add_option("-b,--min-bytes", text->minBytes, "smallest message, in bytes")
      ->type_name("SIZE")
      ->capture_default_str()
      ->group("What to measure");
  app.add_option("-e,--max-bytes", text->maxBytes, "largest message, in bytes")
      ->type_name("SIZE")
      ->capture_default_str()
      ->group("What to measure");
  app.add_option("-f,--step-factor", opt->stepFactor, "each message size is the previous one times X")
      ->type_name("X")
      ->capture_default_str()
      ->group("What to measure");
  app.add_option("-d,--dtype", text->dtype, "datatype: bf16, fp16 or fp32")
      ->type_name("TYPE")
      ->capture_default_str()
      ->group("What to measure");
  app.add_option("-o,--op", text->op, "reduction: sum or avg")
      ->type_name("OP")
      ->capture_default_str()
      ->group("What to measure");
  app.add_option("--mode", text->mode, "timing: eager (one launch per call), graph (calls captured in "
                 "a CUDA graph) or both")
      ->type_name("MODE")
      ->capture_default_str()
      ->group("What to measure");
  app.add_flag_callback("--no-symmetric", [opt] { opt->symmetric = false; },
               "skip NCCL's symmetric kernels (registered windows, NCCL >= 2.27); default: timed "
               "where the NCCL has them")
      ->group("What to measure");
  app.add_flag_callback("--no-check", [opt] { opt->check = false; },
               "skip the correctness check (default: each path's output on poisoned buffers "
               "against an fp64 reference)")
      ->group("What to measure");
  app.add_option("--loopback", opt->loopback,
                 "instead: kernel speed on ONE GPU, N ranks (2..8) as N streams of one process, "
                 "real workspaces and kernels, no NCCL, no NVLink hop; every kernel variant "
                 "against the baseline kernel")
      ->type_name("N")
      ->check(range(2, 8))
      ->group("What to measure");

  app.add_option("--iters", opt->iters, "eager: back-to-back calls per timed repetition")
      ->type_name("CALLS")
      ->check(range(1, 10000000))
      ->capture_default_str()
      ->group("Timing");
  app.add_option("--warmup", opt->warmup, "untimed calls per path and size before timing")
      ->type_name("CALLS")
      ->check(range(0, 10000000))
      ->capture_default_str()
      ->group("Timing");
  app.add_option("--reps", opt->reps, "timed repetitions per path and size; the median is reported")
      ->type_name("N")
      ->check(range(1, 100000))
      ->capture_default_str()
      ->group("Timing");
  *graphCalls = app.add_option("--graph-calls", opt->graphCalls,
                               "graph: allreduce calls captured in one CUDA graph (--loopback: 50)")
                    ->type_name("CALLS")
                    ->check(range(1, 100000))
                    ->capture_default_str()
                    ->group("Timing");
  app.add_option("--graph-replays", opt->graphReplays, "graph: launches of the graph per timed repetition")
      ->type_name("N")
      ->check(range(1, 100000))
      ->capture_default_str()
      ->group("Timing");
  app.add_option("--seed", text->seed, "input seed; 0 = from the clock (the header prints it, to repeat a run)")
      ->type_name("N")
      ->capture_default_str()
      ->group("Timing");
  app.add_option("--timeout", opt->timeoutSeconds, "the whole run may take this many seconds; ranks "
                 "still running then are killed (exit status 1)")
      ->type_name("SECONDS")
      ->check(range(1.0, 1e7))
      ->capture_default_str()
      ->group("Timing");

  app.add_option("--csv", opt->csvPath, "also write the table as CSV to FILE")
      ->type_name("FILE")
      ->group("Output");
  app.add_option("--json", opt->jsonPath, "also write every number, the machine and the command line as JSON")
      ->type_name("FILE")
      ->group("Output");
  app.add_option("--plot", opt->plotPath, "also draw time per call against message size as a PNG "
                 "(runs plot_results.py: needs python3 and matplotlib; not with --loopback)")
      ->type_name("FILE.png")
      ->group("Output");
  app.add_option("--tune", opt->tunePath, "measure this machine's one-shot (and, at 4+ ranks, two-shot) "
                 "crossovers against stock NCCL and write them as JSON for NCCL_LAMPORT_TUNING_FILE "
                 "(docs/tuning-file.md); 2+ ranks, and only this file: not with --csv, --json, --plot")
      ->type_name("FILE")
      ->group("Output");
  app.add_flag("-v,--verbose", opt->verbose, "one line per finished size on stderr (for logs)")->group("Output");
  app.add_flag("-q,--quiet", opt->quiet, "no progress line on stderr (it is shown only when stderr "
               "is a terminal)")
      ->group("Output");
  for (CLI::Option* option : app.get_options()) option->description(wrap(option->get_description()));
}

}  // namespace

int parseCommandLine(const std::vector<std::string>& argv, BenchOptions* opt, std::ostream& out,
                     std::ostream& err) {
  OptionText text;
  CLI::App app{kDescription, "nccl-lamport-bench"};
  CLI::Option* graphCalls = nullptr;
  defineOptions(app, opt, &text, &graphCalls);
  std::vector<std::string> args(argv.rbegin(), argv.rend());  // CLI11 takes them reversed
  if (!args.empty()) args.pop_back();                          // the program name
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  auto bad = [&err](const std::string& why) {
    err << "nccl-lamport-bench: " << why << " (see --help)\n";
    return kExitUsage;
  };
  if (!parseByteSize(text.minBytes, &opt->minBytes)) return bad("--min-bytes: not a byte count: " + text.minBytes);
  if (!parseByteSize(text.maxBytes, &opt->maxBytes)) return bad("--max-bytes: not a byte count: " + text.maxBytes);
  if (!parseDType(text.dtype, &opt->dtype)) return bad("--dtype must be bf16, fp16 or fp32, not " + text.dtype);
  if (!parseReduceOp(text.op, &opt->op)) return bad("--op must be sum or avg, not " + text.op);
  if (!parseTimingMode(text.mode, &opt->mode)) return bad("--mode must be eager, graph or both, not " + text.mode);
  if (!parseSeed(text.seed, &opt->seed)) return bad("--seed: not a whole number from 0 to 2^64-1: " + text.seed);
  // CLI11's range check lets NaN through (every comparison with it is false): the run would
  // never time out.
  if (std::isnan(opt->timeoutSeconds)) return bad("--timeout: not a number of seconds");
  if (!opt->tunePath.empty() && opt->loopback > 0) {
    return bad("--tune measures against stock NCCL on several GPUs; it does not combine with --loopback");
  }
  if (!opt->tunePath.empty() && opt->gpus == 1) {
    return bad("--tune needs 2 or more ranks; the plugin reads no tuning file measured on 1");
  }
  if (!opt->tunePath.empty() && (!opt->csvPath.empty() || !opt->jsonPath.empty() || !opt->plotPath.empty())) {
    return bad("--tune writes only the tuning file (its sweeps are printed); --csv, --json and --plot "
               "do not combine with it");
  }
  // The loopback run is one process on GPU 0, bounded by the kernels' own 10 s timeout per call:
  // these would be dropped without a word.
  for (const char* ignored : {"--gpus", "--timeout", "--no-symmetric"}) {
    if (opt->loopback > 0 && app.count(ignored) > 0) {
      return bad(std::string(ignored) + " does not apply to --loopback (one process, N streams on GPU 0)");
    }
  }
  if (opt->loopback > 0 && !opt->plotPath.empty()) {
    return bad("--plot draws a normal run's JSON; it does not combine with --loopback");
  }
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--csv", &opt->csvPath}, {"--json", &opt->jsonPath}, {"--plot", &opt->plotPath}, {"--tune", &opt->tunePath}};
  for (size_t i = 0; i < std::size(outputs); ++i) {
    for (size_t j = i + 1; j < std::size(outputs); ++j) {
      if (!outputs[i].second->empty() && !outputs[j].second->empty() &&
          sameResultPath(*outputs[i].second, *outputs[j].second)) {
        return bad(std::string(outputs[i].first) + " and " + outputs[j].first + " name the same file " +
                   *outputs[i].second);
      }
    }
  }
  // Checked now: a run of minutes must not end with a result it cannot write.
  for (const auto& [name, path] : outputs) {
    if (path->empty()) continue;
    const std::string problem = resultPathProblem(*path);
    if (!problem.empty()) return bad(std::string(name) + " " + *path + ": " + problem);
  }
  // Loopback graphs chain 50 calls unless told (the runs of docs/results-loopback-1xh200.md).
  if (opt->loopback > 0 && graphCalls->count() == 0) opt->graphCalls = 50;
  return -1;
}

std::string helpText() {
  BenchOptions opt;
  OptionText text;
  CLI::App app{kDescription, "nccl-lamport-bench"};
  CLI::Option* graphCalls = nullptr;
  defineOptions(app, &opt, &text, &graphCalls);
  return app.help();
}

}  // namespace nccl_lamport::bench
