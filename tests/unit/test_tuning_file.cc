// The tuning file (tuner/tuning_file.h): parsing good and bad files, the precedence knob > file
// > built-in, the WARN on a missing, bad or foreign file, and routing with a file's crossovers.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "common/log.h"
#include "tests/unit/log_capture.h"
#include "tuner/routing.h"
#include "tuner/tuning_file.h"

namespace nccl_lamport {
namespace {

constexpr size_t kKiB = size_t{1} << 10;

const char* kGood = R"({
  "version": 1, "nRanks": 8, "smArch": 90,
  "oneShotMaxBytes": 262144, "twoShotMaxBytes": 4194304,
  "ncclVersion": "2.28.9", "date": "2026-12-02T03:40:00Z", "command": "nccl-lamport-bench --tune t.json"
})";

class TuningFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/lamport-tuning-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const std::string& f : files_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string write(const std::string& text) {
    const std::string path = dir_ + "/t" + std::to_string(files_.size()) + ".json";
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }
  static int warnings() { return static_cast<int>(LogCapture::linesWith(" NCCL WARN ").size()); }
  static std::string lastWarning() {
    const std::vector<std::string> found = LogCapture::linesWith(" NCCL WARN ");
    return found.empty() ? "" : found.back();
  }
  /** A sparse file of `bytes` bytes (only its size is read before it is refused). */
  std::string sparse(const std::string& name, off_t bytes) {
    const std::string path = dir_ + "/" + name;
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    EXPECT_GE(fd, 0) << path;
    EXPECT_EQ(ftruncate(fd, bytes), 0) << path;
    close(fd);
    files_.push_back(path);
    return path;
  }
  LogCapture log_;  // WARNs, from before SetUp until after TearDown
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

TEST_F(TuningFileTest, TheInfoLineQuotesTheFileAndNamesTheKnobThatWins) {
  const std::string path = write(kGood);
  LogCapture info(kLogInfo);
  (void)crossoverOverrides(path, 8, 90, 64 * kKiB, 0);
  const std::vector<std::string> lines = LogCapture::linesWith("NCCL_LAMPORT_TUNING_FILE=");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("one-shot up to 262144 bytes, two-shot up to 4194304 bytes; taken: one-shot up to "
                          "65536 bytes (NCCL_LAMPORT_ONESHOT_MAX_BYTES), two-shot up to 4194304 bytes ("),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("measured 2026-12-02T03:40:00Z"), std::string::npos) << lines[0];
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

// A FIFO nobody writes to: a plain open for reading would block the communicator's set-up for
// ever (found by a fresh review). It is refused at once, with the reason.
TEST_F(TuningFileTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = dir_ + "/pipe.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  files_.push_back(fifo);
  auto done = std::async(std::launch::async, [&fifo] { return crossoverOverrides(fifo, 2, 90, 0, 0); });
  const bool returned = done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!returned) {  // unblock the reader so that the test fails instead of hanging
    const int fd = open(fifo.c_str(), O_WRONLY);
    if (fd >= 0) close(fd);
  }
  const CrossoverOverrides o = done.get();
  EXPECT_TRUE(returned) << "crossoverOverrides() waited more than 5 s on a FIFO";
  EXPECT_EQ(o.oneShotMaxBytes, 0u);
  EXPECT_EQ(o.twoShotMaxBytes, 0u);
  EXPECT_EQ(warnings(), 1);
  EXPECT_NE(lastWarning().find("is not a regular file"), std::string::npos) << lastWarning();
}

// A directory, or a file larger than kTuningFileMaxBytes (say a checkpoint named by mistake), is a
// WARN with its reason and the built-in table; the large file is not read into memory.
TEST_F(TuningFileTest, ADirectoryOrAnOversizedFileWarnsWithItsReason) {
  EXPECT_EQ(crossoverOverrides(dir_, 2, 90, 0, 0).oneShotMaxBytes, 0u);
  EXPECT_NE(lastWarning().find("is not a regular file"), std::string::npos) << lastWarning();
  for (const off_t bytes : {static_cast<off_t>(kTuningFileMaxBytes) + 1, off_t{4} << 30}) {
    const int before = warnings();
    const std::string path = sparse("big" + std::to_string(bytes) + ".json", bytes);
    const CrossoverOverrides o = crossoverOverrides(path, 2, 90, 0, 0);
    EXPECT_EQ(o.oneShotMaxBytes, 0u) << bytes;
    EXPECT_EQ(o.twoShotMaxBytes, 0u) << bytes;
    EXPECT_EQ(warnings(), before + 1) << bytes;
    EXPECT_NE(lastWarning().find("is larger than"), std::string::npos) << lastWarning();
  }
  // The limit itself is still read: a good file padded with spaces to exactly the limit.
  std::string padded = R"({"version": 1, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": 4096, "twoShotMaxBytes": 0})";
  padded.resize(kTuningFileMaxBytes, ' ');
  const int before = warnings();
  EXPECT_EQ(crossoverOverrides(write(padded), 2, 90, 0, 0).oneShotMaxBytes, 4096u);
  EXPECT_EQ(warnings(), before);
}

// ncclVersion, date and command are informational: a hand-written file may leave them out.
TEST_F(TuningFileTest, InformationalStringsAreOptional) {
  TuningEntry entry;
  std::string error;
  ASSERT_TRUE(parseTuningFile(R"({"version": 1, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": 64, "twoShotMaxBytes": 0})",
                              &entry, &error))
      << error;
  EXPECT_EQ(entry.oneShotMaxBytes, 64u);
  EXPECT_TRUE(entry.date.empty());
}

}  // namespace
}  // namespace nccl_lamport
