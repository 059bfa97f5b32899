// GPU test of nccl-lamport-bench --loopback (bench/loopback.cc) run as a program: the run's own
// checks pass and it exits 0 where earlier builds failed. Without a GPU every test reports SKIPPED.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#ifndef NCCL_LAMPORT_BENCH_BINARY
#define NCCL_LAMPORT_BENCH_BINARY "nccl-lamport-bench"
#endif

namespace {

int gpuCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/**
 * The bench binary: the build's, or, where the tests were copied elsewhere (the GPU machine's
 * stage: tests/ and bench/ side by side, tests/stage_for_device.sh), ../bench/ from this test.
 */
std::string benchBinary() {
  if (access(NCCL_LAMPORT_BENCH_BINARY, X_OK) == 0) return NCCL_LAMPORT_BENCH_BINARY;
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  return dir + "../bench/nccl-lamport-bench";
}

/** Exit status of the bench with args (its output goes to the test's log). */
int runBench(const std::string& args) {
  const std::string command = "'" + benchBinary() + "' " + args + " 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// The two-shot variants (4+ ranks) need a slot of two chunks: with one 16-byte vector as the
// largest message, the slot sized to the message refused every two-shot call.
TEST(GpuLoopbackBench, OneVectorMessagesAtFourAndEightRanks) {
  if (gpuCount() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  for (const char* ranks : {"4", "8"}) {
    for (const char* maxBytes : {"8", "16"}) {
      EXPECT_EQ(runBench(std::string("--loopback ") + ranks + " -b 8 -e " + maxBytes +
                         " --mode both --reps 1 --iters 2 --warmup 1 --graph-calls 2 --graph-replays 1"),
                0)
          << ranks << " ranks, --max-bytes " << maxBytes;
    }
  }
}

}  // namespace
