#include "bench/report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench/correctness.h"
#include "build_commit.h"  // generated: NCCL_LAMPORT_BUILD_COMMIT
#include "bench/stats.h"

namespace nccl_lamport::bench {

namespace {

double maxIgnoringNaN(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

double ratio(double stock, double plugin) {
  if (!(stock > 0) || !(plugin > 0)) return Row::kNaN;
  return stock / plugin;
}

std::string format(const char* fmt, double value) {
  if (std::isnan(value)) return "-";
  char text[64];
  std::snprintf(text, sizeof(text), fmt, value);
  return text;
}

std::string hex64(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016" PRIx64, value);
  return text;
}

const char* pathName(int32_t path) {
  return path == ncclLamportPathOneShot ? "lamport" : path == ncclLamportPathTwoShot ? "lamport-2shot" : "nccl";
}

nlohmann::json numberOrNull(double value) {
  return std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value);
}

std::string sizeRange(const BenchOptions& o) {
  char text[128];
  std::snprintf(text, sizeof(text), "%s..%s bytes, x%g", formatByteSize(o.minBytes).c_str(),
                formatByteSize(o.maxBytes).c_str(), o.stepFactor);
  return text;
}

// Fills the row's check text and ok flag from its other fields (most serious problem first).
void judge(Row& row, int nRanks) {
  row.ok = false;
  if (row.ranksMeasured < nRanks) {
    row.check = "incomplete (" + std::to_string(row.ranksMeasured) + "/" + std::to_string(nRanks) +
                " ranks)";
  } else if (!row.pathConsistent) {
    row.check = "path differs across ranks";
  } else if (!row.checked) {
    row.check = "-";
    row.ok = true;
  } else if (row.wrong[kPlugin] > 0) {
    row.check = std::to_string(row.wrong[kPlugin]) + " wrong";
  } else if (!row.bitIdentical) {
    row.check = "bit-diff across ranks";
  } else if (row.wrong[kStock] > 0) {
    row.check = "nccl: " + std::to_string(row.wrong[kStock]) + " wrong";
  } else if (row.repeatMismatch) {
    row.check = "changed on repeat";
  } else {
    row.check = "OK";
    row.ok = true;
  }
}

}  // namespace

std::vector<Row> aggregateRows(const std::vector<const RankSlot*>& ranks, int nSizes) {
  std::vector<Row> rows;
  const int nRanks = static_cast<int>(ranks.size());
  for (int s = 0; s < nSizes; ++s) {
    Row row;
    int firstPath = -1;
    uint64_t firstHash = 0;
    for (const RankSlot* slot : ranks) {
      const SizeSample& sample = slot->sizes[s];
      if (sample.measured == 0) continue;
      if (row.ranksMeasured == 0) {
        row.bytes = sample.bytes;
        row.count = sample.count;
        row.checked = sample.checked != 0;
        firstPath = sample.path;
        firstHash = sample.hash[kPlugin];
      }
      ++row.ranksMeasured;
      if (sample.path != firstPath) row.pathConsistent = false;
      for (int p = 0; p < kPathCount; ++p) {
        row.eagerUs[p] = maxIgnoringNaN(row.eagerUs[p], sample.eagerUs[p]);
        row.graphUs[p] = maxIgnoringNaN(row.graphUs[p], sample.graphUs[p]);
        row.hostUs[p] = maxIgnoringNaN(row.hostUs[p], sample.hostUs[p]);
      }
      if (sample.checked != 0) {
        row.wrong[kStock] += sample.wrong[kStock];
        row.wrong[kPlugin] += sample.wrong[kPlugin];
        row.maxUlp = std::max(row.maxUlp, sample.maxUlp);
        if (sample.hash[kPlugin] != firstHash) row.bitIdentical = false;
        if (sample.repeatMismatch != 0) row.repeatMismatch = true;
        const bool tookLamport = sample.lamportCallsDelta > 0;
        if (tookLamport != (sample.path != ncclLamportPathNccl)) row.routeMismatch = true;
        if (row.firstError.empty() && sample.firstError[0] != '\0') {
          row.firstError = std::string(sample.firstError);
        }
      }
    }
    if (row.ranksMeasured == 0) continue;
    row.path = row.pathConsistent ? pathName(firstPath) : "mixed";
    row.eagerSpeedup = ratio(row.eagerUs[kStock], row.eagerUs[kPlugin]);
    row.graphSpeedup = ratio(row.graphUs[kStock], row.graphUs[kPlugin]);
    row.eagerSymmetricSpeedup = ratio(row.eagerUs[kStock], row.eagerUs[kSymmetric]);
    row.graphSymmetricSpeedup = ratio(row.graphUs[kStock], row.graphUs[kSymmetric]);
    const double pluginUs = std::isnan(row.graphUs[kPlugin]) ? row.eagerUs[kPlugin] : row.graphUs[kPlugin];
    row.algbwGBs = algBandwidthGBs(row.bytes, pluginUs);
    row.busbwGBs = busBandwidthGBs(row.bytes, pluginUs, nRanks);
    judge(row, nRanks);
    rows.push_back(std::move(row));
  }
  return rows;
}

const char* buildCommit() { return NCCL_LAMPORT_BUILD_COMMIT; }

std::string ncclVersionString(int code) {
  if (code <= 0) return "unknown";
  int major, minor, patch;
  if (code >= 10000) {  // NCCL_VERSION for 2.9 and later: X*10000 + Y*100 + Z
    major = code / 10000;
    minor = (code % 10000) / 100;
    patch = code % 100;
  } else {  // 2.8 and earlier: X*1000 + Y*100 + Z
    major = code / 1000;
    minor = (code % 1000) / 100;
    patch = code % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string cudaVersionString(int code) {
  if (code <= 0) return "unknown";
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

std::string formatUs(double us) { return format("%.2f", us); }

std::string formatHeader(const RunInfo& info, const std::vector<const RankSlot*>& ranks) {
  std::ostringstream out;
  const BenchOptions& o = info.options;
  out << "# nccl-lamport-bench: " << shellJoin(info.argv) << "\n";
  out << "# build: " << buildCommit() << "\n";
  out << "# host " << info.hostname << ", " << info.timestampUtc << ", " << info.nRanks
      << (info.nRanks == 1 ? " rank" : " ranks") << ", one process per GPU (" << info.localGpus
      << " GPUs on the host)\n";
  if (ranks.empty() || ranks[0]->header.started == 0) {
    out << "# rank 0 reported nothing\n";
    return out.str();
  }
  const RankHeader& h0 = ranks[0]->header;
  bool sameGpu = true;
  for (const RankSlot* slot : ranks) {
    if (std::string(slot->header.gpuName) != h0.gpuName) sameGpu = false;
  }
  if (sameGpu) {
    out << "# GPU: " << ranks.size() << " x " << h0.gpuName << " (sm_" << h0.smMajor << h0.smMinor
        << ")\n";
  } else {
    out << "# GPUs:";
    for (size_t r = 0; r < ranks.size(); ++r) {
      out << (r == 0 ? " " : "; ") << "rank " << r << " " << ranks[r]->header.gpuName;
    }
    out << "\n";
  }
  out << "# driver " << (info.driverRelease.empty() ? "unknown" : info.driverRelease)
      << ", CUDA driver API " << cudaVersionString(h0.cudaDriverVersion) << ", bench runtime "
      << cudaVersionString(h0.cudaRuntimeVersion) << "\n";
  out << "# NCCL " << ncclVersionString(h0.ncclVersion)
      << " (stock = pncclAllReduce; lamport column = ncclAllReduce through nccl-lamport)\n";
  if (h0.pluginActive != 0) {
    out << "# nccl-lamport: active\n";
  } else {
    out << "# nccl-lamport: NOT active (NCCL_LAMPORT_ENABLE=0?): both columns run stock NCCL\n";
  }
  if (h0.commInfoValid != 0) {
    const ncclLamportCommInfo_t& c = h0.commInfo;
    bool agree = true;
    for (const RankSlot* slot : ranks) {
      if (slot->header.commInfo.eligible != c.eligible) agree = false;
    }
    out << "# communicator: " << (c.known == 0 ? "unknown to nccl-lamport" : c.eligible != 0 ? "eligible" : "not eligible")
        << (agree ? "" : " (ranks disagree!)") << ", reason \"" << c.reason << "\", workspace "
        << c.workspaceBytes << " bytes per rank, one-shot up to " << c.oneShotMaxBytes << " bytes\n";
  } else {
    out << "# communicator: ncclLamportGetCommInfo failed\n";
  }
  if (!ranks.empty()) {
    const RankHeader& h0 = ranks[0]->header;
    out << "# NCCL symmetric kernels (registered windows): "
        << (h0.symmetricAvailable != 0 ? std::string("timed (sym columns)")
                                       : "n/a (" + std::string(h0.symmetricWhy) + ")")
        << "\n";
  }
  out << "# " << name(o.dtype) << " " << name(o.op) << ", sizes " << sizeRange(o) << ", mode "
      << name(o.mode) << ", check " << (o.check ? "on" : "off") << ", seed " << info.seed << "\n";
  out << "# us per call: median of " << o.reps << " reps, then max over ranks; eager: " << o.warmup
      << " warm-up, " << o.iters << " calls per rep; graph: " << o.graphCalls << " calls per graph, "
      << o.graphReplays << " replays per rep; busbw = algbw * 2(n-1)/n of the lamport column ("
      << (o.graph() ? "graph" : "eager") << ")\n";
  return out.str();
}

std::string formatTable(const std::vector<Row>& rows) {
  // Per timing mode: stock NCCL, NCCL's symmetric kernels ("n/a" where the NCCL has none or
  // --no-symmetric), nccl-lamport, and each one's speedup over stock.
  static const char* kRowFormat =
      "%12s %10s %-7s  %8s %8s %8s %6s %6s  %8s %8s %8s %6s %6s  %10s  %8s %8s  %7s  %s\n";
  char line[512];
  std::string text;
  std::snprintf(line, sizeof(line), "%12s %10s %-7s  %-42s  %-42s  %10s  %-17s  %7s\n", "", "", "",
                "------------------ eager -----------------", "------------------ graph -----------------",
                "lamport", "host us per call", "");
  text += line;
  std::snprintf(line, sizeof(line), kRowFormat, "bytes", "count", "path", "nccl us", "sym us", "lamp us",
                "sym x", "lamp x", "nccl us", "sym us", "lamp us", "sym x", "lamp x", "busbw GB/s", "nccl",
                "lamport", "max ulp", "check");
  text += line;
  auto symUs = [](double us) { return std::isnan(us) ? std::string("n/a") : formatUs(us); };
  auto symX = [](double x) { return std::isnan(x) ? std::string("n/a") : format("%.2fx", x); };
  for (const Row& row : rows) {
    const std::string ulp = !row.checked ? "-" : row.maxUlp == kUlpNaN ? "nan" : std::to_string(row.maxUlp);
    std::snprintf(line, sizeof(line), kRowFormat, std::to_string(row.bytes).c_str(),
                  std::to_string(row.count).c_str(), row.path.c_str(),
                  formatUs(row.eagerUs[kStock]).c_str(), symUs(row.eagerUs[kSymmetric]).c_str(),
                  formatUs(row.eagerUs[kPlugin]).c_str(), symX(row.eagerSymmetricSpeedup).c_str(),
                  format("%.2fx", row.eagerSpeedup).c_str(), formatUs(row.graphUs[kStock]).c_str(),
                  symUs(row.graphUs[kSymmetric]).c_str(), formatUs(row.graphUs[kPlugin]).c_str(),
                  symX(row.graphSymmetricSpeedup).c_str(), format("%.2fx", row.graphSpeedup).c_str(),
                  format("%.2f", row.busbwGBs).c_str(), formatUs(row.hostUs[kStock]).c_str(),
                  formatUs(row.hostUs[kPlugin]).c_str(), ulp.c_str(), row.check.c_str());
    text += line;
  }
  return text;
}

std::string formatCsv(const std::vector<Row>& rows) {
  std::string text =
      "bytes,count,path,eager_nccl_us,eager_lamport_us,eager_speedup,graph_nccl_us,"
      "graph_lamport_us,graph_speedup,busbw_lamport_gbs,algbw_lamport_gbs,host_nccl_us,"
      "host_lamport_us,wrong_nccl,wrong_lamport,max_ulp,bit_identical,check,eager_symmetric_us,"
      "eager_symmetric_speedup,graph_symmetric_us,graph_symmetric_speedup\n";
  auto num = [](double v) { return std::isnan(v) ? std::string() : format("%.4f", v); };
  for (const Row& row : rows) {
    std::string ulp = !row.checked || row.maxUlp == kUlpNaN ? "" : std::to_string(row.maxUlp);
    text += std::to_string(row.bytes) + "," + std::to_string(row.count) + "," + row.path + "," +
            num(row.eagerUs[kStock]) + "," + num(row.eagerUs[kPlugin]) + "," + num(row.eagerSpeedup) +
            "," + num(row.graphUs[kStock]) + "," + num(row.graphUs[kPlugin]) + "," +
            num(row.graphSpeedup) + "," + num(row.busbwGBs) + "," + num(row.algbwGBs) + "," +
            num(row.hostUs[kStock]) + "," + num(row.hostUs[kPlugin]) + "," +
            (row.checked ? std::to_string(row.wrong[kStock]) : "") + "," +
            (row.checked ? std::to_string(row.wrong[kPlugin]) : "") + "," + ulp + "," +
            (row.checked ? (row.bitIdentical ? "1" : "0") : "") + ",\"" + row.check + "\"," +
            num(row.eagerUs[kSymmetric]) + "," + num(row.eagerSymmetricSpeedup) + "," +
            num(row.graphUs[kSymmetric]) + "," + num(row.graphSymmetricSpeedup) + "\n";
  }
  return text;
}

nlohmann::json toJson(const RunInfo& info, const std::vector<const RankSlot*>& ranks,
                      const std::vector<Row>& rows) {
  using nlohmann::json;
  const BenchOptions& o = info.options;
  json doc;
  doc["tool"] = "nccl-lamport-bench";
  doc["schema"] = 1;
  // Strings that may not be UTF-8 (a Latin-1 file name) are kept as they are: resultJsonText
  // (bench/result_file.h) replaces an invalid sequence when the document is written.
  doc["command"] = shellJoin(info.argv);
  doc["build"] = buildCommit();
  doc["argv"] = info.argv;
  doc["host"] = info.hostname;
  doc["timestamp"] = info.timestampUtc;
  doc["driverRelease"] = info.driverRelease;
  doc["localGpus"] = info.localGpus;
  doc["nRanks"] = info.nRanks;
  doc["seed"] = info.seed;
  doc["options"] = {{"gpus", o.gpus},           {"minBytes", o.minBytes},
                    {"maxBytes", o.maxBytes},   {"stepFactor", o.stepFactor},
                    {"dtype", name(o.dtype)},   {"op", name(o.op)},
                    {"iters", o.iters},         {"warmup", o.warmup},
                    {"reps", o.reps},           {"graphCalls", o.graphCalls},
                    {"graphReplays", o.graphReplays}, {"mode", name(o.mode)},
                    {"check", o.check},         {"timeoutSeconds", o.timeoutSeconds},
                    {"symmetric", o.symmetric}};
  doc["units"] = {{"time", "us per call, median over reps"},
                  {"acrossRanks", "max"},
                  {"bandwidth", "GB/s = 1e9 bytes/s; busbw = algbw * 2(n-1)/n"},
                  {"speedup", "stock NCCL time / nccl-lamport time"},
                  {"symmetricSpeedup", "stock NCCL time / NCCL symmetric kernels' time"}};
  json rankList = json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankHeader& h = ranks[r]->header;
    json entry = {{"rank", r},
                  {"device", h.device},
                  {"gpu", std::string(h.gpuName)},
                  {"busId", std::string(h.busId)},
                  {"sm", std::to_string(h.smMajor) + std::to_string(h.smMinor)},
                  {"cudaDriver", cudaVersionString(h.cudaDriverVersion)},
                  {"cudaRuntime", cudaVersionString(h.cudaRuntimeVersion)},
                  {"nccl", ncclVersionString(h.ncclVersion)},
                  {"pluginActive", h.pluginActive != 0},
                  {"started", h.started != 0},
                  {"failed", h.failed != 0},
                  {"error", std::string(h.error)},
                  {"lastPhase", std::string(h.phase)},
                  {"sizesDone", h.sizesDone},
                  {"symmetric", {{"available", h.symmetricAvailable != 0}, {"why", std::string(h.symmetricWhy)}}},
                  {"lamportCalls", h.lamportCallsTotal},
                  {"ncclCalls", h.ncclCallsTotal}};
    if (h.commInfoValid != 0) {
      entry["comm"] = {{"known", h.commInfo.known != 0},
                       {"eligible", h.commInfo.eligible != 0},
                       {"reason", std::string(h.commInfo.reason)},
                       {"workspaceBytes", h.commInfo.workspaceBytes},
                       {"oneShotMaxBytes", h.commInfo.oneShotMaxBytes}};
    }
    rankList.push_back(entry);
  }
  doc["ranks"] = rankList;
  json results = json::array();
  for (const Row& row : rows) {
    json entry;
    entry["bytes"] = row.bytes;
    entry["count"] = row.count;
    entry["path"] = row.path;
    entry["eager"] = {{"ncclUs", numberOrNull(row.eagerUs[kStock])},
                      {"lamportUs", numberOrNull(row.eagerUs[kPlugin])},
                      {"speedup", numberOrNull(row.eagerSpeedup)},
                      {"symmetricUs", numberOrNull(row.eagerUs[kSymmetric])},
                      {"symmetricSpeedup", numberOrNull(row.eagerSymmetricSpeedup)}};
    entry["graph"] = {{"ncclUs", numberOrNull(row.graphUs[kStock])},
                      {"lamportUs", numberOrNull(row.graphUs[kPlugin])},
                      {"speedup", numberOrNull(row.graphSpeedup)},
                      {"symmetricUs", numberOrNull(row.graphUs[kSymmetric])},
                      {"symmetricSpeedup", numberOrNull(row.graphSymmetricSpeedup)}};
    entry["hostUs"] = {{"nccl", numberOrNull(row.hostUs[kStock])},
                       {"lamport", numberOrNull(row.hostUs[kPlugin])}};
    entry["busbwGBs"] = numberOrNull(row.busbwGBs);
    entry["algbwGBs"] = numberOrNull(row.algbwGBs);
    entry["check"] = {{"status", row.check},
                      {"ok", row.ok},
                      {"checked", row.checked},
                      {"wrongNccl", row.wrong[kStock]},
                      {"wrongLamport", row.wrong[kPlugin]},
                      {"maxUlpLamportVsNccl",
                       row.maxUlp == kUlpNaN ? json(nullptr) : json(row.maxUlp)},
                      {"bitIdenticalAcrossRanks", row.bitIdentical},
                      {"pathConsistent", row.pathConsistent},
                      {"repeatMismatch", row.repeatMismatch},
                      {"routeMismatch", row.routeMismatch},
                      {"firstError", row.firstError}};
    json perRank = json::array();
    for (const RankSlot* slot : ranks) {
      const SizeSample* sample = nullptr;
      for (int s = 0; s < kMaxSizes; ++s) {
        if (slot->sizes[s].measured != 0 && slot->sizes[s].bytes == row.bytes) {
          sample = &slot->sizes[s];
          break;
        }
      }
      if (sample == nullptr) {
        perRank.push_back(nullptr);
        continue;
      }
      perRank.push_back({{"path", pathName(sample->path)},
                         {"eagerUs", {numberOrNull(sample->eagerUs[kStock]), numberOrNull(sample->eagerUs[kPlugin]), numberOrNull(sample->eagerUs[kSymmetric])}},
                         {"graphUs", {numberOrNull(sample->graphUs[kStock]), numberOrNull(sample->graphUs[kPlugin]), numberOrNull(sample->graphUs[kSymmetric])}},
                         {"hostUs", {numberOrNull(sample->hostUs[kStock]), numberOrNull(sample->hostUs[kPlugin]), numberOrNull(sample->hostUs[kSymmetric])}},
                         {"wrong", {sample->wrong[kStock], sample->wrong[kPlugin]}},
                         {"hash", {hex64(sample->hash[kStock]), hex64(sample->hash[kPlugin])}},
                         {"lamportCallsDelta", sample->lamportCallsDelta}});
    }
    entry["perRank"] = perRank;  // arrays are [stock NCCL, nccl-lamport(, NCCL symmetric)]
    results.push_back(entry);
  }
  doc["results"] = results;
  return doc;
}

}  // namespace nccl_lamport::bench
