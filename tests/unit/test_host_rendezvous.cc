// plugin/comm/host_rendezvous with forked processes as the ranks: one verdict for every rank, in
// bounded time, for a full set, a missing rank, a mismatched nRanks, an incapable rank, a rank
// that dies after joining, two communicators with the same commId one after the other, and a
// process that holds the rendezvous name and never accepts.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/comm/host_rendezvous.h"

namespace nccl_lamport {
namespace {

struct RankOutcome {
  bool reported = false;  // the child wrote its results (false: it died or hung)
  std::vector<int> ok;     // per round
  std::vector<int> index;
  std::vector<std::string> order;  // per round: the payloads in the agreed order, joined
};

struct Plan {
  RendezvousJoin join;
  const char* hooks = nullptr;
  int startDelayMs = 0;
  int rounds = 1;
};

// Commids unique to this run: other test processes on the machine use the same namespace.
uint64_t freshCommId() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
}

// Forks one child per plan; each runs its rounds and writes "ok index order" lines to a pipe.
// Returns the outcomes and the wall time until every child ended (bounded by limitMs).
std::vector<RankOutcome> runRanks(const std::vector<Plan>& plans, uint64_t timeoutMs, int limitMs, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> readEnds;
  std::vector<pid_t> pids;
  for (const Plan& plan : plans) {
    int fds[2];
    if (pipe(fds) != 0) ADD_FAILURE() << "pipe";
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      usleep(static_cast<useconds_t>(plan.startDelayMs) * 1000);
      std::string out;
      for (int round = 0; round < plan.rounds; ++round) {
        const RendezvousResult r = hostRendezvous(plan.join, timeoutMs, plan.hooks);
        std::string order;
        for (const auto& p : r.payloads) order += std::string(p.begin(), p.end()) + ",";
        out += std::to_string(r.ok ? 1 : 0) + " " + std::to_string(r.index) + " " + (order.empty() ? "-" : order) + "\n";
      }
      if (write(fds[1], out.data(), out.size()) < 0) _exit(2);
      _exit(0);
    }
    close(fds[1]);
    readEnds.push_back(fds[0]);
    pids.push_back(pid);
  }
  std::vector<RankOutcome> outcomes(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    std::string text;
    char buf[4096];
    for (;;) {
      const int left = limitMs - static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      std::chrono::steady_clock::now() - start)
                                                      .count());
      pollfd p{readEnds[i], POLLIN, 0};
      if (left <= 0 || poll(&p, 1, left) <= 0) break;
      const ssize_t n = read(readEnds[i], buf, sizeof(buf));
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    close(readEnds[i]);
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t end = text.find('\n', pos);
      const std::string line = text.substr(pos, end - pos);
      pos = end == std::string::npos ? text.size() : end + 1;
      int ok = 0, index = -1;
      char order[4096] = {0};
      if (std::sscanf(line.c_str(), "%d %d %4095s", &ok, &index, order) == 3) {
        outcomes[i].reported = true;
        outcomes[i].ok.push_back(ok);
        outcomes[i].index.push_back(index);
        outcomes[i].order.push_back(order);
      }
    }
  }
  for (pid_t pid : pids) {
    kill(pid, SIGKILL);  // any still running (a hang) is a failure the checks below report
    waitpid(pid, nullptr, 0);
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcomes;
}

Plan rank(uint64_t commId, uint32_t nRanks, const std::string& payload) {
  Plan p;
  p.join.commId = commId;
  p.join.nRanks = nRanks;
  p.join.payload.assign(payload.begin(), payload.end());
  return p;
}

TEST(HostRendezvous, FourRanksAgreeOnOneOrderAndEveryPayload) {
  const uint64_t id = freshCommId();
  std::vector<Plan> plans;
  for (int i = 0; i < 4; ++i) plans.push_back(rank(id, 4, "rank" + std::to_string(i)));
  double seconds = 0;
  const auto out = runRanks(plans, 3000, 10000, &seconds);
  std::vector<int> seen(4, 0);
  for (const RankOutcome& o : out) {
    ASSERT_TRUE(o.reported);
    EXPECT_EQ(o.ok[0], 1);
    ASSERT_GE(o.index[0], 0);
    ASSERT_LT(o.index[0], 4);
    ++seen[o.index[0]];
    EXPECT_EQ(o.order[0], out[0].order[0]);  // the same order everywhere
  }
  EXPECT_EQ(seen, std::vector<int>(4, 1));
  for (int i = 0; i < 4; ++i) EXPECT_NE(out[0].order[0].find("rank" + std::to_string(i) + ","), std::string::npos);
  EXPECT_LT(seconds, 3.0);
}

void expectAllRefused(const std::vector<RankOutcome>& out, size_t expectReported) {
  size_t reported = 0;
  for (const RankOutcome& o : out) {
    if (!o.reported) continue;
    ++reported;
    for (int ok : o.ok) EXPECT_EQ(ok, 0);
  }
  EXPECT_EQ(reported, expectReported);
}

TEST(HostRendezvous, AMissingRankMeansNoForEveryoneWithinTheBound) {
  const uint64_t id = freshCommId();
  std::vector<Plan> plans;
  for (int i = 0; i < 3; ++i) plans.push_back(rank(id, 4, "r" + std::to_string(i)));
  double seconds = 0;
  const auto out = runRanks(plans, 1000, 10000, &seconds);
  expectAllRefused(out, 3);
  EXPECT_GE(seconds, 0.9);
  EXPECT_LT(seconds, 4.5);  // timeout + the follower's margin
}

