// GPU tests of the Lamport one-shot kernel without NCCL: nRanks ranks simulated in one process,
// one per GPU with peer access when there are enough GPUs, else all on GPU 0 on separate streams
// with capped grids so every rank's blocks are resident together. Workspaces come from cudaMalloc;
// peerBases are the ranks' pointers. Results are checked against an fp64 host reference and
// bit for bit across ranks. Skipped (never passed) without a GPU.
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
namespace {

#define CUDA_ASSERT(expr)                                                               \
  do {                                                                                  \
    const cudaError_t e_ = (expr);                                                      \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);              \
  } while (0)

int gpuCount() {
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

size_t elemBytes(LamportDataType t) { return t == LamportDataType::kFloat32 ? 4 : 2; }
const char* typeName(LamportDataType t) {
  return t == LamportDataType::kFloat32 ? "f32" : t == LamportDataType::kFloat16 ? "f16" : "bf16";
}

// ---------------------------------------------------------------------------------------------
// Host data: generation, decoding, reference check
// ---------------------------------------------------------------------------------------------

enum class Values { kRandom, kSpecial, kAllNegativeZero, kNegativeSubnormal };

uint32_t encode(LamportDataType t, float x) {
  if (t == LamportDataType::kFloat32) return lamportFloatToBits(x);
  return t == LamportDataType::kFloat16 ? lamportFloatToHalf(x) : lamportFloatToBf16(x);
}

double decode(LamportDataType t, const uint8_t* p, size_t i) {
  if (t == LamportDataType::kFloat32) {
    uint32_t b;
    std::memcpy(&b, p + 4 * i, 4);
    return lamportBitsToFloat(b);
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == LamportDataType::kFloat16 ? lamportHalfToFloat(h) : lamportBf16ToFloat(h);
}

uint32_t valueBits(LamportDataType t, Values mode, std::mt19937& rng) {
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

std::vector<uint8_t> makeInput(LamportDataType t, size_t count, Values mode, std::mt19937& rng) {
  const size_t esz = elemBytes(t);
  std::vector<uint8_t> out(count * esz);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t bits = valueBits(t, mode, rng);
    std::memcpy(out.data() + i * esz, &bits, esz);  // little-endian: low bytes
  }
  return out;
}

double ulpAt(LamportDataType t, double magnitude) {
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
void checkCall(const CallSpec& c, const std::vector<std::vector<uint8_t>>& inputs,
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

  LamportOneShotArgs args(int rank, const void* send, void* recv, const CallSpec& c) const {
    LamportOneShotArgs a{};
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
    return a;
  }

  void launch(int rank, const LamportOneShotArgs& a) {
    CUDA_ASSERT(cudaSetDevice(ranks[rank].device));
    CUDA_ASSERT(launchLamportOneShot(a, ranks[rank].stream));
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
void runBatch(World& w, const std::vector<CallSpec>& calls, std::mt19937& rng) {
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

/** Random calls of varying size, type, op and alignment (rotation and dirty-size tracking). */
std::vector<CallSpec> randomCalls(int n, std::mt19937& rng, size_t maxCount) {
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

// ---------------------------------------------------------------------------------------------
// Tests that need no GPU: argument validation happens before any CUDA call
// ---------------------------------------------------------------------------------------------

TEST(LamportLaunchValidation, RejectsBadArguments) {
  static char fakeBase[kLamportMaxRanks][16];
  LamportOneShotArgs good{};
  good.sendbuff = fakeBase[0];
  good.recvbuff = fakeBase[1];
  good.count = 0;  // a valid empty call: returns before launching anything
  good.datatype = LamportDataType::kBFloat16;
  good.op = LamportReduceOp::kSum;
  good.rank = 1;
  good.layout = LamportLayout{4, 1024};
  for (int r = 0; r < 4; ++r) good.peerBases[r] = fakeBase[r];
  EXPECT_EQ(launchLamportOneShot(good, nullptr), cudaSuccess);

  auto expectInvalid = [&](const char* what, auto mutate) {
    LamportOneShotArgs a = good;
    mutate(a);
    EXPECT_EQ(launchLamportOneShot(a, nullptr), cudaErrorInvalidValue) << what;
  };
  expectInvalid("count past the slot", [](LamportOneShotArgs& a) { a.count = 513; });
  expectInvalid("nRanks 1", [](LamportOneShotArgs& a) { a.layout.nRanks = 1, a.rank = 0; });
  expectInvalid("nRanks 73", [](LamportOneShotArgs& a) { a.layout.nRanks = kLamportMaxRanks + 1; });
  expectInvalid("rank out of range", [](LamportOneShotArgs& a) { a.rank = 4; });
  expectInvalid("negative rank", [](LamportOneShotArgs& a) { a.rank = -1; });
  expectInvalid("slot not a multiple of 16", [](LamportOneShotArgs& a) { a.layout.slotBytes = 1000; });
  expectInvalid("bad datatype", [](LamportOneShotArgs& a) { a.datatype = static_cast<LamportDataType>(9); });
  expectInvalid("bad op", [](LamportOneShotArgs& a) { a.op = static_cast<LamportReduceOp>(9); });
  expectInvalid("missing peer", [](LamportOneShotArgs& a) { a.peerBases[3] = nullptr; });
  expectInvalid("negative maxBlocks", [](LamportOneShotArgs& a) { a.maxBlocks = -1; });
  expectInvalid("null sendbuff", [](LamportOneShotArgs& a) { a.count = 1, a.sendbuff = nullptr; });
  expectInvalid("unknown kernel variant", [](LamportOneShotArgs& a) { a.variant = static_cast<LamportKernelVariant>(7); });
  expectInvalid("baseline with a block size", [](LamportOneShotArgs& a) {
    a.variant = LamportKernelVariant::kBaseline, a.blockThreads = 128;
  });
  expectInvalid("fast block size not a multiple of 32", [](LamportOneShotArgs& a) { a.blockThreads = 100; });
  expectInvalid("fast block size above 512", [](LamportOneShotArgs& a) { a.blockThreads = 544; });
  expectInvalid("fast block size below 32", [](LamportOneShotArgs& a) { a.blockThreads = 16; });
  expectInvalid("negative residency share", [](LamportOneShotArgs& a) { a.residencyShare = -1; });
  // Two-shot: 2 chunks of ceil(vectors / nRanks) must fit a slot; 4 ranks, 1024-byte slot.
  {
    LamportOneShotArgs a = good;
    a.variant = LamportKernelVariant::kTwoShot;
    a.count = 512;  // 64 vectors, chunks of 16 (256 bytes), 512 <= 1024
    EXPECT_EQ(lamportOneShotGridBlocks(a), 1);
    a.layout.slotBytes = 496;  // 31 vectors: count 248 -> 31 vectors, chunks of 8 -> 256 <= 496
    a.count = 248;
    EXPECT_GT(lamportOneShotGridBlocks(a), 0);
    a.layout = LamportLayout{4, 16};  // one vector: a chunk of 1, 2 x 16 > 16
    a.count = 8;
    EXPECT_EQ(lamportOneShotGridBlocks(a), 0) << "two-shot chunks that do not fit the slot";
  }
  EXPECT_EQ(lamportOneShotGridBlocks([&] { LamportOneShotArgs a = good; a.blockThreads = 100; return a; }()), 0);
  for (int threads : {32, 128, 256, 512}) {
    LamportOneShotArgs a = good;
    a.blockThreads = threads;
    EXPECT_EQ(launchLamportOneShot(a, nullptr), cudaSuccess) << threads << " threads";
  }

  EXPECT_EQ(launchLamportWorkspaceInit(nullptr, good.layout, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launchLamportWorkspaceInit(fakeBase[0] + 1, good.layout, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launchLamportWorkspaceInit(fakeBase[0], LamportLayout{1, 1024}, nullptr), cudaErrorInvalidValue);
}

// ---------------------------------------------------------------------------------------------
// GPU tests
// ---------------------------------------------------------------------------------------------

TEST(GpuLamportWorkspace, InitFillsSentinelAndZeroesControl) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(3, 1024));
  std::vector<uint32_t> words(w.layout.totalBytes() / 4);
  CUDA_ASSERT(cudaSetDevice(w.ranks[1].device));
  CUDA_ASSERT(cudaMemcpy(words.data(), w.ranks[1].workspace, w.layout.totalBytes(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < words.size(); ++i) {
    ASSERT_EQ(words[i], i < kLamportControlBytes / 4 ? 0u : kLamportEmptyWord) << "word " << i;
  }
}

TEST(GpuLamportOneShot, AllTypesOpsCountsAndAlignments) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(1234);
  for (LamportDataType t : kTypes) {
    const size_t esz = elemBytes(t);
    const size_t nearSlot = kSlotBytes / esz;
    const size_t counts[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 255, 1000, 4097, 65537, nearSlot - 3, nearSlot};
    const std::pair<size_t, size_t> offsets[] = {{0, 0}, {esz, esz}, {2, 2}, {esz, 0}, {0, 2}, {6, 10}};
    for (LamportReduceOp op : kOps) {
      std::vector<CallSpec> calls;
      for (size_t count : counts) {
        if (count * esz > kSlotBytes) continue;
        for (auto [so, ro] : offsets) {
          calls.push_back(CallSpec{t, op, count, so, ro, false, Values::kRandom});
        }
        for (size_t off : {size_t{0}, esz, size_t{2}}) {
          calls.push_back(CallSpec{t, op, count, 0, off, true, Values::kRandom});
        }
      }
      // Batches small enough for the I/O buffers; calls within a batch run back to back.
      for (size_t i = 0; i < calls.size(); i += 8) {
        std::vector<CallSpec> batch(calls.begin() + i, calls.begin() + std::min(calls.size(), i + 8));
        ASSERT_NO_FATAL_FAILURE(runBatch(w, batch, rng));
      }
    }
  }
}

TEST(GpuLamportOneShot, SpecialValues) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(99);
  for (LamportDataType t : kTypes) {
    for (LamportReduceOp op : kOps) {
      std::vector<CallSpec> calls;
      for (size_t count : {size_t{1}, size_t{7}, size_t{17}, size_t{1000}, size_t{4097}}) {
        for (Values v : {Values::kSpecial, Values::kAllNegativeZero, Values::kNegativeSubnormal}) {
          calls.push_back(CallSpec{t, op, count, 0, 0, false, v});
          calls.push_back(CallSpec{t, op, count, 2, elemBytes(t), false, v});
        }
      }
      ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng));
    }
  }
}

TEST(GpuLamportOneShot, CappedGridStrides) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(5);
  for (int cap : {1, 2, 3}) {
    w.maxBlocks = cap;
    std::vector<CallSpec> calls;
    for (LamportDataType t : kTypes) {
      calls.push_back(CallSpec{t, LamportReduceOp::kSum, 65537, 0, 0, false, Values::kRandom});
      calls.push_back(CallSpec{t, LamportReduceOp::kAvg, 4097, 2, 2, false, Values::kRandom});
      calls.push_back(CallSpec{t, LamportReduceOp::kSum, 3000, 0, 0, true, Values::kRandom});
    }
    ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng));
  }
}

TEST(GpuLamportOneShot, BackToBackRotation2000Calls) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(2024);
  constexpr int kCalls = 2000, kBatch = 50;
  for (int done = 0; done < kCalls; done += kBatch) {
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(kBatch, rng, 70000), rng)) << "after " << done;
  }
  for (int r = 0; r < w.nRanks; ++r) {
    const LamportDeviceState s = w.state(r);
    EXPECT_EQ(s.roundsDone, static_cast<uint32_t>(kCalls));
    EXPECT_EQ(s.bufferIndex, static_cast<uint32_t>(kCalls % kLamportBufferCount));
    EXPECT_EQ(s.arrivedBlocks, 0u);
  }
}

