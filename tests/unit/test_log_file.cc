// NCCL_DEBUG_FILE and our own printer (common/log.cc, common/log_file.cc). NCCL 2.28 writes its lines
// to the file that NCCL_DEBUG_FILE names ("%h" the host name, "%p" the pid) when NCCL_DEBUG is above
// VERSION; our lines printed before NCCL hands us its logger (the knob WARNs, "using NCCL ..." and
// everything in a process where NCCL never calls the tuner's init) must land there too, not on
// stdout, without being wiped by NCCL's truncating open and without overwriting NCCL's lines.
//
// Each case runs in a child process (the level is read from the environment once per process),
// with its stdout sent to a file of its own so the parent can tell where the line went. The child
// ends with exit(), not _exit(): lines that wait for NCCL's file are written by an exit handler.
// "NCCL" here is a stand-in that writes as NCCL 2.28's src/debug.cc does: fopen(name, "w"), a
// line-buffered stream, one fwrite() per line.
#include <fcntl.h>
#include <limits.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/log_file.h"

namespace nccl_lamport {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Opens the debug file as NCCL 2.28 does (src/debug.cc): fopen(name, "w"), line-buffered.
FILE* openLikeNccl(const std::string& path) {
  FILE* file = fopen(path.c_str(), "w");
  if (file != nullptr) setlinebuf(file);
  return file;
}

// One line as NCCL writes it: the whole line in one fwrite() on that stream.
void ncclWrites(FILE* file, const std::string& line) { fwrite(line.data(), 1, line.size(), file); }

// A stand-in for NCCL's logger that has no file (so prints to stdout): "MOCK <level> <text>".
void printingNcclLogger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  char text[2048];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  printf("MOCK %d %s\n", level, text);
}

size_t countOf(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

// The non-empty lines of text.
std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// True when each of `parts` occurs exactly once in text, in this order.
::testing::AssertionResult onceInOrder(const std::string& text, const std::vector<std::string>& parts) {
  size_t previous = 0;
  for (const std::string& part : parts) {
    if (countOf(text, part) != 1) return ::testing::AssertionFailure() << "'" << part << "' not exactly once in:\n" << text;
    const size_t at = text.find(part);
    if (at < previous) return ::testing::AssertionFailure() << "'" << part << "' out of order in:\n" << text;
    previous = at;
  }
  return ::testing::AssertionSuccess();
}

class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/lamport-log-file-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { (void)system(("rm -rf '" + dir_ + "'").c_str()); }

  // Runs `body` in a child with NCCL_DEBUG=level and NCCL_DEBUG_FILE=debugFile, its stdout sent to
  // dir_/stdout; returns the child's pid (for "%p"), its stdout in *out. The child exits with
  // exit(0) after body (lines still pending are written by the exit handler).
  pid_t runInChild(const std::string& debugFile, const std::function<void()>& body, std::string* out,
                   const char* level = "INFO") {
    const std::string stdoutPath = dir_ + "/stdout";
    fflush(stdout);  // nothing of ours buffered for the child to write again
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = open(stdoutPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(10);
      setenv("NCCL_DEBUG", level, 1);
      setenv("NCCL_DEBUG_FILE", debugFile.c_str(), 1);
      setenv("NCCL_DEBUG_TIMESTAMP_LEVELS", "", 1);  // no timestamps: lines easier to compare
      detail::gLogLevel.store(-1);  // read the environment again, as a fresh process does
      setLogDeviceQuery(nullptr);
      body();
      exit(0);  // runs the exit handler that writes lines still waiting for NCCL's file
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    *out = readAll(stdoutPath);
    return pid;
  }

  // One INFO and one WARN line in a child (see runInChild).
  pid_t logInChild(const std::string& debugFile, std::string* out) {
    return runInChild(debugFile, [] {
      LAMPORT_INFO(kSubsysInit, "an info line");
      LAMPORT_WARN("a warn line");
    }, out);
  }

  std::string dir_;
};

TEST_F(LogFileTest, OurLinesGoToNcclDebugFile) {
  std::string out;
  const pid_t pid = logInChild(dir_ + "/nccl.%p.log", &out);
  const std::string file = readAll(dir_ + "/nccl." + std::to_string(pid) + ".log");
  EXPECT_NE(file.find("NCCL INFO Lamport: an info line\n"), std::string::npos) << "file: " << file;
  EXPECT_NE(file.find("NCCL WARN Lamport: a warn line\n"), std::string::npos) << "file: " << file;
  EXPECT_EQ(out.find("Lamport:"), std::string::npos) << "stdout: " << out;
}

TEST_F(LogFileTest, HostNameInTheFileName) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  if (char* dot = strchr(host, '.')) *dot = '\0';
  std::string out;
  const pid_t pid = logInChild(dir_ + "/%h-%p-100%%.log", &out);
  const std::string file = readAll(dir_ + "/" + host + "-" + std::to_string(pid) + "-100%.log");
  EXPECT_NE(file.find("NCCL INFO Lamport: an info line\n"), std::string::npos) << "file: " << file;
}

