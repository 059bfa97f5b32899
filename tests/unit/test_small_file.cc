// readSmallRegularFile (common/small_file.h), which reads the tuning file and nccl.conf: the whole
// text up to the limit, and one-line reasons, at once, for what it refuses (a FIFO nobody writes
// must not block the caller).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <string>

#include "common/small_file.h"

namespace nccl_lamport {
namespace {

class SmallFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/lamport-small-file-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const char* name : {"/a.txt", "/pipe", "/sub"}) {
      std::remove((dir_ + name).c_str());
    }
    rmdir(dir_.c_str());
  }
  std::string dir_;
};

TEST_F(SmallFileTest, ReadsARegularFileUpToTheLimit) {
  const std::string path = dir_ + "/a.txt";
  const std::string body = std::string("line one\nline two\n") + std::string(1000, 'x');
  std::ofstream(path) << body;
  std::string text = "stale";
  std::string error;
  ASSERT_TRUE(readSmallRegularFile(path, body.size(), &text, &error)) << error;  // exactly the limit
  EXPECT_EQ(text, body);
  text = "stale";
  EXPECT_FALSE(readSmallRegularFile(path, body.size() - 1, &text, &error));
  EXPECT_EQ(error, "is larger than " + std::to_string(body.size() - 1) + " bytes");
  EXPECT_TRUE(text.empty()) << "a refused file leaves no partial text";
}

TEST_F(SmallFileTest, RefusesWhatIsMissingNotAFileOrAFifoAtOnce) {
  std::string text;
  std::string error;
  EXPECT_FALSE(readSmallRegularFile(dir_ + "/missing", 1024, &text, &error));
  EXPECT_EQ(error.rfind("cannot be read (", 0), 0u) << error;
  ASSERT_EQ(mkdir((dir_ + "/sub").c_str(), 0700), 0);
  EXPECT_FALSE(readSmallRegularFile(dir_ + "/sub", 1024, &text, &error));
  EXPECT_EQ(error, "is not a regular file");

  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto done = std::async(std::launch::async, [&fifo] {
    std::string t;
    std::string e;
    return readSmallRegularFile(fifo, 1024, &t, &e) ? std::string("read") : e;
  });
  const bool returned = done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!returned) {  // unblock the reader so that the test fails instead of hanging
    const int fd = open(fifo.c_str(), O_WRONLY);
    if (fd >= 0) close(fd);
  }
  const std::string result = done.get();
  EXPECT_TRUE(returned) << "the read waited more than 5 s on a FIFO";
  EXPECT_EQ(result, "is not a regular file");
}

}  // namespace
}  // namespace nccl_lamport
