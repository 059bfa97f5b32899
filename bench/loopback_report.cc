#include "bench/loopback_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/report.h"
#include "bench/result_file.h"

namespace nccl_lamport::bench {

namespace {

std::string formatNumber(const char* fmt, double value) {
  if (std::isnan(value)) return "-";
  char text[64];
  std::snprintf(text, sizeof(text), fmt, value);
  return text;
}

nlohmann::json numberOrNull(double value) {
  return std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value);
}

std::string padLeft(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

}  // namespace

std::vector<LoopbackVariant> loopbackVariants(int nRanks, DType dtype) {
  std::vector<LoopbackVariant> v;
  LoopbackVariant baseline{"baseline", true, false, 0, false};
  baseline.remoteSyncDomain = false;  // launched as on 2026-12-01
  v.push_back(baseline);
  v.push_back({"fast", false, false, 0, true});
  v.push_back({"fast-nopdl", false, false, 0, false});
  // In CUDA's default memory-sync domain instead of the remote one NCCL's kernels use.
  LoopbackVariant defaultDomain{"fast-domain0", false, false, 0, true};
  defaultDomain.remoteSyncDomain = false;
  v.push_back(defaultDomain);
  // The grid-strided kernel at every size (the default of session 4's call 3): what the single-pass
  // kernel, used where its grid holds the message, is worth.
  LoopbackVariant strided{"fast-strided", false, false, 0, true};
  strided.fastPass = LamportFastPass::kGridStrided;
  v.push_back(strided);
  // kAuto without the stash and the early-trigger condition (LamportFastPass::kSinglePass: the
  // single pass where it fits, else the plain grid-strided kernel): the default of session 5's
  // final tree; and the stash kernel at every size (kGridStridedStash), where kAuto's cut-off lies.
  LoopbackVariant noStash{"fast-nostash", false, false, 0, true};
  noStash.fastPass = LamportFastPass::kSinglePass;
  v.push_back(noStash);
  LoopbackVariant stash{"fast-stash", false, false, 0, true};
  stash.fastPass = LamportFastPass::kGridStridedStash;
  v.push_back(stash);
  // Fixed block sizes at every size; the default takes 128 data threads below 128 KB and 256 from
  // there (lamportDefaultDataThreads); fast-t128 is session 4's default at every size.
  v.push_back({"fast-t128", false, false, 128, true});
  v.push_back({"fast-t256", false, false, 256, true});
  v.push_back({"fast-t512", false, false, 512, true});
  // Smaller blocks for the small-message floor: fewer warps to launch, retire and synchronise.
  v.push_back({"fast-t64", false, false, 64, true});
  v.push_back({"fast-t32", false, false, 32, true});
  v.push_back({"fast-nobound", false, false, 0, true, 1, -1});
  // The residency bound's trade-off (communicators that fit together against large messages): the default
  // takes a quarter of the device and the late PDL trigger above 1/12 of it; the kernel of the
  // morning of 2026-12-02 took an eighth with the early trigger always; a quarter with the early
  // trigger always (not safe for four streams, timed for reference); the late trigger always.
  v.push_back({"fast-share8-early", false, false, 0, true, 8, -1});
  v.push_back({"fast-share4-early", false, false, 0, true, 4, -1});
  v.push_back({"fast-late", false, false, 0, true, 0, 1});
  // More vectors per data thread than the shipped 1 (kernels/lamport_oneshot_variants.cu, bf16 only):
  // K = 4 at 2 ranks and 2 at 4 were the default until session 4.
  if (dtype == DType::kBf16 && (nRanks == 2 || nRanks == 4 || nRanks == 8)) {
    for (int k : nRanks == 8 ? std::vector<int>{2} : std::vector<int>{2, 4}) {
      LoopbackVariant shape{"fast-k" + std::to_string(k), false, false, 0, true};
      shape.vectorsPerThread = k;
      v.push_back(shape);
    }
    // The grid-strided kernel with 256 data threads under a register cap of 5 and 7 blocks per
    // SM (40 and 32 registers at 2 ranks against 50): more data threads in a quarter of the device
    // for messages too large for the single pass, against some spills.
    for (int blocks : {5, 7}) {
      LoopbackVariant capped{"fast-cap" + std::to_string(blocks), false, false, 256, true};
      capped.minBlocksPerSm = blocks;
      v.push_back(capped);
    }
    // The single-pass kernel without its block barrier (LamportFastPass::kSinglePassNoBarrier).
    LoopbackVariant noBarrier{"fast-1pass-nobar", false, false, 0, true};
    noBarrier.fastPass = LamportFastPass::kSinglePassNoBarrier;
    v.push_back(noBarrier);
    // The stash kernel with its groups copied into shared memory at entry, all in flight together
    // (kGridStridedStashPrefetch), at every size.
    LoopbackVariant prefetch{"fast-stash-prefetch", false, false, 0, true};
    prefetch.fastPass = LamportFastPass::kGridStridedStashPrefetch;
    v.push_back(prefetch);
  }
  if (nRanks >= 4) {
    v.push_back({"twoshot", false, true, 0, true});
    v.push_back({"twoshot-share8-early", false, true, 0, true, 8, -1});
    v.push_back({"twoshot-t256", false, true, 256, true});
  }
  return v;
}

LamportLayout loopbackLayout(int nRanks, size_t maxBytes) {
  const size_t vectors = (maxBytes + kLamportVectorBytes - 1) / kLamportVectorBytes;
  // The two-shot kernel (4+ ranks) needs room for a scatter and a gather chunk of
  // ceil(vectors / nRanks) vectors each: more than the message itself when it is one vector.
  const size_t twoShotVectors = nRanks >= 4 ? 2 * ((vectors + nRanks - 1) / nRanks) : 0;
  return LamportLayout{nRanks, std::max(vectors, twoShotVectors) * kLamportVectorBytes};
}

double loopbackRatio(double baselineUs, double variantUs) {
  if (!(baselineUs > 0) || !(variantUs > 0)) return LoopbackRow::kNaN;
  return baselineUs / variantUs;
}

std::string formatLoopbackHeader(const LoopbackInfo& info, const std::vector<LoopbackVariant>& variants) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "# nccl-lamport-bench --loopback %d: %d ranks as %d streams of one process on GPU %d (%s, %d SMs)\n",
                info.nRanks, info.nRanks, info.nRanks, info.device, info.gpuName.c_str(), info.smCount);
  out += line;
  out += "# loopback has NO NVLink hop: peer stores land in local HBM; absolute times are below the multi-GPU ones,\n"
         "#   kernel and launch changes move both alike. Real workspaces, the real kernels and\n"
         "#   launch function, no NCCL.\n";
  out += std::string("# build: ") + buildCommit() + "\n";
  std::snprintf(line, sizeof(line), "# CUDA runtime %d.%d, driver API %d.%d, driver %s; %s; seed %llu\n",
                info.cudaRuntimeVersion / 1000, info.cudaRuntimeVersion % 1000 / 10, info.cudaDriverVersion / 1000,
                info.cudaDriverVersion % 1000 / 10, info.driverRelease.empty() ? "?" : info.driverRelease.c_str(),
                info.timestampUtc.c_str(), static_cast<unsigned long long>(info.seed));
  out += line;
  std::snprintf(line, sizeof(line), "# %s %s; graph: %d calls per graph x %d replays; eager: %d calls; %d reps, each the MAX over ranks, then their median; us per call\n",
                name(info.options.dtype), name(info.options.op), info.options.graphCalls, info.options.graphReplays,
                info.options.iters, info.options.reps);
  out += line;
  out += "# variants:";
  for (const LoopbackVariant& v : variants) out += " " + v.name;
  out += "  (ratio columns: baseline time / variant time, > 1 = faster than baseline)\n";
  if (info.options.check) {
    out += "# every variant checked at every size before and after timing: fresh random inputs, poisoned outputs,\n"
           "#   fp64 reference, bit-identical across ranks\n";
  } else {
    out += "# --no-check: NO variant's output is checked\n";
  }
  return out;
}