TEST(GpuLamportOneShot, GraphReplays1000WithChangingInputs) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  const std::vector<CallSpec> calls = {
      {LamportDataType::kBFloat16, LamportReduceOp::kSum, 4097, 0, 0, false, Values::kRandom},
      {LamportDataType::kFloat32, LamportReduceOp::kAvg, 1000, 2, 0, false, Values::kRandom},
      {LamportDataType::kFloat16, LamportReduceOp::kSum, 17, 0, 2, true, Values::kRandom},
      {LamportDataType::kBFloat16, LamportReduceOp::kAvg, 20000, 0, 0, false, Values::kRandom}};
  constexpr size_t kRegion = 256 * 1024;  // per call, in send and recv
  std::vector<cudaGraphExec_t> execs(w.nRanks);
  for (int r = 0; r < w.nRanks; ++r) {
    SimRank& k = w.ranks[r];
    CUDA_ASSERT(cudaSetDevice(k.device));
    CUDA_ASSERT(cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeRelaxed));
    for (size_t i = 0; i < calls.size(); ++i) {
      char* recv = k.recv + i * kRegion + calls[i].recvOffset;
      const char* send = calls[i].inPlace ? recv : k.send + i * kRegion + calls[i].sendOffset;
      CUDA_ASSERT(launchLamportOneShot(w.args(r, send, recv, calls[i]), k.stream));
    }
    cudaGraph_t graph;
    CUDA_ASSERT(cudaStreamEndCapture(k.stream, &graph));
    CUDA_ASSERT(cudaGraphInstantiate(&execs[r], graph, 0));
    CUDA_ASSERT(cudaGraphDestroy(graph));
  }
  std::mt19937 rng(77);
  constexpr int kReplays = 1000;
  for (int rep = 0; rep < kReplays; ++rep) {
    std::vector<std::vector<std::vector<uint8_t>>> inputs(calls.size());
    for (int r = 0; r < w.nRanks; ++r) {
      SimRank& k = w.ranks[r];
      CUDA_ASSERT(cudaSetDevice(k.device));
      CUDA_ASSERT(cudaMemsetAsync(k.recv, 0xff, calls.size() * kRegion, k.stream));
      for (size_t i = 0; i < calls.size(); ++i) {
        inputs[i].push_back(makeInput(calls[i].type, calls[i].count, Values::kRandom, rng));
        char* dst = calls[i].inPlace ? k.recv + i * kRegion + calls[i].recvOffset
                                     : k.send + i * kRegion + calls[i].sendOffset;
        CUDA_ASSERT(cudaMemcpyAsync(dst, inputs[i][r].data(), inputs[i][r].size(), cudaMemcpyHostToDevice, k.stream));
      }
    }
    for (int r = 0; r < w.nRanks; ++r) {
      CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
      CUDA_ASSERT(cudaGraphLaunch(execs[r], w.ranks[r].stream));
    }
    ASSERT_NO_FATAL_FAILURE(w.syncAll());
    for (size_t i = 0; i < calls.size(); ++i) {
      std::vector<std::vector<uint8_t>> outs(w.nRanks);
      const size_t span = calls[i].recvOffset + calls[i].count * elemBytes(calls[i].type) + kPad;
      for (int r = 0; r < w.nRanks; ++r) {
        outs[r].resize(span);
        CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
        CUDA_ASSERT(cudaMemcpy(outs[r].data(), w.ranks[r].recv + i * kRegion, span, cudaMemcpyDeviceToHost));
      }
      ASSERT_NO_FATAL_FAILURE(checkCall(calls[i], inputs[i], outs, calls[i].recvOffset)) << "replay " << rep;
    }
  }
  w.expectNoErrors();
  for (int r = 0; r < w.nRanks; ++r) {
    EXPECT_EQ(w.state(r).roundsDone, static_cast<uint32_t>(kReplays * calls.size()));
    cudaGraphExecDestroy(execs[r]);
  }
}

