// Harness of the kernel GPU tests (tests/test_gpu_kernel.cu, tests/gpu/test_gpu_twoshot.cu), no
// NCCL: nRanks ranks simulated in one process, one per GPU with peer access when there are enough
// GPUs, else all on GPU 0 on separate streams with capped grids so every rank's blocks are
// resident together. Workspaces come from cudaMalloc; peerBases are the ranks' pointers. Results
// are checked against an fp64 host reference and bit for bit across ranks.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/lamport_allreduce.h"
#include "kernels/lamport_layout.h"
#include "kernels/lamport_primitives.cuh"

namespace nccl_lamport {
namespace kerneltest {

#define CUDA_ASSERT(expr)                                                               \
  do {                                                                                  \
    const cudaError_t e_ = (expr);                                                      \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);              \
  } while (0)

inline int gpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

#define SKIP_WITHOUT_GPU() \
  if (gpuCount() == 0) GTEST_SKIP() << "no CUDA GPU on this machine"

constexpr size_t kSlotBytes = 512 * 1024;
constexpr size_t kPad = 64;  // poisoned guard bytes around every output
constexpr LamportDataType kTypes[] = {LamportDataType::kFloat32, LamportDataType::kFloat16,
                                      LamportDataType::kBFloat16};
constexpr LamportReduceOp kOps[] = {LamportReduceOp::kSum, LamportReduceOp::kAvg};

inline size_t elemBytes(LamportDataType t) { return t == LamportDataType::kFloat32 ? 4 : 2; }
inline const char* typeName(LamportDataType t) {
  return t == LamportDataType::kFloat32 ? "f32" : t == LamportDataType::kFloat16 ? "f16" : "bf16";
}

// ---------------------------------------------------------------------------------------------
// Host data: generation, decoding, reference check
// ---------------------------------------------------------------------------------------------

enum class Values { kRandom, kSpecial, kAllNegativeZero, kNegativeSubnormal };

inline uint32_t encode(LamportDataType t, float x) {
  if (t == LamportDataType::kFloat32) return lamportFloatToBits(x);
  return t == LamportDataType::kFloat16 ? lamportFloatToHalf(x) : lamportFloatToBf16(x);
}

inline double decode(LamportDataType t, const uint8_t* p, size_t i) {
  if (t == LamportDataType::kFloat32) {
    uint32_t b;
    std::memcpy(&b, p + 4 * i, 4);
    return lamportBitsToFloat(b);
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == LamportDataType::kFloat16 ? lamportHalfToFloat(h) : lamportBf16ToFloat(h);
}

inline uint32_t valueBits(LamportDataType t, Values mode, std::mt19937& rng) {
  static const uint32_t kF32[] = {0x80000000u, 0u, 0x7fc00000u, 0x7f800000u, 0xff800000u,
                                  0x00000001u, 0x80000001u, 0x000ae398u, 0x3f800000u, 0xbfc00000u};
  static const uint32_t kF16[] = {0x8000u, 0u, 0x7e00u, 0x7c00u, 0xfc00u,
                                  0x0001u, 0x8001u, 0x03ffu, 0x3c00u, 0xbe00u};
  static const uint32_t kBf16[] = {0x8000u, 0u, 0x7fc0u, 0x7f80u, 0xff80u,
                                   0x0001u, 0x8001u, 0x807fu, 0x3f80u, 0xbfc0u};
  const uint32_t* specials = t == LamportDataType::kFloat32   ? kF32
                             : t == LamportDataType::kFloat16 ? kF16
                                                              : kBf16;
  switch (mode) {
    case Values::kSpecial:
      return specials[rng() % 10];
    case Values::kAllNegativeZero:
      return specials[0];
    case Values::kNegativeSubnormal:
      return t == LamportDataType::kFloat32 ? 0x80000001u : 0x8001u;
    case Values::kRandom:
      break;
  }
  const uint32_t r = rng();
  if ((r & 31u) == 0) return specials[0];  // -0.0 now and then
  if ((r & 31u) == 1) return 0;
  return encode(t, std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng));
}

inline std::vector<uint8_t> makeInput(LamportDataType t, size_t count, Values mode, std::mt19937& rng) {
  const size_t esz = elemBytes(t);
  std::vector<uint8_t> out(count * esz);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t bits = valueBits(t, mode, rng);
    std::memcpy(out.data() + i * esz, &bits, esz);  // little-endian: low bytes
  }
  return out;
}

