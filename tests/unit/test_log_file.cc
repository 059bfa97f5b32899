// NCCL_DEBUG_FILE and our own printer (common/log.cc). NCCL 2.28 writes its lines to the file that
// NCCL_DEBUG_FILE names ("%h" the host name, "%p" the pid) when NCCL_DEBUG is above VERSION; our
// lines printed before NCCL hands us its logger (the knob WARNs, "using NCCL ..." and everything in
// a process where NCCL never calls the tuner's init) must land there too, not on stdout.
//
// Each case runs in a child process (the level is read from the environment once per process),
// with its stdout sent to a file of its own so the parent can tell where the line went.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "common/log.h"

namespace nccl_lamport {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/lamport-log-file-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { (void)system(("rm -rf '" + dir_ + "'").c_str()); }

  // Runs one INFO and one WARN line in a child with NCCL_DEBUG=INFO and NCCL_DEBUG_FILE=debugFile;
  // returns the child's pid (for "%p"), its stdout in *out.
  pid_t logInChild(const std::string& debugFile, std::string* out) {
    const std::string stdoutPath = dir_ + "/stdout";
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = open(stdoutPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(10);
      setenv("NCCL_DEBUG", "INFO", 1);
      setenv("NCCL_DEBUG_FILE", debugFile.c_str(), 1);
      detail::gLogLevel.store(-1);  // read the environment again, as a fresh process does
      LAMPORT_INFO(kSubsysInit, "an info line");
      LAMPORT_WARN("a warn line");
      fflush(stdout);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    *out = readAll(stdoutPath);
    return pid;
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

}  // namespace
}  // namespace nccl_lamport
