// CPU tests of nccl-lamport-bench --tune's decisions (bench/tune_logic.h) and of what the bench
// writes as JSON: whatever --tune writes must parse back with the plugin's reader
// (tuner/tuning_file.h), and no result file may be lost to a non-UTF-8 command-line argument.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/crossover.h"
#include "bench/loopback_report.h"
#include "bench/report.h"
#include "bench/result_file.h"
#include "bench/tune_logic.h"
#include "tuner/tuning_file.h"

namespace nccl_lamport::bench {
namespace {

Row row(size_t bytes, const char* path, double speedup, bool ok = true) {
  Row r;
  r.bytes = bytes;
  r.path = path;
  r.eagerSpeedup = r.graphSpeedup = speedup;
  r.ok = ok;
  r.check = ok ? "OK" : "3 wrong";
  return r;
}

std::vector<SizeSpec> powersOfTwo(size_t from, size_t to) {
  std::vector<SizeSpec> sizes;
  for (size_t b = from; b <= to; b *= 2) sizes.push_back(SizeSpec{b, b / 2});
  return sizes;
}

// What the file --tune writes must be one the plugin reads back: it refuses nRanks < 2, so a run
// on one rank must not get as far as writing one.
TEST(BenchTune, RefusesFewerThanTwoRanksWhoseFileThePluginWouldReject) {
  TuningEntry entry;
  entry.nRanks = 1;
  entry.smArch = 90;
  std::string error;
  TuningEntry back;
  ASSERT_FALSE(parseTuningFile(formatTuningFile(entry), &back, &error));  // the reader's rule
  EXPECT_FALSE(tuneRankProblem(1).empty());
  EXPECT_FALSE(tuneRankProblem(0).empty());
  EXPECT_TRUE(tuneRankProblem(2).empty());
  EXPECT_TRUE(tuneRankProblem(8).empty());
}

// The plugin rounds NCCL_LAMPORT_ONESHOT_MAX_BYTES up to 16 bytes (and never goes below one
// 16-byte slot), so sizes up to that still take the one-shot in the two-shot sweep; such a row
// ("lamport", not "lamport-2shot") ends estimateCrossover's scan and the two-shot reads as 0.
TEST(BenchTune, TwoShotSweepStartsAboveTheOneShotBoundThePluginApplies) {
  const std::vector<SizeSpec> sizes = powersOfTwo(8, 1 << 20);
  for (size_t oneShot : {size_t{0}, size_t{8}, size_t{24}, size_t{64}}) {
    const size_t bound = (twoShotSweepOneShotBound(oneShot) + 15) / 16 * 16;
    const std::vector<SizeSpec> above = twoShotSweepSizes(sizes, oneShot);
    ASSERT_FALSE(above.empty());
    EXPECT_GT(above.front().bytes, bound) << "one-shot crossover " << oneShot;
    EXPECT_EQ(above.back().bytes, sizes.back().bytes);
  }
  // End to end: one-shot faster only at 8 bytes; the two-shot beats NCCL up to 64 KiB.
  const std::vector<SizeSpec> above = twoShotSweepSizes(sizes, 8);
  std::vector<Row> rows;
  for (const SizeSpec& s : above) {
    rows.push_back(s.bytes <= 16 ? row(s.bytes, "lamport", 1.2) : row(s.bytes, "lamport-2shot", s.bytes <= 65536 ? 1.5 : 0.8));
  }
  EXPECT_EQ(estimateCrossover(rows, "lamport-2shot").fasterUpTo[kGraphMode], 65536u);
}

// A failed check in the two-shot sweep must stop the file as one in the one-shot sweep does:
// otherwise the file turns on a kernel that gave wrong results.
TEST(BenchTune, AFailedCheckInEitherSweepWritesNoFile) {
  const std::vector<Row> one = {row(8, "lamport", 2), row(16, "lamport", 0.9)};
  EXPECT_EQ(tuneRowsProblem(one, {}), "");
  EXPECT_EQ(tuneRowsProblem(one, {row(32, "lamport-2shot", 1.5)}), "");
  EXPECT_NE(tuneRowsProblem({row(8, "lamport", 2, false)}, {}), "");
  EXPECT_NE(tuneRowsProblem(one, {row(32, "lamport-2shot", 1.5), row(64, "lamport-2shot", 1.4, false)}), "");
}

// Nothing took the Lamport path (plugin not active: NCCL_LAMPORT_ENABLE=0, or the communicator not
// eligible): the one-shot was never measured, and a file saying 0 ("it never won") would be false.
TEST(BenchTune, NoLamportRowMeansNothingWasMeasured) {
  EXPECT_NE(tuneRowsProblem({row(8, "nccl", 1.0), row(16, "nccl", 1.0)}, {}), "");
  EXPECT_NE(tuneRowsProblem({}, {}), "");
  // Measured and never faster: 0 is then a real answer.
  EXPECT_EQ(tuneRowsProblem({row(8, "lamport", 0.9), row(16, "lamport", 0.8)}, {}), "");
}

// The command line goes into the file; a byte that is not UTF-8 (a Latin-1 file name) must not
// cost the tuning run (nlohmann's dump throws on it) nor give a file the plugin rejects.
TEST(BenchTune, ANonUtf8ArgumentStillGivesAFileThePluginReads) {
  TuningEntry entry;
  entry.nRanks = 4;
  entry.smArch = 90;
  entry.oneShotMaxBytes = 262144;
  entry.command = tuningCommand({"nccl-lamport-bench", "--tune", "r\xe9glage.json", "\xc3"});
  std::string text;
  ASSERT_NO_THROW(text = formatTuningFile(entry));
  TuningEntry back;
  std::string error;
  ASSERT_TRUE(parseTuningFile(text, &back, &error)) << error;
  EXPECT_EQ(back.oneShotMaxBytes, 262144u);
  EXPECT_NE(back.command.find("glage.json"), std::string::npos);
}

TEST(BenchTune, TheCommandKeepsGoodTextAndReplacesBadBytes) {
  EXPECT_EQ(tuningCommand({"nccl-lamport-bench", "--tune", "t.json"}), "nccl-lamport-bench --tune t.json");
  const std::string good = "caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80.json";
  EXPECT_EQ(tuningCommand({good}), shellJoin({good}));  // valid UTF-8 passes unchanged
  const std::string replacement = "\xef\xbf\xbd";  // U+FFFD
  for (const char* bad : {"a\xe9z", "\xc3", "\xc0\xaf", "\xed\xa0\x80"}) {
    const std::string clean = tuningCommand({bad});
    EXPECT_NE(clean.find(replacement), std::string::npos) << bad;
    EXPECT_NO_THROW((void)nlohmann::json(clean).dump()) << bad;  // valid UTF-8 now
  }
}

// --json / --loopback --json: the command line and argv go into the document; dumping it must not
// throw after the whole run (it ended the bench with status 1 and no JSON file).
TEST(BenchJson, ANonUtf8ArgumentDoesNotLoseTheJsonFile) {
  RunInfo info;
  info.argv = {"nccl-lamport-bench", "--json", "r\xe9sultats.json"};
  info.nRanks = 2;
  std::string text;
  ASSERT_NO_THROW(text = resultJsonText(toJson(info, {}, {})));
  EXPECT_NE(text.find("sultats.json"), std::string::npos);

  LoopbackInfo loop;
  loop.argv = info.argv;
  loop.hostname = "h\xff";
  ASSERT_NO_THROW(text = resultJsonText(loopbackJson(loop, loopbackVariants(2), {})));
  EXPECT_NE(text.find("sultats.json"), std::string::npos);
}

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string scratchDir() {
  char tmpl[] = "/tmp/bench-tune-test-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir == nullptr ? std::string("/tmp") : std::string(dir);
}

// --help: "1 ... a --csv/--json/--tune file could not be written". The loopback run ignored the
// writes' results and exited 0.
TEST(BenchFiles, LoopbackReportsAFileItCouldNotWrite) {
  BenchOptions options;
  LoopbackInfo info;
  const std::vector<LoopbackVariant> variants = loopbackVariants(2);
  const std::string dir = scratchDir();
  options.csvPath = dir + "/l.csv";
  options.jsonPath = dir + "/l.json";
  EXPECT_TRUE(writeLoopbackFiles(options, info, variants, {}));
  EXPECT_NE(readAll(options.jsonPath).find("loopback"), std::string::npos);
  options.csvPath = dir + "/no-such-folder/l.csv";
  EXPECT_FALSE(writeLoopbackFiles(options, info, variants, {}));
  options.csvPath.clear();
  options.jsonPath = dir + "/no-such-folder/l.json";
  EXPECT_FALSE(writeLoopbackFiles(options, info, variants, {}));
}

// A write that fails half-way (disk full; here the file-size limit) must leave the older file as it
// was: a tuning file cut short is one the plugin rejects in every job that starts meanwhile.
TEST(BenchFiles, AFailedWriteLeavesTheOlderFileWhole) {
  const std::string dir = scratchDir();
  const std::string path = dir + "/tuning.json";
  const std::string old = "{\"version\": 1, \"old\": true}\n";
  ASSERT_TRUE(writeResultFile(path, old, "tuning"));
  EXPECT_EQ(readAll(path), old);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u & ~[] { const mode_t m = umask(0); umask(m); return m; }());

  struct rlimit saved {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 16;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const bool written = writeResultFile(path, std::string(4096, 'x'), "tuning");
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  EXPECT_FALSE(written);
  EXPECT_EQ(readAll(path), old);

  ASSERT_TRUE(writeResultFile(path, "new\n", "tuning"));
  EXPECT_EQ(readAll(path), "new\n");
}

TEST(BenchFiles, PathProblemsNameTheirReason) {
  const std::string dir = scratchDir();
  EXPECT_EQ(resultPathProblem(dir + "/new.json"), "");
  EXPECT_EQ(resultPathProblem(dir), "is a folder");
  EXPECT_NE(resultPathProblem(dir + "/missing/new.json").find("No such file or directory"), std::string::npos);
  ASSERT_TRUE(writeResultFile(dir + "/file", "x\n", "CSV"));
  EXPECT_NE(resultPathProblem(dir + "/file/new.json").find("is not a folder"), std::string::npos);
  EXPECT_TRUE(sameResultPath(dir + "/a.csv", dir + "/./a.csv"));
  EXPECT_FALSE(sameResultPath(dir + "/a.csv", dir + "/b.csv"));
}

}  // namespace
}  // namespace nccl_lamport::bench