// As NCCL does when the file cannot be opened: the lines stay on stdout.
TEST_F(LogFileTest, UnwritableFileLeavesLinesOnStdout) {
  std::string out;
  logInChild(dir_ + "/no/such/dir/nccl.log", &out);
  EXPECT_NE(out.find("NCCL INFO Lamport: an info line\n"), std::string::npos) << "stdout: " << out;
}

TEST(LogFileName, ExpandsAsNcclDoes) {
  EXPECT_EQ(expandDebugFileName("/tmp/a%%b-%h-%p-%x-%", "node1", 42), "/tmp/a%b-node1-42-%x-%");
  EXPECT_EQ(expandDebugFileName("", "node1", 42), "");
  EXPECT_EQ(expandDebugFileName(nullptr, "node1", 42), "");
  EXPECT_EQ(expandDebugFileName(std::string(PATH_MAX + 10, 'a').c_str(), "h", 1).size(), size_t{PATH_MAX});
  char host[1024] = {0};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  if (char* dot = strchr(host, '.')) *dot = '\0';
  EXPECT_STREQ(ncclStyleHostName(), host);
}

// Lines printed before NCCL opens (and truncates) its file are written into it once it is open,
// in order, after NCCL's first line; a stale file of that name is not mistaken for NCCL's.
TEST_F(LogFileTest, LinesBeforeNcclOpensTheFileSurviveItsTruncation) {
  const std::string name = dir_ + "/nccl.log";
  { std::ofstream stale(name); stale << "stale line of an earlier run\n"; }
  std::string out;
  runInChild(name, [&] {
    LAMPORT_INFO(kSubsysInit, "early one");
    LAMPORT_WARN("early two");
    FILE* nccl = openLikeNccl(name);
    if (nccl == nullptr) _exit(11);
    ncclWrites(nccl, "NCCL INFO nccl one\n");
    logFileCheckpoint();  // as after our call into NCCL's communicator init
    ncclWrites(nccl, "NCCL INFO nccl two\n");
    LAMPORT_INFO(kSubsysInit, "late one");
    ncclWrites(nccl, "NCCL INFO nccl three\n");
  }, &out);
  const std::string file = readAll(name);
  EXPECT_TRUE(onceInOrder(file, {"nccl one\n", "NCCL INFO Lamport: early one\n", "NCCL WARN Lamport: early two\n",
                                 "nccl two\n", "NCCL INFO Lamport: late one\n", "nccl three\n"}));
  EXPECT_EQ(file.find("stale"), std::string::npos) << file;
  EXPECT_EQ(out.find("Lamport:"), std::string::npos) << "stdout: " << out;
}

// Through the shared file offset neither writer overwrites the other: one after the other, and
// from two threads at once, every line of both is in the file once and whole.
TEST_F(LogFileTest, OurLinesAndNcclsInterleaveWithoutOverwriting) {
  const std::string name = dir_ + "/nccl.log";
  constexpr int kLines = 300;
  std::string out;
  runInChild(name, [&] {
    FILE* nccl = openLikeNccl(name);
    if (nccl == nullptr) _exit(11);
    ncclWrites(nccl, "nccl first\n");
    for (int i = 0; i < kLines; ++i) {
      LAMPORT_INFO(kSubsysInit, "ours %d", i);
      ncclWrites(nccl, "nccl " + std::to_string(i) + "\n");
    }
    std::thread ours([&] {
      for (int i = 0; i < kLines; ++i) LAMPORT_INFO(kSubsysInit, "threaded ours %d", i);
    });
    std::thread theirs([&] {
      for (int i = 0; i < kLines; ++i) ncclWrites(nccl, "threaded nccl " + std::to_string(i) + "\n");
    });
    ours.join();
    theirs.join();
  }, &out);
  const std::vector<std::string> lines = linesOf(readAll(name));
  ASSERT_EQ(lines.size(), size_t{1 + 4 * kLines});
  EXPECT_EQ(lines[0], "nccl first");
  for (int i = 0; i < kLines; ++i) {
    EXPECT_NE(lines[1 + 2 * i].find("NCCL INFO Lamport: ours " + std::to_string(i)), std::string::npos) << lines[1 + 2 * i];
    EXPECT_EQ(lines[2 + 2 * i], "nccl " + std::to_string(i));
  }
  int nextOurs = 0;
  int nextTheirs = 0;
  for (size_t k = 1 + 2 * kLines; k < lines.size(); ++k) {
    const std::string& line = lines[k];
    const std::string oursEnd = "NCCL INFO Lamport: threaded ours " + std::to_string(nextOurs);
    if (line.size() >= oursEnd.size() && line.compare(line.size() - oursEnd.size(), oursEnd.size(), oursEnd) == 0) {
      ++nextOurs;
    } else {
      EXPECT_EQ(line, "threaded nccl " + std::to_string(nextTheirs)) << "line " << k;
      ++nextTheirs;
    }
  }
  EXPECT_EQ(nextOurs, kLines);
  EXPECT_EQ(nextTheirs, kLines);
  EXPECT_EQ(out.find("Lamport:"), std::string::npos) << "stdout: " << out;
}

