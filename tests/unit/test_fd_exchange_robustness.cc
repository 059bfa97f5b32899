// Tests of plugin/transport/fd_exchange.cc, robustness: bounded waits on both sides (too few
// clients, no server, a server that never serves), invalid arguments, unique and well-formed
// socket names (across threads and a forked child), several servers at once, waits interrupted by
// signals, and no descriptor left open on any path. Delivery itself is in test_fd_exchange.cc.
// CPU only; this executable never touches CUDA (it forks).
#include "plugin/transport/fd_exchange.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/fd_exchange_test_support.h"

namespace nccl_lamport {
namespace {

using namespace fdtest;  // NOLINT(build/namespaces): the helpers of these tests

TEST(FdExchange, ServeTimesOutWhenTooFewClientsCome) {
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  int receivedFd = -2;
  std::thread client([&] { receivedFd = receiveFd(name, 5000); });
  auto start = Clock::now();
  EXPECT_FALSE(server.serve(memfd, 3, 300));
  int64_t took = elapsedMs(start);
  client.join();
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 2000);
  // The one client that came still got its descriptor.
  EXPECT_GE(receivedFd, 0);
  if (receivedFd >= 0) close(receivedFd);
  // The socket is gone afterwards: a late client fails (quickly, by its own timeout).
  start = Clock::now();
  EXPECT_EQ(receiveFd(name, 100), -1);
  EXPECT_LT(elapsedMs(start), 1500);
  close(memfd);
}

TEST(FdExchange, ServeTimesOutWithNoClientAtAll) {
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  auto start = Clock::now();
  EXPECT_FALSE(server.serve(memfd, 1, 200));
  int64_t took = elapsedMs(start);
  EXPECT_GE(took, 150);
  EXPECT_LT(took, 1500);
  // Zero timeout: one look, no wait.
  ASSERT_TRUE(server.open(&name));
  start = Clock::now();
  EXPECT_FALSE(server.serve(memfd, 1, 0));
  EXPECT_LT(elapsedMs(start), 500);
  close(memfd);
}

TEST(FdExchange, ReceiveFromMissingServerTimesOut) {
  auto start = Clock::now();
  EXPECT_EQ(receiveFd("nccl-lamport.0.0000000000000000.does-not-exist", 300), -1);
  int64_t took = elapsedMs(start);
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 2000);
  start = Clock::now();
  EXPECT_EQ(receiveFd("nccl-lamport.0.0000000000000000.does-not-exist", 0), -1);
  EXPECT_LT(elapsedMs(start), 500);
}

// The workspace set-up fetches from servers that listened before their names were exchanged: a
// refused connection there means the peer's process (or its server) is gone, and waiting the
// whole timeout for it, peer after peer, only delays the communicator's init.
TEST(FdExchange, ReceiveFromAServerThatIsGoneDoesNotWait) {
  std::string name;
  {
    FdServer server;
    ASSERT_TRUE(server.open(&name));
  }  // closed: its name is free again
  const auto start = Clock::now();
  EXPECT_EQ(receiveFd(name, 3000, FdServerState::kListening), -1);
  EXPECT_LT(elapsedMs(start), 1000) << "retried a refused connection to a server known to have listened";
}

TEST(FdExchange, ReceiveFromServerThatNeverServesTimesOut) {
  // Connected (queued in the backlog) but never answered: bounded by the timeout.
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  auto start = Clock::now();
  EXPECT_EQ(receiveFd(name, 300), -1);
  int64_t took = elapsedMs(start);
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 2000);
}

TEST(FdExchange, InvalidArguments) {
  FdServer notOpened;
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  EXPECT_FALSE(notOpened.serve(memfd, 1, 100));
  EXPECT_FALSE(notOpened.open(nullptr));
  EXPECT_EQ(receiveFd("", 100), -1);
  EXPECT_EQ(receiveFd(std::string(200, 'x'), 100), -1);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  EXPECT_FALSE(server.serve(-1, 1, 100));
  // Zero clients: nothing to do, success.
  ASSERT_TRUE(server.open(&name));
  EXPECT_TRUE(server.serve(memfd, 0, 100));
  close(memfd);
}

TEST(FdExchange, NamesAreUniqueAndWellFormed) {
  std::set<std::string> names;
  const std::string prefix = "nccl-lamport." + std::to_string(getpid()) + ".";
  for (int i = 0; i < 1000; ++i) {
    FdServer server;
    std::string name;
    ASSERT_TRUE(server.open(&name));
    ASSERT_LT(name.size(), static_cast<size_t>(kFdServerNameBytes));
    ASSERT_EQ(name.compare(0, prefix.size(), prefix), 0) << name;
    ASSERT_TRUE(names.insert(name).second) << "duplicate " << name;
  }
  // From several threads at once, keeping the servers open (binding would also catch a clash).
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> perThread(4);
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<FdServer> servers(50);
      for (auto& server : servers) {
        std::string name;
        if (!server.open(&name)) failures.fetch_add(1);
        perThread[t].push_back(name);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (auto& list : perThread) {
    for (auto& name : list) EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
  }
  // Across processes: a forked child (same counter state, same random generator state) makes
  // names of its own; none may collide with ours.
  int pipeFds[2];
  ASSERT_EQ(pipe2(pipeFds, O_CLOEXEC), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipeFds[0]);
    for (int i = 0; i < 100; ++i) {
      FdServer server;
      std::string name;
      if (!server.open(&name)) _exit(2);
      name.push_back('\n');
      if (write(pipeFds[1], name.data(), name.size()) != static_cast<ssize_t>(name.size())) {
        _exit(3);
      }
    }
    _exit(0);
  }
  close(pipeFds[1]);
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipeFds[0], buf, sizeof(buf))) > 0) all.append(buf, static_cast<size_t>(n));
  close(pipeFds[0]);
  EXPECT_EQ(waitChild(pid), 0);
  int childNames = 0;
  size_t start = 0;
  for (size_t nl; (nl = all.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string name = all.substr(start, nl - start);
    ++childNames;
    EXPECT_LT(name.size(), static_cast<size_t>(kFdServerNameBytes));
    EXPECT_TRUE(names.insert(name).second) << "child duplicated " << name;
  }
  EXPECT_EQ(childNames, 100);
}