std::string formatLoopbackTable(const std::vector<LoopbackVariant>& variants, const std::vector<LoopbackRow>& rows,
                                const BenchOptions& options) {
  std::string out;
  size_t width = 13;  // at least "12345.67" wide; wider where a variant's name is longer
  for (const LoopbackVariant& v : variants) width = std::max(width, v.name.size() + 1);
  auto table = [&](const char* mode, bool graph) {
    std::string head = "#" + padLeft("bytes", 10) + padLeft("mode", 7);
    for (const LoopbackVariant& v : variants) head += padLeft(v.name, width);
    for (size_t i = 1; i < variants.size(); ++i) head += padLeft("x" + variants[i].name, width + 2);
    head += "  check\n";
    out += head;
    for (const LoopbackRow& row : rows) {
      std::string line = " " + padLeft(formatByteSize(row.bytes), 10) + padLeft(mode, 7);
      const std::vector<double>& us = graph ? row.graphUs : row.eagerUs;
      for (size_t i = 0; i < variants.size(); ++i) line += padLeft(formatNumber("%.2f", i < us.size() ? us[i] : LoopbackRow::kNaN), width);
      for (size_t i = 1; i < variants.size(); ++i) {
        const double r = loopbackRatio(us.empty() ? LoopbackRow::kNaN : us[0], i < us.size() ? us[i] : LoopbackRow::kNaN);
        line += padLeft(formatNumber("%.2fx", r), width + 2);
      }
      // "-" (not checked: --no-check) is listed only beside checked variants; all "-" reads "-".
      std::string problems;
      bool anyChecked = false;
      for (size_t i = 0; i < row.check.size() && i < variants.size(); ++i) {
        anyChecked = anyChecked || row.check[i] != "-";
        if (row.check[i] != "OK" && row.check[i] != "-") problems += (problems.empty() ? "" : "; ") + variants[i].name + ": " + row.check[i];
      }
      const std::string check = !problems.empty() ? problems : anyChecked ? "OK" : "-";
      out += line + "  " + check + "\n";
    }
  };
  if (options.graph()) table("graph", true);
  if (options.eager()) table("eager", false);
  return out;
}

