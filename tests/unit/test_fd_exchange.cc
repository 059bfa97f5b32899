// Tests of plugin/transport/fd_exchange.cc, delivery: the descriptor reaches every client that
// asks, threads of this process and forked child processes, as a new close-on-exec descriptor of
// the same file, and only clients of our own uid get it (issue 10). Failure modes (timeouts, bad
// arguments, signals), socket names and descriptor leaks are in test_fd_exchange_robustness.cc.
// CPU only; this executable never touches CUDA (it forks).
#include "plugin/transport/fd_exchange.h"

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/log_capture.h"
#include "tests/unit/fd_exchange_test_support.h"

namespace nccl_lamport {
namespace {

using namespace fdtest;  // NOLINT(build/namespaces): the helpers of these tests

TEST(FdExchange, OneClientThread) {
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  EXPECT_FALSE(name.empty());
  EXPECT_LT(name.size(), static_cast<size_t>(kFdServerNameBytes));

  std::string seen;
  bool cloexec = false;
  int receivedFd = -2;
  std::thread client([&] {
    int fd = receiveFd(name, 5000);
    receivedFd = fd;
    if (fd >= 0) {
      seen = readAll(fd);
      cloexec = isCloexec(fd);
      close(fd);
    }
  });
  EXPECT_TRUE(server.serve(memfd, 1, 5000));
  client.join();
  EXPECT_GE(receivedFd, 0);
  EXPECT_NE(receivedFd, memfd);
  EXPECT_EQ(seen, kContent);
  EXPECT_TRUE(cloexec);
  // Our own descriptor is untouched.
  EXPECT_GE(fcntl(memfd, F_GETFD), 0);
  EXPECT_EQ(readAll(memfd), kContent);
  close(memfd);
}

TEST(FdExchange, ThreeClientThreads) {
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&] {
      int fd = receiveFd(name, 5000);
      if (fd >= 0) {
        if (readAll(fd) == kContent && isCloexec(fd)) good.fetch_add(1);
        close(fd);
      }
    });
  }
  EXPECT_TRUE(server.serve(memfd, 3, 5000));
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), 3);
  close(memfd);
}

TEST(FdExchange, ClientConnectsBeforeServe) {
  // The listening socket queues a client that arrives before serve() runs.
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  std::string seen;
  std::thread client([&] {
    int fd = receiveFd(name, 5000);
    if (fd >= 0) {
      seen = readAll(fd);
      close(fd);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(server.serve(memfd, 1, 5000));
  client.join();
  EXPECT_EQ(seen, kContent);
  close(memfd);
}

TEST(FdExchange, PipeToOneForkedChild) {
  int pipeFds[2];
  ASSERT_EQ(pipe2(pipeFds, O_CLOEXEC), 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: drop the inherited copies so that only the received descriptor can carry the token.
    close(pipeFds[0]);
    close(pipeFds[1]);
    int fd = receiveFd(name, 5000);
    if (fd < 0) _exit(2);
    if (!isCloexec(fd)) _exit(3);
    const char token[] = "TOKEN-42";
    if (write(fd, token, sizeof(token) - 1) != static_cast<ssize_t>(sizeof(token) - 1)) _exit(4);
    close(fd);
    _exit(0);
  }
  bool served = server.serve(pipeFds[1], 1, 5000);
  close(pipeFds[1]);
  EXPECT_TRUE(served);
  std::string got;
  char buf[64];
  ssize_t n;
  while ((n = read(pipeFds[0], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
  close(pipeFds[0]);
  EXPECT_EQ(waitChild(pid), 0);
  EXPECT_EQ(got, "TOKEN-42");
}

// Hardening (issue 10): an abstract socket can be reached by any process of the network
// namespace, so the server hands the descriptor only to peers of its own effective uid
// (SO_PEERCRED). A forked child that switched to another uid connects first and must get nothing;
// a client of our uid that comes after it still gets the descriptor, and the stranger's
// connection does not count as one of the clients served. Needs root to switch uid.
// The order is enforced, not slept for: our uid's client starts only once the stranger's process
// has ended (its receiveFd is over), and the server must have logged that it dropped a connection
// from another user (a stranger that never reached the server proves nothing).
TEST(FdExchange, ClientOfAnotherUserGetsNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a client under another uid";
  LogCapture log;
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(memfd);
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
    int fd = receiveFd(name, 3000);
    _exit(fd >= 0 ? 1 : 0);  // 1: a stranger received our descriptor
  }
  std::string seen;
  int strangerExit = -1;
  std::thread sameUser([&] {
    strangerExit = waitChild(pid);  // the stranger has come and gone before we connect
    int fd = receiveFd(name, 5000);
    if (fd >= 0) {
      seen = readAll(fd);
      close(fd);
    }
  });
  const bool served = server.serve(memfd, 1, 10000);
  sameUser.join();
  EXPECT_TRUE(served);
  EXPECT_EQ(strangerExit, 0) << "exit 1: the other uid's client received the descriptor; 3: setresuid failed";
  EXPECT_EQ(seen, kContent);
  EXPECT_EQ(LogCapture::linesWith("another user").size(), 1u) << "the stranger's connection never reached the server's uid check";
  close(memfd);
}

TEST(FdExchange, MemfdToThreeForkedChildren) {
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(memfd);
      int fd = receiveFd(name, 5000);
      if (fd < 0) _exit(2);
      if (!isCloexec(fd)) _exit(3);
      if (readAll(fd) != kContent) _exit(4);
      close(fd);
      _exit(0);
    }
    children.push_back(pid);
  }
  EXPECT_TRUE(server.serve(memfd, 3, 5000));
  for (pid_t pid : children) EXPECT_EQ(waitChild(pid), 0);
  close(memfd);
}

TEST(FdExchange, ForkedChildrenMixedWithThreads) {
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  pid_t pid = fork();  // before any thread exists
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = receiveFd(name, 5000);
    _exit(fd >= 0 && readAll(fd) == kContent ? 0 : 2);
  }
  std::atomic<int> good{0};
  std::thread client([&] {
    int fd = receiveFd(name, 5000);
    if (fd >= 0) {
      if (readAll(fd) == kContent) good.fetch_add(1);
      close(fd);
    }
  });
  EXPECT_TRUE(server.serve(memfd, 2, 5000));
  client.join();
  EXPECT_EQ(good.load(), 1);
  EXPECT_EQ(waitChild(pid), 0);
  close(memfd);
}

}  // namespace
}  // namespace nccl_lamport