// Tuner mode with a file NCCL could not open (NCCL writes to stdout): the lines waiting for the
// file go through NCCL's logger when NCCL hands it over, in order.
TEST_F(LogFileTest, HandOffWithoutNcclFileReplaysThroughNcclsLogger) {
  std::string out;
  runInChild(dir_ + "/no/such/dir/nccl.log", [] {
    LAMPORT_INFO(kSubsysInit, "early info");
    LAMPORT_WARN("early warn");
    setNcclLogger(printingNcclLogger);
    LAMPORT_INFO(kSubsysInit, "late info");
  }, &out);
  EXPECT_TRUE(onceInOrder(out, {"MOCK 3 Lamport: early info\n", "MOCK 2 Lamport: early warn\n",
                                "MOCK 3 Lamport: late info\n"}));
  EXPECT_EQ(out.find("NCCL INFO Lamport:"), std::string::npos) << "stdout: " << out;
}

// Tuner mode, NCCL's file open: the waiting lines go into it, not through the logger.
TEST_F(LogFileTest, HandOffWithNcclFileOpenWritesIntoIt) {
  const std::string name = dir_ + "/nccl.log";
  std::string out;
  runInChild(name, [&] {
    LAMPORT_INFO(kSubsysInit, "early info");
    FILE* nccl = openLikeNccl(name);
    if (nccl == nullptr) _exit(11);
    ncclWrites(nccl, "nccl one\n");
    setNcclLogger(printingNcclLogger);
  }, &out);
  EXPECT_TRUE(onceInOrder(readAll(name), {"nccl one\n", "NCCL INFO Lamport: early info\n"}));
  EXPECT_EQ(out.find("MOCK"), std::string::npos) << "stdout: " << out;
}

// A forked child starts with nothing pending: the parent's waiting line is written once, by the
// parent; the child's own line goes to the child's file ("%p").
TEST_F(LogFileTest, ForkedChildDoesNotWriteTheParentsPendingLines) {
  const std::string pidFile = dir_ + "/forked.pid";
  std::string out;
  const pid_t pid = runInChild(dir_ + "/nccl.%p.log", [&] {
    LAMPORT_INFO(kSubsysInit, "before fork");
    fflush(stdout);
    const pid_t forked = fork();
    if (forked == 0) {
      LAMPORT_INFO(kSubsysInit, "in the forked child");
      exit(0);
    }
    int status = 0;
    if (waitpid(forked, &status, 0) != forked || !WIFEXITED(status) || WEXITSTATUS(status) != 0) _exit(12);
    std::ofstream(pidFile) << forked;
  }, &out);
  const std::string parentFile = readAll(dir_ + "/nccl." + std::to_string(pid) + ".log");
  const std::string childFile = readAll(dir_ + "/nccl." + readAll(pidFile) + ".log");
  EXPECT_EQ(countOf(parentFile, "Lamport: before fork\n"), 1u) << parentFile;
  EXPECT_EQ(countOf(parentFile, "in the forked child"), 0u) << parentFile;
  EXPECT_EQ(countOf(childFile, "Lamport: in the forked child\n"), 1u) << childFile;
  EXPECT_EQ(countOf(childFile, "before fork"), 0u) << childFile;
  EXPECT_EQ(out.find("Lamport:"), std::string::npos) << "stdout: " << out;
}

// Forked after NCCL's file was found: parent and child share NCCL's file offset, as NCCL's own
// stream in both does; nothing is overwritten.
TEST_F(LogFileTest, ForkedChildSharesNcclsFileOffset) {
  const std::string name = dir_ + "/nccl.log";
  std::string out;
  runInChild(name, [&] {
    FILE* nccl = openLikeNccl(name);
    if (nccl == nullptr) _exit(11);
    ncclWrites(nccl, "nccl parent one\n");
    LAMPORT_INFO(kSubsysInit, "parent one");
    const pid_t forked = fork();
    if (forked == 0) {
      LAMPORT_INFO(kSubsysInit, "child one");
      ncclWrites(nccl, "nccl child one\n");
      exit(0);
    }
    int status = 0;
    if (waitpid(forked, &status, 0) != forked || !WIFEXITED(status) || WEXITSTATUS(status) != 0) _exit(12);
    LAMPORT_INFO(kSubsysInit, "parent two");
    ncclWrites(nccl, "nccl parent two\n");
  }, &out);
  EXPECT_TRUE(onceInOrder(readAll(name), {"nccl parent one\n", "Lamport: parent one\n", "Lamport: child one\n",
                                          "nccl child one\n", "Lamport: parent two\n", "nccl parent two\n"}));
}