TEST(GpuLamportOneShot, TimesOutWhenAPeerNeverLaunches) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, 1 << 20));
  w.timeoutNs = 50ull * 1000 * 1000;
  const CallSpec c{LamportDataType::kBFloat16, LamportReduceOp::kSum, 4097};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(w.launch(0, w.args(0, w.ranks[0].send, w.ranks[0].recv, c)));
  CUDA_ASSERT(cudaSetDevice(w.ranks[0].device));
  CUDA_ASSERT(cudaStreamSynchronize(w.ranks[0].stream));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(w.errorHost[0], static_cast<uint32_t>(kLamportTimedOut));
  EXPECT_GE(seconds, 0.045);
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(w.state(0).roundsDone, 1u) << "the rotation still advances after a give-up";
}

TEST(GpuLamportOneShot, AbortFlagStopsTheWait) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, 1 << 20));
  w.timeoutNs = 0;  // no time limit: only the abort flag can end the wait
  const CallSpec c{LamportDataType::kFloat32, LamportReduceOp::kSum, 100000};
  LamportOneShotArgs a = w.args(0, w.ranks[0].send, w.ranks[0].recv, c);
  a.timeoutNs = 30ull * 1000 * 1000 * 1000;  // backstop: a broken abort reports TimedOut, not a hang
  ASSERT_NO_FATAL_FAILURE(w.launch(0, a));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CUDA_ASSERT(cudaSetDevice(w.ranks[0].device));
  EXPECT_EQ(cudaStreamQuery(w.ranks[0].stream), cudaErrorNotReady) << "kernel should still wait";
  reinterpret_cast<volatile uint32_t*>(w.abortHost)[0] = 1;
  const auto start = std::chrono::steady_clock::now();
  CUDA_ASSERT(cudaStreamSynchronize(w.ranks[0].stream));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(w.errorHost[0], static_cast<uint32_t>(kLamportAborted));
  EXPECT_LT(seconds, 5.0);
}

