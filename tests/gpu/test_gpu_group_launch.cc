// GPU tests of WHEN a call the plugin takes inside a group launches (part of test_gpu_groups; 2
// forked ranks, one process per GPU or sharing one):
//  - SimulatedGroupRunsNothing: ncclGroupSimulateEnd launches none of the group's work (NCCL 2.28
//    only estimates it), so a Lamport-sized allreduce in that group leaves recvbuff poisoned and
//    counts no Lamport call; later calls are still correct (the rounds of the ranks stay paired).
//  - WorkQueuedBeforeGroupEndRunsFirst: NCCL enqueues a group's work at the outermost
//    ncclGroupEnd, so a copy into sendbuff queued on the stream after the call but before
//    ncclGroupEnd is seen by the allreduce. A Lamport-sized call must see it too, as an allreduce
//    past the crossover (NCCL's) does in the same run.
#include <cstring>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {
namespace {

constexpr double kWaitSeconds = 60;
constexpr size_t kLamportCount = 1024;                          // 4 KB of float32: one-shot
constexpr size_t kNcclCount = kTestOneShotMaxBytes / 4 + 1024;  // past the suite's crossover

/** Device buffers of `count` floats for one rank, freed with the object. */
struct Buffers {
  float* send = nullptr;
  float* recv = nullptr;
  size_t count;
  explicit Buffers(size_t n) : count(n) {
    if (cudaMalloc(&send, n * sizeof(float)) != cudaSuccess || cudaMalloc(&recv, n * sizeof(float)) != cudaSuccess) {
      send = recv = nullptr;
    }
  }
  ~Buffers() {
    cudaFree(send);
    cudaFree(recv);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
};

/** Fills sendbuff with `value` and poisons recvbuff (all bits set: a NaN no sum gives), on stream. */
bool stage(const Buffers& b, float value, cudaStream_t stream) {
  static thread_local std::vector<float> host;
  host.assign(b.count, value);
  return cudaMemcpyAsync(b.send, host.data(), b.count * sizeof(float), cudaMemcpyHostToDevice, stream) == cudaSuccess &&
         cudaMemsetAsync(b.recv, 0xFF, b.count * sizeof(float), stream) == cudaSuccess &&
         cudaStreamSynchronize(stream) == cudaSuccess;
}

std::vector<uint32_t> recvBits(const Buffers& b) {
  std::vector<uint32_t> bits(b.count, 0);
  if (cudaMemcpy(bits.data(), b.recv, b.count * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) bits.clear();
  return bits;
}

TEST(GroupLaunch, SimulatedGroupRunsNothing) {
  LAMPORT_RUN_FORKED(forkRanks(2, 180, {}, 20000), [](Harness& h, RankContext&) {
    RankSlot& s = h.slots[0];
    Buffers b(kLamportCount);
    if (b.send == nullptr || !stage(b, 1.0f, s.stream)) return failf(h, "cudaMalloc / staging failed");
    const uint64_t lamportBefore = commInfo(s.comm).lamportCalls;
    if (ncclGroupStart() != ncclSuccess) return failf(h, "ncclGroupStart failed");
    const ncclResult_t called = ncclAllReduce(b.send, b.recv, b.count, ncclFloat32, ncclSum, s.comm, s.stream);
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    const ncclResult_t simulated = ncclGroupSimulateEnd(&sim);
    if (called != ncclSuccess || simulated != ncclSuccess) {
      return failf(h, "ncclAllReduce returned %d, ncclGroupSimulateEnd %d", called, simulated);
    }
    if (pollStream(s.stream, kWaitSeconds) != cudaSuccess) return failf(h, "the stream did not become idle");
    const std::vector<uint32_t> bits = recvBits(b);
    size_t written = 0;
    for (uint32_t v : bits) written += v != 0xFFFFFFFFu;
    if (bits.empty() || written != 0) failf(h, "a simulated group wrote %zu of %zu recvbuff elements", written, b.count);
    h.failures->addCheck();
    if (commInfo(s.comm).lamportCalls != lamportBefore) failf(h, "a simulated group's call ran on a Lamport kernel");
    h.failures->addCheck();
    // Every rank simulated the same group: the next rounds must still pair up and be correct.
    h.begin();
    for (size_t count : {size_t{1}, size_t{4097}, kNcclCount}) {
      CallSpec spec;
      spec.count = count;
      runCheckedStep(h, spec, mixSeed(0x51A, count), true);
    }
    h.checkCounters("after a simulated group");
  });
}

TEST(GroupLaunch, WorkQueuedBeforeGroupEndRunsFirst) {
  LAMPORT_RUN_FORKED(forkRanks(2, 180, {}, 20000), [](Harness& h, RankContext&) {
    RankSlot& s = h.slots[0];
    for (size_t count : {kLamportCount, kNcclCount}) {
      Buffers b(count);
      if (b.send == nullptr || !stage(b, 1.0f, s.stream)) return failf(h, "cudaMalloc / staging failed");
      std::vector<float> twos(count, 2.0f);
      if (ncclGroupStart() != ncclSuccess) return failf(h, "ncclGroupStart failed");
      const ncclResult_t called = ncclAllReduce(b.send, b.recv, count, ncclFloat32, ncclSum, s.comm, s.stream);
      // Queued after the call, before the group ends: NCCL's group work comes after it.
      const cudaError_t copied =
          cudaMemcpyAsync(b.send, twos.data(), count * sizeof(float), cudaMemcpyHostToDevice, s.stream);
      const ncclResult_t ended = ncclGroupEnd();
      ++(count == kLamportCount ? s.expectLamport : s.expectNccl);  // the end-of-test counter check
      if (called != ncclSuccess || copied != cudaSuccess || ended != ncclSuccess) {
        return failf(h, "count %zu: ncclAllReduce %d, copy %d, ncclGroupEnd %d", count, called, copied, ended);
      }
      if (pollStream(s.stream, kWaitSeconds) != cudaSuccess) return failf(h, "count %zu: stream not idle", count);
      const std::vector<uint32_t> bits = recvBits(b);
      const float want = 2.0f * static_cast<float>(s.nRanks);
      size_t wrong = 0;
      float first = 0;
      for (size_t i = 0; i < bits.size(); ++i) {
        float v;
        std::memcpy(&v, &bits[i], sizeof(v));
        if (v != want && wrong++ == 0) first = v;
      }
      if (bits.empty() || wrong != 0) {
        failf(h, "count %zu (%s): %zu elements are not %g (first: %g): the allreduce ran before work queued ahead of "
              "ncclGroupEnd", count, count == kLamportCount ? "Lamport" : "NCCL", wrong, want, first);
      }
      h.failures->addCheck();
    }
  });
}

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