inline double ulpAt(LamportDataType t, double magnitude) {
  const int mantBits = t == LamportDataType::kFloat32 ? 23 : t == LamportDataType::kFloat16 ? 10 : 7;
  const int minExp = t == LamportDataType::kFloat16 ? -14 : -126;
  int e = minExp + 1;
  if (magnitude > 0) std::frexp(magnitude, &e);  // magnitude = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1, minExp) - mantBits);
}

struct CallSpec {
  LamportDataType type = LamportDataType::kFloat32;
  LamportReduceOp op = LamportReduceOp::kSum;
  size_t count = 0;
  size_t sendOffset = 0;  // bytes past the buffer start (misalignment)
  size_t recvOffset = 0;
  bool inPlace = false;  // sendbuff = recvbuff (+ recvOffset)
  Values values = Values::kRandom;
  int remoteSyncDomain = -1;  // this call's LamportAllReduceArgs::remoteSyncDomain; -1: the World's

  std::string name() const {
    return std::string(typeName(type)) + (op == LamportReduceOp::kSum ? " sum" : " avg") +
           " count " + std::to_string(count) + " send+" + std::to_string(sendOffset) + " recv+" +
           std::to_string(recvOffset) + (inPlace ? " in-place" : "");
  }
};

/**
 * Checks every rank's output (exactly count elements) against the fp64 reference, bit identity
 * across ranks, and that the kPad poisoned bytes on either side of the output are untouched.
 * `outputs[r]` holds [recvOffset guard | result | kPad guard] as read back.
 */
inline void checkCall(const CallSpec& c, const std::vector<std::vector<uint8_t>>& inputs,
               const std::vector<std::vector<uint8_t>>& outputs, size_t guardBefore) {
  const int nRanks = static_cast<int>(inputs.size());
  const size_t bytes = c.count * elemBytes(c.type);
  for (int r = 0; r < nRanks; ++r) {
    const uint8_t* o = outputs[r].data();
    for (size_t i = 0; i < guardBefore; ++i) ASSERT_EQ(o[i], 0xff) << c.name() << " underrun";
    for (size_t i = 0; i < kPad; ++i) ASSERT_EQ(o[guardBefore + bytes + i], 0xff) << c.name() << " overrun";
    ASSERT_EQ(std::memcmp(o + guardBefore, outputs[0].data() + guardBefore, bytes), 0)
        << c.name() << ": rank " << r << " differs from rank 0";
  }
  const uint8_t* out = outputs[0].data() + guardBefore;
  int bad = 0;
  for (size_t i = 0; i < c.count; ++i) {
    double sum = 0, sumAbs = 0;
    for (int r = 0; r < nRanks; ++r) {
      const double x = decode(c.type, inputs[r].data(), i);
      sum += x;
      if (std::isfinite(x)) sumAbs += std::fabs(x);
    }
    double scale = 1.0;
    if (c.op == LamportReduceOp::kAvg) scale = 1.0 / nRanks;
    const double ref = sum * scale;
    const double got = decode(c.type, out, i);
    bool ok;
    if (std::isnan(ref)) {
      ok = std::isnan(got);
    } else if (std::isinf(ref)) {
      ok = got == ref;
    } else {
      const double tol = ulpAt(c.type, std::fabs(ref)) + (nRanks + 1) * std::ldexp(sumAbs * scale, -24);
      ok = std::fabs(got - ref) <= tol;
    }
    if (!ok && ++bad <= 5) ADD_FAILURE() << c.name() << ": element " << i << " got " << got << " want " << ref;
  }
  ASSERT_EQ(bad, 0) << c.name() << ": " << bad << " wrong elements";
}

// ---------------------------------------------------------------------------------------------
// Simulated ranks
// ---------------------------------------------------------------------------------------------

struct SimRank {
  int device = 0;
  cudaStream_t stream = nullptr;
  char* workspace = nullptr;
  char* send = nullptr;  // ioBytes each
  char* recv = nullptr;
};

class World {
 public:
  ~World() {
    for (SimRank& r : ranks) {
      cudaSetDevice(r.device);
      if (r.stream) cudaStreamSynchronize(r.stream);
      if (r.stream) cudaStreamDestroy(r.stream);
      cudaFree(r.workspace);
      cudaFree(r.send);
      cudaFree(r.recv);
    }
    if (errorHost) cudaFreeHost(errorHost);
    if (abortHost) cudaFreeHost(abortHost);
  }