TEST(GpuLamportOneShot, BaselineVariantStaysCorrect) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, kIoBytes));
  std::mt19937 rng(31);
  w.variant = LamportKernelVariant::kBaseline;
  ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(50, rng, 70000), rng));
  // Variants share the workspace format: switching between calls keeps the rotation consistent.
  for (int i = 0; i < 6; ++i) {
    w.variant = i % 2 ? LamportKernelVariant::kBaseline : LamportKernelVariant::kFast;
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(20, rng, 70000), rng)) << "switch " << i;
  }
}

TEST(GpuLamportOneShot, FastBlockSizesAndLargeMessages) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(2, 4u << 20, 4u << 20));
  w.maxBlocks = 0;  // the launcher's own residency bound (1/kLamportResidencyShare of the GPU)
  std::mt19937 rng(8);
  for (int threads : {32, 128, 256, 512}) {
    w.blockThreads = threads;
    std::vector<CallSpec> calls;
    calls.push_back(CallSpec{LamportDataType::kBFloat16, LamportReduceOp::kSum, (4u << 20) / 2 - 64, 0, 0, false, Values::kRandom});
    ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng)) << threads << " threads";
    calls = {CallSpec{LamportDataType::kFloat32, LamportReduceOp::kAvg, 300001, 2, 6, false, Values::kRandom},
             CallSpec{LamportDataType::kFloat16, LamportReduceOp::kSum, 77777, 0, 2, true, Values::kSpecial}};
    ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng)) << threads << " threads";
  }
}

