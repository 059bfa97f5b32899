// The tuning file (tuner/tuning_file.h): parsing good and bad files, the precedence knob > file
// > built-in, the WARN on a missing, bad or foreign file, and routing with a file's crossovers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"
#include "tuner/routing.h"
#include "tuner/tuning_file.h"

namespace nccl_lamport {
namespace {

constexpr size_t kKiB = size_t{1} << 10;

std::mutex gMutex;
std::vector<std::string> gLines;

void sink(const char* line) {
  std::lock_guard<std::mutex> lock(gMutex);
  gLines.emplace_back(line);
}

const char* kGood = R"({
  "version": 1, "nRanks": 8, "smArch": 90,
  "oneShotMaxBytes": 262144, "twoShotMaxBytes": 4194304,
  "ncclVersion": "2.28.9", "date": "2026-12-02T03:40:00Z", "command": "nccl-lamport-bench --tune t.json"
})";

class TuningFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::lock_guard<std::mutex> lock(gMutex);
      gLines.clear();
    }
    LogSettings settings;
    settings.level = kLogWarn;
    setLogSettingsForTest(settings);
    setLogSinkForTest(sink);
    char dir[] = "/tmp/lamport-tuning-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    setLogSinkForTest(nullptr);
    setLogSettingsForTest(LogSettings{});
    for (const std::string& f : files_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string write(const std::string& text) {
    const std::string path = dir_ + "/t" + std::to_string(files_.size()) + ".json";
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }
  static int warnings() {
    std::lock_guard<std::mutex> lock(gMutex);
    int n = 0;
    for (const std::string& line : gLines) n += line.find(" NCCL WARN ") != std::string::npos ? 1 : 0;
    return n;
  }
  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(TuningFileTest, ParsesAGoodFile) {
  TuningEntry entry;
  std::string error;
  ASSERT_TRUE(parseTuningFile(kGood, &entry, &error)) << error;
  EXPECT_EQ(entry.nRanks, 8);
  EXPECT_EQ(entry.smArch, 90);
  EXPECT_EQ(entry.oneShotMaxBytes, 256 * kKiB);
  EXPECT_EQ(entry.twoShotMaxBytes, size_t{4} << 20);
  EXPECT_EQ(entry.ncclVersion, "2.28.9");
  EXPECT_EQ(entry.command, "nccl-lamport-bench --tune t.json");
}

TEST_F(TuningFileTest, WriterAndReaderAgree) {
  TuningEntry entry;
  entry.nRanks = 2;
  entry.smArch = 100;
  entry.oneShotMaxBytes = 123456;
  entry.twoShotMaxBytes = 0;
  entry.date = "2026-12-02T00:00:00Z";
  TuningEntry back;
  std::string error;
  ASSERT_TRUE(parseTuningFile(formatTuningFile(entry), &back, &error)) << error;
  EXPECT_EQ(back.nRanks, 2);
  EXPECT_EQ(back.smArch, 100);
  EXPECT_EQ(back.oneShotMaxBytes, 123456u);
  EXPECT_EQ(back.date, entry.date);
}

TEST_F(TuningFileTest, RejectsBadFiles) {
  for (const char* bad : {"", "{", "[]", "42", R"({"version": 1})",
                          R"({"version": 2, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": 1, "twoShotMaxBytes": 0})",
                          R"({"version": 1, "nRanks": 1, "smArch": 90, "oneShotMaxBytes": 1, "twoShotMaxBytes": 0})",
                          R"({"version": 1, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": -1, "twoShotMaxBytes": 0})",
                          R"({"version": 1, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": 1.5, "twoShotMaxBytes": 0})",
                          R"({"version": 1, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": "64K", "twoShotMaxBytes": 0})",
                          R"({"version": 1, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": 1})"}) {
    TuningEntry entry;
    std::string error;
    EXPECT_FALSE(parseTuningFile(bad, &entry, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST_F(TuningFileTest, FileReplacesTheBuiltInTable) {
  const std::string path = write(kGood);
  const CrossoverOverrides o = crossoverOverrides(path, 8, 90, 0, 0);
  EXPECT_EQ(o.oneShotMaxBytes, 256 * kKiB);
  EXPECT_EQ(o.twoShotMaxBytes, size_t{4} << 20);
  EXPECT_EQ(warnings(), 0);
  // Routing with the file's crossovers: one-shot up to 256K, two-shot above it up to 4M, NCCL above.
  RoutingTable table = makeRoutingTable(8, 90, o.oneShotMaxBytes, size_t{1} << 30);
  table.twoShotMaxBytes = agreedTwoShotMaxBytes(8, 90, o.twoShotMaxBytes, table.oneShotMaxBytes, table.oneShotMaxBytes);
  EXPECT_EQ(table.oneShotMaxBytes, 256 * kKiB);
  EXPECT_EQ(table.twoShotMaxBytes, size_t{1} << 20);  // clamped to what a 256K slot holds at 8 ranks
  EXPECT_EQ(routeAllReduce(table, true, 8, ncclBfloat16, ncclSum, 128 * kKiB), AllReducePath::kLamportOneShot);
  EXPECT_EQ(routeAllReduce(table, true, 8, ncclBfloat16, ncclSum, 256 * kKiB), AllReducePath::kLamportTwoShot);
  EXPECT_EQ(routeAllReduce(table, true, 8, ncclBfloat16, ncclSum, 1024 * kKiB), AllReducePath::kNccl);
}

TEST_F(TuningFileTest, KnobsWinOverTheFile) {
  const std::string path = write(kGood);
  const CrossoverOverrides o = crossoverOverrides(path, 8, 90, 64 * kKiB, 0);
  EXPECT_EQ(o.oneShotMaxBytes, 64 * kKiB);
  EXPECT_EQ(o.twoShotMaxBytes, size_t{4} << 20);
}

TEST_F(TuningFileTest, ZeroOneShotMeansTheSmallestSlotNotTheBuiltIn) {
  const std::string path = write(R"({"version": 1, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": 0, "twoShotMaxBytes": 0})");
  EXPECT_EQ(crossoverOverrides(path, 2, 90, 0, 0).oneShotMaxBytes, 16u);
}

TEST_F(TuningFileTest, MissingBadOrForeignFileWarnsAndKeepsTheBuiltIn) {
  const std::string foreignRanks = write(kGood);
  const std::string bad = write("{ not json");
  for (const std::string& path : {dir_ + "/missing.json", bad, foreignRanks}) {
    const int before = warnings();
    const CrossoverOverrides o = crossoverOverrides(path, 2, 90, 0, 0);  // file is for 8 ranks
    EXPECT_EQ(o.oneShotMaxBytes, 0u) << path;
    EXPECT_EQ(o.twoShotMaxBytes, 0u) << path;
    EXPECT_EQ(warnings(), before + 1) << path;
  }
  const int before = warnings();
  EXPECT_EQ(crossoverOverrides(foreignRanks, 8, 100, 0, 0).oneShotMaxBytes, 0u);  // other arch
  EXPECT_EQ(warnings(), before + 1);
  EXPECT_EQ(crossoverOverrides("", 8, 90, 0, 0).oneShotMaxBytes, 0u);  // unset: nothing read
  EXPECT_EQ(warnings(), before + 1);
}

}  // namespace
}  // namespace nccl_lamport