TEST(HostRendezvous, AMismatchedNRanksMeansNoForEveryone) {
  const uint64_t id = freshCommId();
  std::vector<Plan> plans;
  for (int i = 0; i < 3; ++i) plans.push_back(rank(id, 4, "r" + std::to_string(i)));
  plans.push_back(rank(id, 5, "odd"));
  double seconds = 0;
  const auto out = runRanks(plans, 1000, 10000, &seconds);
  expectAllRefused(out, 4);
  EXPECT_LT(seconds, 4.5);
}

TEST(HostRendezvous, AnIncapableRankMeansNoForEveryone) {
  const uint64_t id = freshCommId();
  std::vector<Plan> plans;
  for (int i = 0; i < 4; ++i) plans.push_back(rank(id, 4, "r" + std::to_string(i)));
  plans[2].join.capable = false;
  double seconds = 0;
  const auto out = runRanks(plans, 3000, 10000, &seconds);
  expectAllRefused(out, 4);
  EXPECT_LT(seconds, 3.0);  // no waiting: everyone joined
}

TEST(HostRendezvous, ARankThatDiesAfterJoiningMeansNoForTheOthers) {
  const uint64_t id = freshCommId();
  std::vector<Plan> plans;
  for (int i = 0; i < 4; ++i) plans.push_back(rank(id, 4, "r" + std::to_string(i)));
  plans[3].hooks = "die-after-join";
  plans[3].startDelayMs = 200;  // joins last, as a follower
  double seconds = 0;
  const auto out = runRanks(plans, 2000, 12000, &seconds);
  expectAllRefused(out, 3);
  EXPECT_FALSE(out[3].reported);
  EXPECT_LT(seconds, 6.0);
}

TEST(HostRendezvous, TwoCommunicatorsWithOneCommIdInTurnBothMeet) {
  const uint64_t id = freshCommId();
  std::vector<Plan> plans;
  for (int i = 0; i < 4; ++i) {
    plans.push_back(rank(id, 4, "r" + std::to_string(i)));
    plans.back().rounds = 3;
    plans.back().startDelayMs = 20 * i;
  }
  double seconds = 0;
  const auto out = runRanks(plans, 3000, 20000, &seconds);
  for (const RankOutcome& o : out) {
    ASSERT_TRUE(o.reported);
    ASSERT_EQ(o.ok.size(), 3u);
    for (size_t round = 0; round < 3; ++round) {
      EXPECT_EQ(o.ok[round], 1) << "round " << round;
      EXPECT_EQ(o.order[round], out[0].order[round]);
    }
  }
}

// Forks a process that binds `join`'s rendezvous name (as user `uid`), listens with `backlog`,
// fills its queue with `queued` connections of its own and never accepts. Returns its pid once
// the name is held, or -1.
pid_t holdTheName(const RendezvousJoin& join, uid_t uid, int backlog, int queued) {
  const std::string name = hostRendezvousName(join);  // computed under our uid, before setuid
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    if (uid != getuid() && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(2);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(listener, reinterpret_cast<const sockaddr*>(&addr), length) != 0 || listen(listener, backlog) != 0) {
      _exit(3);
    }
    for (int i = 0; i < queued; ++i) {
      const int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (connect(c, reinterpret_cast<const sockaddr*>(&addr), length) != 0) _exit(4);
    }
    const char one = 1;
    if (write(ready[1], &one, 1) != 1) _exit(5);
    for (;;) pause();
  }
  close(ready[1]);
  char got = 0;
  pollfd p{ready[0], POLLIN, 0};
  const bool held = poll(&p, 1, 5000) == 1 && read(ready[0], &got, 1) == 1 && got == 1;
  close(ready[0]);
  if (!held) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

// One rank of a 2-rank communicator whose name holdTheName(uid, backlog, queued) holds: it must
// give up within its 300 ms timeout (no verdict, no hang).
void expectTheHolderCostsAtMostTheTimeout(uid_t uid, int backlog, int queued) {
  const Plan plan = rank(freshCommId(), 2, "r0");
  const pid_t holder = holdTheName(plan.join, uid, backlog, queued);
  ASSERT_GT(holder, 0);
  double seconds = 0;
  const auto out = runRanks({plan}, 300, 5000, &seconds);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  expectAllRefused(out, 1);
  EXPECT_LT(seconds, 2.0);
}

// A holder of the name that never accepts, its queue full: a stopped or wedged process of ours.
// (A fresh review found a blocking connect() parked in the kernel here for ever, inside NCCL's
// communicator init.)
TEST(HostRendezvous, AHolderWithAFullQueueCostsAtMostTheTimeout) {
  expectTheHolderCostsAtMostTheTimeout(getuid(), /*backlog=*/0, /*queued=*/1);
}

// The name is predictable (uid, commHash, nRanks): a process of another user may hold it and
// never accept. The rank refuses it (SO_PEERCRED) and retries, and its retries fill the holder's
// queue of 8.
TEST(HostRendezvous, AHolderOfAnotherUserCostsAtMostTheTimeout) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run the holder as another user";
  expectTheHolderCostsAtMostTheTimeout(65534, /*backlog=*/8, /*queued=*/0);
}

}  // namespace
}  // namespace nccl_lamport