/** Fills rank r's input of call c (at the start of its send buffer) and poisons its output. */
std::vector<std::vector<uint8_t>> prepareCall(World& w, const CallSpec& c, std::mt19937& rng) {
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

void checkPrepared(World& w, const CallSpec& c, const std::vector<std::vector<uint8_t>>& inputs) {
  std::vector<std::vector<uint8_t>> outs(w.nRanks);
  for (int r = 0; r < w.nRanks; ++r) {
    outs[r].resize(c.count * elemBytes(c.type) + kPad);
    CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
    CUDA_ASSERT(cudaMemcpy(outs[r].data(), w.ranks[r].recv, outs[r].size(), cudaMemcpyDeviceToHost));
  }
  ASSERT_NO_FATAL_FAILURE(checkCall(c, inputs, outs, 0));
}

/**
 * Issue 10 point 1: two communicators A and C over the same two ranks, each on its own streams,
 * large allreduces issued A-then-C on rank 0 and C-then-A on rank 1, the grids sized by the
 * launcher alone (no test cap). With full-residency grids the first kernel fills the GPU and the
 * others never get an SM, so every kernel waits until its timeout
 * (BaselineFullResidencyGridsDeadlockTwoCommunicators shows it). The default kernel takes a bounded
 * share of the device, so all four are co-resident and the calls finish.
 */
void runOppositeOrder(LamportKernelVariant variant, size_t bytes, uint64_t timeoutNs, bool expectOk) {
  World a, c;
  ASSERT_NO_FATAL_FAILURE(a.init(2, bytes + kPad, bytes));
  ASSERT_NO_FATAL_FAILURE(c.init(2, bytes + kPad, bytes));
  for (World* w : {&a, &c}) {
    w->maxBlocks = 0;
    w->variant = variant;
    w->timeoutNs = timeoutNs;
  }
  std::mt19937 rng(static_cast<unsigned>(bytes));
  const CallSpec spec{LamportDataType::kBFloat16, LamportReduceOp::kSum, bytes / 2};
  const auto inA = prepareCall(a, spec, rng);
  const auto inC = prepareCall(c, spec, rng);
  auto launch = [&](World& w, int rank) {
    w.launch(rank, w.args(rank, w.ranks[rank].send, w.ranks[rank].recv, spec));
  };
  const auto start = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(launch(a, 0));  // rank 0: A then C
  ASSERT_NO_FATAL_FAILURE(launch(c, 1));  // rank 1: C then A
  ASSERT_NO_FATAL_FAILURE(launch(c, 0));
  ASSERT_NO_FATAL_FAILURE(launch(a, 1));
  ASSERT_NO_FATAL_FAILURE(a.syncAll());
  ASSERT_NO_FATAL_FAILURE(c.syncAll());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint32_t errors = 0;
  for (World* w : {&a, &c}) {
    for (int r = 0; r < 2; ++r) errors |= w->errorHost[r];
  }
  if (expectOk) {
    EXPECT_EQ(errors, 0u) << bytes << " bytes: a kernel gave up after " << seconds << " s (deadlock)";
    ASSERT_NO_FATAL_FAILURE(checkPrepared(a, spec, inA));
    ASSERT_NO_FATAL_FAILURE(checkPrepared(c, spec, inC));
  } else {
    EXPECT_NE(errors, 0u) << "the baseline's full-residency grids were expected to deadlock";
  }
}

TEST(GpuLamportOneShot, TwoCommunicatorsInOppositeOrderDoNotDeadlock) {
  SKIP_WITHOUT_GPU();
  for (size_t bytes : {size_t{4} << 20, size_t{8} << 20, size_t{16} << 20}) {
    ASSERT_NO_FATAL_FAILURE(runOppositeOrder(LamportKernelVariant::kFast, bytes, 5ull * 1000 * 1000 * 1000, true))
        << bytes << " bytes";
  }
}

// The test above is able to fail: the same scenario with the launcher of 2026-12-01 (kBaseline,
// full-residency grids) deadlocks until the (short) timeout. Only meaningful with both ranks on
// one GPU, where one grid fills the device.
TEST(GpuLamportOneShot, BaselineFullResidencyGridsDeadlockTwoCommunicators) {
  SKIP_WITHOUT_GPU();
  if (gpuCount() >= 2) GTEST_SKIP() << "needs both ranks on one GPU";
  ASSERT_NO_FATAL_FAILURE(runOppositeOrder(LamportKernelVariant::kBaseline, size_t{8} << 20,
                                           1000ull * 1000 * 1000, false));
}

// ---------------------------------------------------------------------------------------------
// Other world sizes (unrolled 4, 8; generic 3, 5)
// ---------------------------------------------------------------------------------------------

class GpuLamportRanks : public ::testing::TestWithParam<int> {};

TEST_P(GpuLamportRanks, CorrectAndRotates) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(GetParam(), kIoBytes));
  std::mt19937 rng(GetParam());
  for (LamportDataType t : kTypes) {
    std::vector<CallSpec> calls;
    for (LamportReduceOp op : kOps) {
      for (size_t count : {size_t{1}, size_t{9}, size_t{1000}, size_t{4097}, size_t{65537}}) {
        calls.push_back(CallSpec{t, op, count, 0, 0, false, Values::kRandom});
        calls.push_back(CallSpec{t, op, count, 2, elemBytes(t), false, Values::kSpecial});
      }
    }
    ASSERT_NO_FATAL_FAILURE(runBatch(w, calls, rng));
  }
  for (int batch = 0; batch < 4; ++batch) {
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(50, rng, 40000), rng));
  }
  w.expectNoErrors();
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuLamportRanks, ::testing::Values(3, 4, 5, 8));

