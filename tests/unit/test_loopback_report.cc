// CPU tests of nccl-lamport-bench --loopback's report logic (bench/loopback_report.h): the variant
// list, baseline ratios, and that the table, CSV and JSON carry every variant and the no-NVLink
// note.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "bench/loopback_report.h"
#include "bench/report.h"

namespace nccl_lamport::bench {
namespace {

TEST(LoopbackReport, VariantsStartWithTheBaselineAndNamesAreUnique) {
  for (int n : {2, 4, 8}) {
    const std::vector<LoopbackVariant> v = loopbackVariants(n);
    ASSERT_GE(v.size(), 3u);
    EXPECT_TRUE(v[0].baseline);
    EXPECT_EQ(v[0].name, "baseline");
    for (size_t i = 1; i < v.size(); ++i) {
      EXPECT_FALSE(v[i].baseline) << v[i].name;
      for (size_t j = 0; j < i; ++j) EXPECT_NE(v[i].name, v[j].name);
    }
    bool fastWithPdl = false, fastWithoutPdl = false;
    for (const LoopbackVariant& x : v) {
      fastWithPdl |= !x.baseline && !x.twoShot && x.pdl && x.blockThreads == 0;
      fastWithoutPdl |= !x.baseline && !x.twoShot && !x.pdl;
      if (x.twoShot) EXPECT_GE(n, 4) << "two-shot only from 4 ranks";
    }
    EXPECT_TRUE(fastWithPdl);
    EXPECT_TRUE(fastWithoutPdl);
  }
}

// The default kernel is timed as the plugin launches it (CUDA's remote memory-sync domain, as NCCL's
// kernels), the baseline as it was launched on 2026-12-01, and one A/B variant in the default domain.
TEST(LoopbackReport, OnlyTheBaselineAndOneAbVariantLeaveTheRemoteSyncDomain) {
  for (int n : {2, 4, 8}) {
    int defaultDomain = 0;
    for (const LoopbackVariant& x : loopbackVariants(n)) {
      if (!x.remoteSyncDomain) ++defaultDomain;
      if (x.name == "fast") EXPECT_TRUE(x.remoteSyncDomain);
      if (x.name == "fast-domain0" || x.baseline) EXPECT_FALSE(x.remoteSyncDomain) << x.name;
    }
    EXPECT_EQ(defaultDomain, 2) << n << " ranks";
    const nlohmann::json doc = loopbackJson(LoopbackInfo{}, loopbackVariants(n), {});
    EXPECT_FALSE(doc["variants"][0]["remoteSyncDomain"].get<bool>()) << "the baseline, first";
  }
}

TEST(LoopbackReport, RatioIsBaselineOverVariant) {
  EXPECT_DOUBLE_EQ(loopbackRatio(3.0, 1.5), 2.0);
  EXPECT_TRUE(std::isnan(loopbackRatio(LoopbackRow::kNaN, 1.0)));
  EXPECT_TRUE(std::isnan(loopbackRatio(2.0, 0.0)));
}

TEST(LoopbackReport, TableCsvAndJsonCarryEveryVariant) {
  const std::vector<LoopbackVariant> variants = loopbackVariants(2);
  LoopbackRow row;
  row.bytes = 8192;
  row.count = 4096;
  for (size_t i = 0; i < variants.size(); ++i) {
    row.graphUs.push_back(2.0 + i);
    row.eagerUs.push_back(LoopbackRow::kNaN);
    row.check.push_back(i == 1 ? "3 wrong" : "OK");
  }
  BenchOptions o;
  o.mode = TimingMode::kGraph;
  const std::string table = formatLoopbackTable(variants, {row}, o);
  // Every column header stands apart (long names such as fast-share8-early ran into their
  // neighbours in a fixed-width header).
  for (const LoopbackVariant& v : variants) EXPECT_NE(table.find(" " + v.name + " "), std::string::npos) << v.name << "\n" << table;
  EXPECT_NE(table.find("0.67x"), std::string::npos) << table;  // 2.0 / 3.0
  EXPECT_NE(table.find(variants[1].name + ": 3 wrong"), std::string::npos) << table;
  EXPECT_EQ(table.find("eager"), std::string::npos) << "graph-only run prints no eager table";

  const std::string csv = formatLoopbackCsv(variants, {row});
  EXPECT_EQ(csv.rfind("bytes,count,variant,", 0), 0u);
  EXPECT_NE(csv.find("8192,4096,baseline,2.0000,,1.0000,,OK"), std::string::npos) << csv;

  LoopbackInfo info;
  info.nRanks = 2;
  info.options = o;
  const nlohmann::json doc = loopbackJson(info, variants, {row});
  EXPECT_TRUE(doc["noNvlinkHop"].get<bool>());
  EXPECT_EQ(doc["rows"][0]["variants"]["baseline"]["graphUs"].get<double>(), 2.0);
  EXPECT_TRUE(doc["rows"][0]["variants"]["baseline"]["eagerUs"].is_null());
  EXPECT_EQ(doc["variants"].size(), variants.size());
  EXPECT_NE(formatLoopbackHeader(info, variants).find("NO NVLink hop"), std::string::npos);
  // A recorded result names the code it timed.
  EXPECT_EQ(doc["build"].get<std::string>(), buildCommit());
  EXPECT_NE(formatLoopbackHeader(info, variants).find(std::string("# build: ") + buildCommit() + "\n"),
            std::string::npos);
}

/** The first line `command` prints, or "" when it fails. */
std::string firstLineOf(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  char line[256] = {};
  const bool got = std::fgets(line, sizeof(line), pipe) != nullptr;
  if (pclose(pipe) != 0 || !got) return "";
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// The build stamp is the checked-out commit (taken at build time), so a result file names the code
// it timed; a stamp taken once at configure time would name an older commit after any new one.
TEST(BuildCommit, NamesTheCheckedOutCommit) {
  const std::string head =
      firstLineOf(std::string("git -C '") + NCCL_LAMPORT_SOURCE_DIR + "' rev-parse --short=12 HEAD 2>/dev/null");
  if (head.empty()) GTEST_SKIP() << "the source tree is not a git checkout (or git is missing): stamp 'unknown'";
  EXPECT_EQ(std::string(buildCommit()).substr(0, head.size()), head)
      << "rebuild after a commit: the binaries are older than HEAD";
}

// Every variant of a run is launched with the one layout of the run's largest size. The two-shot
// kernel needs 2 * ceil(vectors / nRanks) * 16 <= slotBytes (kernels/lamport_allreduce.h, and
// launchLamportAllReduce answers cudaErrorInvalidValue otherwise): with one 16-byte vector as the
// largest message (--loopback 4 --max-bytes 16, or 8) a one-vector slot refused every two-shot call.
TEST(LoopbackReport, LayoutHoldsEveryVariantAtEverySize) {
  for (int n = 2; n <= 8; ++n) {
    for (size_t maxBytes : {size_t{2}, size_t{4}, size_t{8}, size_t{16}, size_t{24}, size_t{32}, size_t{48},
                            size_t{100}, size_t{4096}, size_t{1} << 21}) {
      const LamportLayout layout = loopbackLayout(n, maxBytes);
      EXPECT_EQ(layout.nRanks, n);
      EXPECT_EQ(layout.slotBytes % kLamportVectorBytes, 0u);
      for (size_t bytes = 1; bytes <= maxBytes; bytes = bytes < 64 ? bytes + 1 : bytes * 2) {
        EXPECT_GE(layout.slotBytes, bytes) << n << " ranks, " << bytes << " of " << maxBytes << " bytes";
        if (n < 4) continue;  // no two-shot variant below 4 ranks
        const size_t vectors = (bytes + kLamportVectorBytes - 1) / kLamportVectorBytes;
        const size_t chunk = (vectors + n - 1) / n;
        EXPECT_LE(2 * chunk * kLamportVectorBytes, layout.slotBytes)
            << "two-shot at " << n << " ranks, " << bytes << " of " << maxBytes << " bytes";
      }
    }
  }
}

// --no-check: no variant is checked, so the report must not say they were (the header did, and
// the check column listed every variant as "baseline: -; fast: -; ..."), and the JSON records it.
TEST(LoopbackReport, NoCheckRunSaysSo) {
  const std::vector<LoopbackVariant> variants = loopbackVariants(2);
  LoopbackRow row;
  row.bytes = 64;
  row.count = 32;
  row.graphUs.assign(variants.size(), 2.0);
  row.eagerUs.assign(variants.size(), LoopbackRow::kNaN);
  row.check.assign(variants.size(), "-");
  LoopbackInfo info;
  info.nRanks = 2;
  info.options.check = false;
  info.options.mode = TimingMode::kGraph;
  const std::string header = formatLoopbackHeader(info, variants);
  EXPECT_EQ(header.find("every variant checked"), std::string::npos) << header;
  EXPECT_NE(header.find("--no-check"), std::string::npos) << header;
  const std::string table = formatLoopbackTable(variants, {row}, info.options);
  EXPECT_EQ(table.find("baseline: -"), std::string::npos) << table;
  EXPECT_EQ(loopbackJson(info, variants, {row})["options"]["check"], false);
  info.options.check = true;
  EXPECT_NE(formatLoopbackHeader(info, variants).find("every variant checked"), std::string::npos);
  EXPECT_EQ(loopbackJson(info, variants, {row})["options"]["check"], true);
}

// The JSON's "variants" describe what each column ran. Without the kernel shape fields
// (vectorsPerThread, fastPass, minBlocksPerSm), fast-k2, fast-strided, fast-stash, ... read exactly
// like "fast" there.
TEST(LoopbackReport, JsonTellsEveryVariantApart) {
  for (int n : {2, 4, 8}) {
    const std::vector<LoopbackVariant> variants = loopbackVariants(n);
    LoopbackInfo info;
    info.nRanks = n;
    const nlohmann::json doc = loopbackJson(info, variants, {});
    ASSERT_EQ(doc["variants"].size(), variants.size());
    for (size_t i = 0; i < variants.size(); ++i) {
      nlohmann::json a = doc["variants"][i];
      a.erase("name");
      for (size_t j = 0; j < i; ++j) {
        nlohmann::json b = doc["variants"][j];
        b.erase("name");
        EXPECT_NE(a, b) << variants[i].name << " and " << variants[j].name << " at " << n << " ranks";
      }
    }
  }
}

}  // namespace
}  // namespace nccl_lamport::bench