  /** Builds the ranks. Use ASSERT_NO_FATAL_FAILURE(world.init(...)). */
  void init(int n, size_t ioBytes, size_t slotBytes = kSlotBytes) {
    nRanks = n;
    layout = LamportLayout{n, slotBytes};
    this->ioBytes = ioBytes;
    const int gpus = gpuCount();
    bool onePerGpu = gpus >= n;
    for (int i = 0; onePerGpu && i < n; ++i) {
      for (int j = 0; onePerGpu && j < n; ++j) {
        int can = 0;
        if (i != j && (cudaDeviceCanAccessPeer(&can, i, j) != cudaSuccess || !can)) onePerGpu = false;
      }
    }
    if (onePerGpu) {
      for (int i = 0; i < n; ++i) {
        CUDA_ASSERT(cudaSetDevice(i));
        for (int j = 0; j < n; ++j) {
          if (i == j) continue;
          const cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
          if (e == cudaErrorPeerAccessAlreadyEnabled) {
            (void)cudaGetLastError();
          } else {
            CUDA_ASSERT(e);
          }
        }
      }
    } else {
      // All ranks on GPU 0: cap each grid so all nRanks grids fit at one block per SM, with
      // half the SMs to spare (the kernels spin until their peers' blocks run).
      int sms = 0;
      CUDA_ASSERT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
      maxBlocks = std::max(1, sms / (2 * n));
    }
    CUDA_ASSERT(cudaHostAlloc(reinterpret_cast<void**>(&errorHost), n * sizeof(uint32_t),
                              cudaHostAllocMapped | cudaHostAllocPortable));
    CUDA_ASSERT(cudaHostAlloc(reinterpret_cast<void**>(&abortHost), n * sizeof(uint32_t),
                              cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(errorHost, 0, n * sizeof(uint32_t));
    std::memset(abortHost, 0, n * sizeof(uint32_t));
    CUDA_ASSERT(cudaHostGetDevicePointer(reinterpret_cast<void**>(&errorDev), errorHost, 0));
    CUDA_ASSERT(cudaHostGetDevicePointer(reinterpret_cast<void**>(&abortDev), abortHost, 0));
    ranks.resize(n);
    for (int r = 0; r < n; ++r) {
      SimRank& k = ranks[r];
      k.device = onePerGpu ? r : 0;
      CUDA_ASSERT(cudaSetDevice(k.device));
      CUDA_ASSERT(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
      CUDA_ASSERT(cudaMalloc(&k.workspace, layout.totalBytes()));
      CUDA_ASSERT(cudaMalloc(&k.send, ioBytes));
      CUDA_ASSERT(cudaMalloc(&k.recv, ioBytes));
      CUDA_ASSERT(launchLamportWorkspaceInit(k.workspace, layout, k.stream));
    }
    syncAll();
  }

  LamportAllReduceArgs args(int rank, const void* send, void* recv, const CallSpec& c) const {
    LamportAllReduceArgs a{};
    a.sendbuff = send;
    a.recvbuff = recv;
    a.count = c.count;
    a.datatype = c.type;
    a.op = c.op;
    a.rank = rank;
    a.layout = layout;
    for (int r = 0; r < nRanks; ++r) a.peerBases[r] = ranks[r].workspace;
    a.abortFlag = abortDev + rank;
    a.errorFlag = errorDev + rank;
    a.timeoutNs = timeoutNs;
    a.maxBlocks = maxBlocks;
    a.variant = variant;
    a.blockThreads = blockThreads;
    a.residencyShare = residencyShare;
    a.triggerAfterWait = triggerAfterWait;
    a.fastPass = fastPass;
    a.minBlocksPerSm = minBlocksPerSm;
    a.remoteSyncDomain = c.remoteSyncDomain >= 0 ? c.remoteSyncDomain : remoteSyncDomain;
    return a;
  }

  void launch(int rank, const LamportAllReduceArgs& a) {
    CUDA_ASSERT(cudaSetDevice(ranks[rank].device));
    CUDA_ASSERT(launchLamportAllReduce(a, ranks[rank].stream));
  }

  void syncAll() {
    for (SimRank& k : ranks) {
      CUDA_ASSERT(cudaSetDevice(k.device));
      CUDA_ASSERT(cudaStreamSynchronize(k.stream));
    }
  }

  void expectNoErrors() {
    for (int r = 0; r < nRanks; ++r) EXPECT_EQ(errorHost[r], 0u) << "rank " << r;
  }

  LamportDeviceState state(int rank) {
    LamportDeviceState s{};
    cudaSetDevice(ranks[rank].device);
    EXPECT_EQ(cudaMemcpy(&s, ranks[rank].workspace, sizeof s, cudaMemcpyDeviceToHost), cudaSuccess);
    return s;
  }

  int nRanks = 0;
  LamportLayout layout{};
  size_t ioBytes = 0;
  int maxBlocks = 0;
  LamportKernelVariant variant = LamportKernelVariant::kFast;
  int blockThreads = 0;  // kFast only
  int residencyShare = 0;    // kFast/kTwoShot: 0 = the launcher's default
  int triggerAfterWait = 0;  // kFast/kTwoShot: 0 = the launcher's choice, > 0 late, < 0 early
  LamportFastPass fastPass = LamportFastPass::kAuto;  // kFast (A/B passes: bf16 only)
  int minBlocksPerSm = 0;                             // kFast A/B register cap (bf16 only)
  int remoteSyncDomain = 0;  // non-zero: CUDA's remote memory-sync domain (the plugin's default); 0 keeps
                            // the other kernel tests in the default domain; CallSpec may override it
  uint64_t timeoutNs = 20ull * 1000 * 1000 * 1000;  // a bug fails the test instead of hanging it
  std::vector<SimRank> ranks;
  uint32_t* errorHost = nullptr;
  uint32_t* errorDev = nullptr;
  uint32_t* abortHost = nullptr;
  uint32_t* abortDev = nullptr;
};

/**
 * Runs `calls` back to back on every rank (no synchronization in between), each call in its own
 * region of the ranks' send/recv buffers, with fresh random inputs and poisoned outputs, then
 * checks them all. Regions are laid out one after another, 256-byte aligned plus each call's offsets.
 */
inline void runBatch(World& w, const std::vector<CallSpec>& calls, std::mt19937& rng) {
  std::vector<size_t> base(calls.size());
  size_t used = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    base[i] = used;
    const CallSpec& c = calls[i];
    used += (std::max(c.sendOffset, c.recvOffset) + c.count * elemBytes(c.type) + kPad + 255) / 256 * 256;
  }
  ASSERT_LE(used, w.ioBytes) << "batch too large for the I/O buffers";
  std::vector<std::vector<std::vector<uint8_t>>> inputs(calls.size());
  for (int r = 0; r < w.nRanks; ++r) {
    SimRank& k = w.ranks[r];
    CUDA_ASSERT(cudaSetDevice(k.device));
    CUDA_ASSERT(cudaMemsetAsync(k.recv, 0xff, used, k.stream));
    CUDA_ASSERT(cudaMemsetAsync(k.send, 0x5a, used, k.stream));
    for (size_t i = 0; i < calls.size(); ++i) {
      const CallSpec& c = calls[i];
      inputs[i].push_back(makeInput(c.type, c.count, c.values, rng));
      char* dst = c.inPlace ? k.recv + base[i] + c.recvOffset : k.send + base[i] + c.sendOffset;
      CUDA_ASSERT(cudaMemcpyAsync(dst, inputs[i][r].data(), inputs[i][r].size(), cudaMemcpyHostToDevice, k.stream));
    }
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    const CallSpec& c = calls[i];
    for (int r = 0; r < w.nRanks; ++r) {  // interleaved, so no rank runs far ahead in launch order
      SimRank& k = w.ranks[r];
      char* recv = k.recv + base[i] + c.recvOffset;
      const char* send = c.inPlace ? recv : k.send + base[i] + c.sendOffset;
      ASSERT_NO_FATAL_FAILURE(w.launch(r, w.args(r, send, recv, c)));
    }
  }
  ASSERT_NO_FATAL_FAILURE(w.syncAll());
  w.expectNoErrors();
  std::vector<std::vector<uint8_t>> all(w.nRanks, std::vector<uint8_t>(used));
  for (int r = 0; r < w.nRanks; ++r) {
    CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
    CUDA_ASSERT(cudaMemcpy(all[r].data(), w.ranks[r].recv, used, cudaMemcpyDeviceToHost));
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    const CallSpec& c = calls[i];
    std::vector<std::vector<uint8_t>> outs(w.nRanks);
    const size_t span = c.recvOffset + c.count * elemBytes(c.type) + kPad;
    for (int r = 0; r < w.nRanks; ++r) outs[r].assign(all[r].begin() + base[i], all[r].begin() + base[i] + span);
    ASSERT_NO_FATAL_FAILURE(checkCall(c, inputs[i], outs, c.recvOffset));
  }
}

/**
 * The workspace invariant after every call has completed (w synced): on each rank, every word of
 * every buffer holds the sentinel, except in the buffer the last round used, within the dirtyBytes
 * per slot it left for the next round to clear. A kernel that records too small a dirtyBytes, or
 * clears less than it should, leaves a stale vector that a later round would read as a peer's.
 */
inline void expectOnlyLastRoundDirty(World& w) {
  for (int r = 0; r < w.nRanks; ++r) {
    const LamportDeviceState s = w.state(r);
    std::vector<uint32_t> words(w.layout.totalBytes() / 4);
    CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
    CUDA_ASSERT(cudaMemcpy(words.data(), w.ranks[r].workspace, words.size() * 4, cudaMemcpyDeviceToHost));
    const int last = static_cast<int>(lamportBufferToClear(s.bufferIndex));
    size_t stale = 0;
    for (int b = 0; b < kLamportBufferCount; ++b) {
      for (int slot = 0; slot < w.nRanks - 1; ++slot) {
        const size_t first = (w.layout.bufferOffset(b) + slot * w.layout.slotBytes) / 4;
        const size_t mayBeDirty = b == last ? s.dirtyBytes / 4 : 0;
        for (size_t i = mayBeDirty; i < w.layout.slotBytes / 4; ++i) stale += lamportWordIsEmpty(words[first + i]) ? 0 : 1;
      }
    }
    EXPECT_EQ(stale, 0u) << "rank " << r << ": words left behind outside the last round's " << s.dirtyBytes
                         << " dirty bytes (buffer " << last << ")";
  }
}

/** Random calls of varying size, type, op and alignment (rotation and dirty-size tracking). */
inline std::vector<CallSpec> randomCalls(int n, std::mt19937& rng, size_t maxCount) {
  std::vector<CallSpec> calls(n);
  for (CallSpec& c : calls) {
    c.type = kTypes[rng() % 3];
    c.op = kOps[rng() % 2];
    const uint32_t pick = rng() % 8;
    c.count = pick < 3 ? 1 + rng() % 64 : pick < 7 ? 1 + rng() % 8192 : 1 + rng() % maxCount;
    c.sendOffset = (rng() % 4 == 0) ? elemBytes(c.type) * (rng() % 3) + (rng() % 2) * 2 : 0;
    c.recvOffset = (rng() % 4 == 0) ? elemBytes(c.type) * (rng() % 3) + (rng() % 2) * 2 : 0;
    c.inPlace = rng() % 8 == 0;
  }
  return calls;
}

constexpr size_t kIoBytes = 16u << 20;

/** Fills rank r's input of call c (at the start of its send buffer) and poisons its output. */
inline std::vector<std::vector<uint8_t>> prepareCall(World& w, const CallSpec& c, std::mt19937& rng) {
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < w.nRanks; ++r) {
    SimRank& k = w.ranks[r];
    cudaSetDevice(k.device);
    inputs.push_back(makeInput(c.type, c.count, c.values, rng));
    EXPECT_EQ(cudaMemcpy(k.send, inputs[r].data(), inputs[r].size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemset(k.recv, 0xff, c.count * elemBytes(c.type) + kPad), cudaSuccess);
  }
  return inputs;
}

inline void checkPrepared(World& w, const CallSpec& c, const std::vector<std::vector<uint8_t>>& inputs) {
  std::vector<std::vector<uint8_t>> outs(w.nRanks);
  for (int r = 0; r < w.nRanks; ++r) {
    outs[r].resize(c.count * elemBytes(c.type) + kPad);
    CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
    CUDA_ASSERT(cudaMemcpy(outs[r].data(), w.ranks[r].recv, outs[r].size(), cudaMemcpyDeviceToHost));
  }
  ASSERT_NO_FATAL_FAILURE(checkCall(c, inputs, outs, 0));
}

}  // namespace kerneltest
}  // namespace nccl_lamport