// More than kPendingLogBytes waiting: the oldest lines go to stdout (where NCCL writes without a
// file) rather than being dropped; the rest reach NCCL's file. Each line once, in order.
TEST_F(LogFileTest, FullBufferSpillsTheOldestLinesToStdout) {
  const std::string name = dir_ + "/nccl.log";
  constexpr int kLines = 1500;  // about 200 bytes each: several times the buffer
  std::string out;
  runInChild(name, [&] {
    for (int i = 0; i < kLines; ++i) LAMPORT_INFO(kSubsysInit, "filler %04d %s", i, std::string(60, 'x').c_str());
    FILE* nccl = openLikeNccl(name);
    if (nccl == nullptr) _exit(11);
    ncclWrites(nccl, "nccl one\n");
    LAMPORT_INFO(kSubsysInit, "last");
  }, &out);
  const std::string file = readAll(name);
  std::vector<int> ids;
  size_t onStdout = 0;
  for (const std::string* text : std::vector<const std::string*>{&out, &file}) {
    for (const std::string& line : linesOf(*text)) {
      const size_t at = line.find("Lamport: filler ");
      if (at != std::string::npos) ids.push_back(std::stoi(line.substr(at + 16, 4)));
    }
    if (text == &out) onStdout = ids.size();
  }
  ASSERT_EQ(ids.size(), size_t{kLines});
  for (int i = 0; i < kLines; ++i) EXPECT_EQ(ids[i], i);
  EXPECT_GT(onStdout, 0u);
  EXPECT_LT(onStdout, size_t{kLines});
  EXPECT_LT(file.find("nccl one\n"), file.find("Lamport: filler")) << "the rest waited for NCCL's file";
  EXPECT_TRUE(onceInOrder(file, {"nccl one\n", "Lamport: last\n"}));
}

// At NCCL_DEBUG=VERSION NCCL opens no file: our lines stay on stdout, no file appears.
TEST_F(LogFileTest, VersionLevelLeavesLinesOnStdout) {
  const std::string name = dir_ + "/nccl.log";
  std::string out;
  runInChild(name, [] { LAMPORT_LOG_(kLogVersion, kSubsysAll, "a version line"); }, &out, "VERSION");
  EXPECT_NE(out.find("Lamport: a version line\n"), std::string::npos) << "stdout: " << out;
  EXPECT_NE(access(name.c_str(), F_OK), 0) << "no file at VERSION";
}

// ncclResetDebugInit makes NCCL close and reopen its file with "w": our lines after it follow
// NCCL's new stream, with no hole of the old length before them.
TEST_F(LogFileTest, NcclReopeningItsFileIsFollowed) {
  const std::string name = dir_ + "/nccl.log";
  std::string out;
  runInChild(name, [&] {
    FILE* nccl = openLikeNccl(name);
    if (nccl == nullptr) _exit(11);
    ncclWrites(nccl, "nccl one\n");
    LAMPORT_INFO(kSubsysInit, "ours one");
    fclose(nccl);
    nccl = openLikeNccl(name);
    if (nccl == nullptr) _exit(11);
    // Longer than what stood before: the size alone cannot tell that the file was truncated.
    ncclWrites(nccl, "nccl two " + std::string(300, 'y') + "\n");
    LAMPORT_INFO(kSubsysInit, "ours two");
    ncclWrites(nccl, "nccl three\n");
  }, &out);
  const std::string file = readAll(name);
  EXPECT_EQ(file.find('\0'), std::string::npos) << "a hole in the file";
  EXPECT_EQ(file.find("nccl two "), 0u) << file;
  EXPECT_TRUE(onceInOrder(file, {"nccl two ", "y\n", "Lamport: ours two\n", "nccl three\n"}));
}

// A process that never opens NCCL's file (no NCCL call) appends at exit: lines another process
// wrote under the same name (no "%p") stay.
TEST_F(LogFileTest, ExitAppendsWithoutWipingOtherProcessesLines) {
  const std::string name = dir_ + "/nccl.log";
  { std::ofstream other(name); other << "another rank's line\n"; }
  std::string out;
  runInChild(name, [] { LAMPORT_INFO(kSubsysInit, "ours"); }, &out);
  EXPECT_TRUE(onceInOrder(readAll(name), {"another rank's line\n", "NCCL INFO Lamport: ours\n"}));
}

}  // namespace
}  // namespace nccl_lamport