std::string formatLoopbackCsv(const std::vector<LoopbackVariant>& variants, const std::vector<LoopbackRow>& rows) {
  std::string out = "bytes,count,variant,graph_us,eager_us,graph_x_baseline,eager_x_baseline,check\n";
  for (const LoopbackRow& row : rows) {
    for (size_t i = 0; i < variants.size(); ++i) {
      auto at = [&](const std::vector<double>& v, size_t k) { return k < v.size() ? v[k] : LoopbackRow::kNaN; };
      auto field = [](double x, const char* fmt) { return std::isnan(x) ? std::string() : formatNumber(fmt, x); };
      out += std::to_string(row.bytes) + "," + std::to_string(row.count) + "," + variants[i].name + "," +
             field(at(row.graphUs, i), "%.4f") + "," + field(at(row.eagerUs, i), "%.4f") + "," +
             field(loopbackRatio(at(row.graphUs, 0), at(row.graphUs, i)), "%.4f") + "," +
             field(loopbackRatio(at(row.eagerUs, 0), at(row.eagerUs, i)), "%.4f") + "," +
             (i < row.check.size() ? row.check[i] : std::string("-")) + "\n";
    }
  }
  return out;
}

nlohmann::json loopbackJson(const LoopbackInfo& info, const std::vector<LoopbackVariant>& variants,
                            const std::vector<LoopbackRow>& rows) {
  nlohmann::json doc;
  doc["mode"] = "loopback";
  doc["noNvlinkHop"] = true;
  doc["nRanks"] = info.nRanks;
  doc["gpu"] = {{"name", info.gpuName}, {"device", info.device}, {"smCount", info.smCount}};
  doc["versions"] = {{"cudaRuntime", info.cudaRuntimeVersion}, {"cudaDriver", info.cudaDriverVersion},
                     {"driverRelease", info.driverRelease}};
  doc["timestampUtc"] = info.timestampUtc;
  doc["hostname"] = info.hostname;  // may be invalid UTF-8: resultJsonText replaces it
  doc["argv"] = info.argv;
  doc["build"] = buildCommit();
  doc["seed"] = info.seed;
  doc["options"] = {{"dtype", name(info.options.dtype)}, {"op", name(info.options.op)},
                    {"graphCalls", info.options.graphCalls}, {"graphReplays", info.options.graphReplays},
                    {"iters", info.options.iters}, {"reps", info.options.reps}, {"warmup", info.options.warmup},
                    {"mode", name(info.options.mode)}, {"check", info.options.check}};
  nlohmann::json vs = nlohmann::json::array();
  for (const LoopbackVariant& v : variants) {
    vs.push_back({{"name", v.name}, {"baseline", v.baseline}, {"twoShot", v.twoShot},
                  {"blockThreads", v.blockThreads}, {"pdl", v.pdl}, {"residencyShare", v.residencyShare},
                  {"triggerAfterWait", v.triggerAfterWait}, {"vectorsPerThread", v.vectorsPerThread},
                  {"fastPass", static_cast<int>(v.fastPass)}, {"minBlocksPerSm", v.minBlocksPerSm},
                  {"remoteSyncDomain", v.remoteSyncDomain}});
  }
  doc["variants"] = vs;
  nlohmann::json rs = nlohmann::json::array();
  for (const LoopbackRow& row : rows) {
    nlohmann::json r = {{"bytes", row.bytes}, {"count", row.count}, {"ok", row.ok}};
    for (size_t i = 0; i < variants.size(); ++i) {
      auto at = [&](const std::vector<double>& v) { return i < v.size() ? v[i] : LoopbackRow::kNaN; };
      r["variants"][variants[i].name] = {
          {"graphUs", numberOrNull(at(row.graphUs))},
          {"eagerUs", numberOrNull(at(row.eagerUs))},
          {"graphXBaseline", numberOrNull(loopbackRatio(row.graphUs.empty() ? LoopbackRow::kNaN : row.graphUs[0], at(row.graphUs)))},
          {"eagerXBaseline", numberOrNull(loopbackRatio(row.eagerUs.empty() ? LoopbackRow::kNaN : row.eagerUs[0], at(row.eagerUs)))},
          {"check", i < row.check.size() ? row.check[i] : std::string("-")}};
    }
    rs.push_back(r);
  }
  doc["rows"] = rs;
  return doc;
}

bool writeLoopbackFiles(const BenchOptions& options, const LoopbackInfo& info,
                        const std::vector<LoopbackVariant>& variants, const std::vector<LoopbackRow>& rows) {
  bool ok = true;
  if (!options.csvPath.empty()) ok = writeResultFile(options.csvPath, formatLoopbackCsv(variants, rows), "CSV") && ok;
  if (!options.jsonPath.empty()) {
    ok = writeResultFile(options.jsonPath, resultJsonText(loopbackJson(info, variants, rows)), "JSON") && ok;
  }
  return ok;
}

}  // namespace nccl_lamport::bench