TEST(FdExchange, ConcurrentServersInOneProcess) {
  constexpr int kServers = 4;
  constexpr int kClientsEach = 2;
  int memfds[kServers];
  std::string contents[kServers];
  for (int s = 0; s < kServers; ++s) {
    contents[s] = std::string(kContent) + "#" + std::to_string(s);
    memfds[s] = makeMemfd(contents[s]);
    ASSERT_GE(memfds[s], 0);
  }
  std::atomic<int> served{0};
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < kServers; ++s) {
    threads.emplace_back([&, s] {
      FdServer server;
      std::string name;
      if (!server.open(&name)) return;
      std::vector<std::thread> clients;
      for (int c = 0; c < kClientsEach; ++c) {
        clients.emplace_back([&, name, s] {
          int fd = receiveFd(name, 5000);
          if (fd >= 0) {
            if (readAll(fd) == contents[s]) good.fetch_add(1);
            close(fd);
          }
        });
      }
      if (server.serve(memfds[s], kClientsEach, 5000)) served.fetch_add(1);
      for (auto& t : clients) t.join();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(served.load(), kServers);
  EXPECT_EQ(good.load(), kServers * kClientsEach);
  for (int fd : memfds) close(fd);
}

void ignoreSignal(int) {}

TEST(FdExchange, SurvivesSignalsWhileWaiting) {
  // poll() is never restarted after a signal handler: EINTR must be handled on both sides.
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = ignoreSignal;  // no SA_RESTART
  struct sigaction previous;
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);

  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  FdServer server;
  std::string name;
  ASSERT_TRUE(server.open(&name));
  pthread_t serverThread = pthread_self();
  std::atomic<bool> stop{false};
  std::string seen;
  std::thread client([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    int fd = receiveFd(name, 5000);
    if (fd >= 0) {
      seen = readAll(fd);
      close(fd);
    }
  });
  std::thread pester([&] {
    while (!stop.load()) {
      pthread_kill(serverThread, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  EXPECT_TRUE(server.serve(memfd, 1, 5000));
  stop.store(true);
  pester.join();
  client.join();
  EXPECT_EQ(seen, kContent);

  // Client side: a receiver interrupted while waiting for a slow server.
  ASSERT_TRUE(server.open(&name));
  int receivedFd = -2;
  std::atomic<bool> received{false};
  std::thread receiver([&] {
    receivedFd = receiveFd(name, 5000);
    received.store(true);
  });
  pthread_t receiverThread = receiver.native_handle();
  // Signals stop before the receiver is joined, so the thread id stays valid while used.
  std::thread pester2([&] {
    while (!received.load()) {
      pthread_kill(receiverThread, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(server.serve(memfd, 1, 5000));
  pester2.join();
  receiver.join();
  EXPECT_GE(receivedFd, 0);
  if (receivedFd >= 0) {
    EXPECT_EQ(readAll(receivedFd), kContent);
    close(receivedFd);
  }
  close(memfd);
  sigaction(SIGUSR1, &previous, nullptr);
}

TEST(FdExchange, NoDescriptorLeaks) {
  int before = countOpenFds();
  ASSERT_GT(before, 0);
  int memfd = makeMemfd(kContent);
  ASSERT_GE(memfd, 0);
  for (int round = 0; round < 3; ++round) {
    {  // success with threads
      FdServer server;
      std::string name;
      ASSERT_TRUE(server.open(&name));
      std::vector<std::thread> clients;
      for (int i = 0; i < 3; ++i) {
        clients.emplace_back([&] {
          int fd = receiveFd(name, 5000);
          if (fd >= 0) close(fd);
        });
      }
      EXPECT_TRUE(server.serve(memfd, 3, 5000));
      for (auto& t : clients) t.join();
    }
    {  // success with a forked child
      FdServer server;
      std::string name;
      ASSERT_TRUE(server.open(&name));
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) _exit(receiveFd(name, 5000) >= 0 ? 0 : 2);
      EXPECT_TRUE(server.serve(memfd, 1, 5000));
      EXPECT_EQ(waitChild(pid), 0);
    }
    {  // timeout with one client of two
      FdServer server;
      std::string name;
      ASSERT_TRUE(server.open(&name));
      std::thread client([&] {
        int fd = receiveFd(name, 5000);
        if (fd >= 0) close(fd);
      });
      EXPECT_FALSE(server.serve(memfd, 2, 100));
      client.join();
    }
    {  // client gives up on a server that never serves, then the server is destroyed
      FdServer server;
      std::string name;
      ASSERT_TRUE(server.open(&name));
      EXPECT_EQ(receiveFd(name, 50), -1);
    }
    {  // open twice (replaces the socket), never served
      FdServer server;
      std::string name1, name2;
      ASSERT_TRUE(server.open(&name1));
      ASSERT_TRUE(server.open(&name2));
      EXPECT_NE(name1, name2);
      EXPECT_EQ(receiveFd(name1, 50), -1);  // the first socket is closed
    }
    EXPECT_EQ(receiveFd("nccl-lamport.missing", 30), -1);
    FdServer unopened;
    EXPECT_FALSE(unopened.serve(memfd, 1, 10));
  }
  close(memfd);
  EXPECT_EQ(countOpenFds(), before);
}

}  // namespace
}  // namespace nccl_lamport