// ---------------------------------------------------------------------------------------------
// Two-shot (LamportKernelVariant::kTwoShot): unrolled 4 and 8, generic 3 and 5
// ---------------------------------------------------------------------------------------------

class GpuLamportTwoShot : public ::testing::TestWithParam<int> {};

TEST_P(GpuLamportTwoShot, CorrectAndRotatesWithOneShotRounds) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(GetParam(), kIoBytes));
  w.variant = LamportKernelVariant::kTwoShot;
  std::mt19937 rng(100 + GetParam());
  for (LamportDataType t : kTypes) {
    std::vector<CallSpec> calls;
    for (LamportReduceOp op : kOps) {
      for (size_t count : {size_t{1}, size_t{9}, size_t{1000}, size_t{4097}, size_t{65537}, kSlotBytes / elemBytes(t)}) {
        calls.push_back(CallSpec{t, op, count, 0, 0, false, Values::kRandom});
        calls.push_back(CallSpec{t, op, count, 2, elemBytes(t), false, Values::kSpecial});
        calls.push_back(CallSpec{t, op, count, 0, 2, true, Values::kRandom});
      }
    }
    for (size_t i = 0; i < calls.size(); i += 12) {
      std::vector<CallSpec> batch(calls.begin() + i, calls.begin() + std::min(calls.size(), i + 12));
      ASSERT_NO_FATAL_FAILURE(runBatch(w, batch, rng)) << typeName(t);
    }
  }
  // The largest two-shot message: nRanks / 2 slots (two chunks per slot).
  const size_t capacityBytes = kSlotBytes / 32 * GetParam() * 16;
  for (LamportDataType t : kTypes) {
    ASSERT_NO_FATAL_FAILURE(runBatch(w, {CallSpec{t, LamportReduceOp::kSum, capacityBytes / elemBytes(t), 0, 0, false, Values::kRandom}}, rng));
  }
  // Two-shot and one-shot rounds alternate on the same workspace (shared rotation and dirty state).
  for (int batch = 0; batch < 6; ++batch) {
    w.variant = batch % 2 ? LamportKernelVariant::kFast : LamportKernelVariant::kTwoShot;
    ASSERT_NO_FATAL_FAILURE(runBatch(w, randomCalls(40, rng, 100000), rng)) << "batch " << batch;
  }
  w.expectNoErrors();
}

// A partial sum that rounds to -0.0 (the empty sentinel) must be re-sanitized before the
// all-gather publishes it, or the peers poll it until the timeout: avg of (negative smallest
// subnormal, +0, ...) is -tiny / nRanks, which rounds to -0 in every datatype.
TEST_P(GpuLamportTwoShot, ReducedNegativeZeroIsResanitized) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(GetParam(), 1 << 20));
  w.variant = LamportKernelVariant::kTwoShot;
  w.timeoutNs = 2ull * 1000 * 1000 * 1000;
  for (LamportDataType t : kTypes) {
    const CallSpec c{t, LamportReduceOp::kAvg, 4099};
    const uint32_t tiny = t == LamportDataType::kFloat32 ? 0x80000001u : 0x8001u;
    std::vector<std::vector<uint8_t>> inputs(w.nRanks, std::vector<uint8_t>(c.count * elemBytes(t), 0));
    // 16-bit types: only the high element of each 32-bit word, so the reduced word is exactly
    // (-0.0, +0.0) = 0x80000000, the sentinel; fp32: every element.
    for (size_t i = elemBytes(t) == 4 ? 0 : 1; i < c.count; i += elemBytes(t) == 4 ? 1 : 2) {
      std::memcpy(inputs[0].data() + i * elemBytes(t), &tiny, elemBytes(t));
    }
    for (int r = 0; r < w.nRanks; ++r) {
      CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
      CUDA_ASSERT(cudaMemcpy(w.ranks[r].send, inputs[r].data(), inputs[r].size(), cudaMemcpyHostToDevice));
      CUDA_ASSERT(cudaMemset(w.ranks[r].recv, 0xff, inputs[r].size() + kPad));
    }
    for (int r = 0; r < w.nRanks; ++r) ASSERT_NO_FATAL_FAILURE(w.launch(r, w.args(r, w.ranks[r].send, w.ranks[r].recv, c)));
    ASSERT_NO_FATAL_FAILURE(w.syncAll());
    w.expectNoErrors();
    ASSERT_NO_FATAL_FAILURE(checkPrepared(w, c, inputs)) << typeName(t);
  }
}

TEST_P(GpuLamportTwoShot, GraphReplays) {
  SKIP_WITHOUT_GPU();
  World w;
  ASSERT_NO_FATAL_FAILURE(w.init(GetParam(), kIoBytes));
  w.variant = LamportKernelVariant::kTwoShot;
  const CallSpec c{LamportDataType::kBFloat16, LamportReduceOp::kSum, 100003};
  std::vector<cudaGraphExec_t> execs(w.nRanks);
  for (int r = 0; r < w.nRanks; ++r) {
    SimRank& k = w.ranks[r];
    CUDA_ASSERT(cudaSetDevice(k.device));
    CUDA_ASSERT(cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < 3; ++i) CUDA_ASSERT(launchLamportOneShot(w.args(r, k.send, k.recv, c), k.stream));
    cudaGraph_t graph;
    CUDA_ASSERT(cudaStreamEndCapture(k.stream, &graph));
    CUDA_ASSERT(cudaGraphInstantiate(&execs[r], graph, 0));
    CUDA_ASSERT(cudaGraphDestroy(graph));
  }
  std::mt19937 rng(3);
  for (int rep = 0; rep < 100; ++rep) {
    const auto inputs = prepareCall(w, c, rng);
    for (int r = 0; r < w.nRanks; ++r) {
      CUDA_ASSERT(cudaSetDevice(w.ranks[r].device));
      CUDA_ASSERT(cudaGraphLaunch(execs[r], w.ranks[r].stream));
    }
    ASSERT_NO_FATAL_FAILURE(w.syncAll());
    ASSERT_NO_FATAL_FAILURE(checkPrepared(w, c, inputs)) << "replay " << rep;
  }
  w.expectNoErrors();
  for (int r = 0; r < w.nRanks; ++r) {
    EXPECT_EQ(w.state(r).roundsDone, 300u);
    cudaGraphExecDestroy(execs[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuLamportTwoShot, ::testing::Values(3, 4, 5, 8));

}  // namespace
}  // namespace nccl_lamport
