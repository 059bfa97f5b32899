// The interposer's per-call dispatch (plugin/interpose/), on the CPU: which ncclAllReduce calls are
// taken for a Lamport kernel and which reach NCCL, when a call taken inside a group launches, and
// what ncclCommRevoke changes. The wrappers are linked in directly, against a stand-in NCCL
// (dispatch_stand_in_nccl.c), and an eligible communicator is made up in the registry as a
// finished set-up leaves it. With no GPU, a launch fails at its first CUDA call with
// ncclUnhandledCudaError and never reaches NCCL: that is how "taken" shows here.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "include/nccl_lamport.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/interpose/allreduce_nvtx.h"
#include "plugin/interpose/interpose_state.h"
#include "tests/unit/dispatch_stand_in_nccl.h"

namespace nccl_lamport {
namespace {

constexpr size_t kCrossoverBytes = 1024;  // the made-up communicator's one-shot bound

char gHandles[16][64];        // made-up communicator handles, one per test
char gPeerMemory[2][4096];    // never touched: no launch gets that far without a GPU
LamportHostFlags gHostFlags[16];  // one per handle; an entry may outlive its test in the registry
float gBuf[1 << 16];

struct MadeUpComm {
  ncclComm_t comm;
  std::shared_ptr<LamportComm> lc;
};

/** An eligible 2-rank entry for handle `index`, as a finished set-up leaves it. */
MadeUpComm makeEligible(int index, int rank) {
  auto lc = std::make_shared<LamportComm>();
  lc->comm = reinterpret_cast<ncclComm_t>(gHandles[index]);
  lc->lamportRank = rank;
  lc->ncclRank = rank;
  lc->nRanks = 2;
  lc->cudaDev = 0;
  lc->eligible = true;
  lc->reason = "made up by the test";
  lc->table.oneShotMaxBytes = kCrossoverBytes;
  lc->launchTemplate.layout = LamportLayout{2, kCrossoverBytes};
  lc->launchTemplate.rank = rank;
  lc->launchTemplate.peerBases[0] = gPeerMemory[0];
  lc->launchTemplate.peerBases[1] = gPeerMemory[1];
  lc->hostFlags = &gHostFlags[index];
  CommRegistry::instance().insert(lc);
  return MadeUpComm{lc->comm, lc};
}

ncclLamportPath_t pathOf(ncclComm_t comm, size_t count) {
  ncclLamportPath_t path = ncclLamportPathNccl;
  EXPECT_EQ(ncclLamportGetAllReducePath(comm, count, ncclFloat32, ncclSum, &path), ncclSuccess);
  return path;
}

/** A small float32 sum on comm: taken (ncclUnhandledCudaError here) or NCCL's answer. */
ncclResult_t smallAllReduce(ncclComm_t comm) {
  return ncclAllReduce(gBuf, gBuf, 64, ncclFloat32, ncclSum, comm, nullptr);
}

class Dispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
      GTEST_SKIP() << "needs a machine without a GPU: a taken call must fail at its first CUDA call here";
    }
    cudaGetLastError();
    ASSERT_EQ(ncclLamportIsActive(), 1);
    ASSERT_EQ(standInGroupDepth(), 0);
  }
};

TEST_F(Dispatch, SmallCallsAreTakenAndLargeOnesReachNccl) {
  const MadeUpComm c = makeEligible(0, 0);
  const int before = standInAllReduceCalls();
  EXPECT_EQ(smallAllReduce(c.comm), ncclUnhandledCudaError);
  EXPECT_EQ(standInAllReduceCalls(), before);
  EXPECT_EQ(ncclAllReduce(gBuf, gBuf, 1 << 16, ncclFloat32, ncclSum, c.comm, nullptr), ncclSuccess);
  EXPECT_EQ(standInAllReduceCalls(), before + 1);
}

// Negative datatypes and ops are outside the enums' range, so undefined in C++ (the sanitizer
// build stops on them); tests/gpu/test_gpu_errors.cc passes them from the GPU tests instead.
TEST_F(Dispatch, EachArgumentCaseIsTakenOrReachesNccl) {
  const MadeUpComm c = makeEligible(1, 0);
  char* const odd = reinterpret_cast<char*>(gBuf) + 3;
  const struct Case {
    const char* what;
    const void* sendbuff;
    void* recvbuff;
    size_t count;
    int datatype;
    int op;
    bool toNccl;
  } cases[] = {
      {"count 0", gBuf, gBuf, 0, ncclFloat32, ncclSum, true},
      {"at the crossover", gBuf, gBuf, kCrossoverBytes / 4, ncclFloat32, ncclSum, false},
      {"one element above it", gBuf, gBuf, kCrossoverBytes / 4 + 1, ncclFloat32, ncclSum, true},
      {"bf16 avg at the crossover", gBuf, gBuf, kCrossoverBytes / 2, ncclBfloat16, ncclAvg, false},
      {"fp16 one element above", gBuf, gBuf, kCrossoverBytes / 2 + 1, ncclFloat16, ncclSum, true},
      {"count near SIZE_MAX", gBuf, gBuf, ~size_t{0}, ncclFloat32, ncclSum, true},
      {"count * 4 wraps to 0", gBuf, gBuf, size_t{1} << 62, ncclFloat32, ncclSum, true},
      {"ncclProd", gBuf, gBuf, 4, ncclFloat32, ncclProd, true},
      {"ncclMax", gBuf, gBuf, 4, ncclFloat32, ncclMax, true},
      {"ncclNumOps", gBuf, gBuf, 4, ncclFloat32, ncclNumOps, true},
      {"a PreMulSum op", gBuf, gBuf, 4, ncclFloat32, ncclNumOps + 1, true},
      {"int32", gBuf, gBuf, 4, ncclInt32, ncclSum, true},
      {"fp8 e4m3", gBuf, gBuf, 4, ncclFloat8e4m3, ncclSum, true},
      {"float64", gBuf, gBuf, 4, ncclFloat64, ncclSum, true},
      {"ncclNumTypes", gBuf, gBuf, 4, ncclNumTypes, ncclSum, true},
      {"null sendbuff", nullptr, gBuf, 4, ncclFloat32, ncclSum, true},
      {"null recvbuff", gBuf, nullptr, 4, ncclFloat32, ncclSum, true},
      {"misaligned, in place", odd, odd, 4, ncclFloat32, ncclSum, false},
  };
  for (const Case& k : cases) {
    const int before = standInAllReduceCalls();
    ncclAllReduce(k.sendbuff, k.recvbuff, k.count, static_cast<ncclDataType_t>(k.datatype),
                  static_cast<ncclRedOp_t>(k.op), c.comm, nullptr);
    EXPECT_EQ(standInAllReduceCalls() == before + 1, k.toNccl) << k.what;
  }
}

TEST_F(Dispatch, ABusyOrFinalizedCommunicatorGoesToNccl) {
  const MadeUpComm c = makeEligible(2, 0);
  const int before = standInAllReduceCalls();
  standInSetAsyncState(ncclInProgress);  // NCCL answers every collective on it first
  EXPECT_EQ(smallAllReduce(c.comm), ncclSuccess);
  standInSetAsyncState(ncclSuccess);
  EXPECT_EQ(standInAllReduceCalls(), before + 1);
  ASSERT_EQ(ncclCommFinalize(c.comm), ncclSuccess);
  EXPECT_EQ(smallAllReduce(c.comm), ncclSuccess);
  EXPECT_EQ(standInAllReduceCalls(), before + 2);
}

// NCCL launches a group's work at the outermost ncclGroupEnd; a call we take launches there too,
// before NCCL's share of the group.
TEST_F(Dispatch, ACallTakenInsideAGroupLaunchesAtTheOutermostGroupEnd) {
  const MadeUpComm c = makeEligible(3, 0);
  const int calls = standInAllReduceCalls();
  const int ends = standInGroupEnds();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(smallAllReduce(c.comm), ncclSuccess) << "launched at call time";
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << "launched at the inner ncclGroupEnd";
  EXPECT_EQ(ncclGroupEnd(), ncclUnhandledCudaError) << "not launched at the outermost ncclGroupEnd";
  EXPECT_EQ(standInGroupEnds(), ends + 1) << "NCCL's group was not ended";
  EXPECT_EQ(standInGroupDepth(), 0);
  EXPECT_EQ(standInAllReduceCalls(), calls);
  // Launched once: the next group has nothing left over.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
}

// NCCL 2.28 launches nothing for a group ended by ncclGroupSimulateEnd; it estimates its tasks.
TEST_F(Dispatch, ASimulatedGroupHandsItsCallsToNcclAndRunsNothing) {
  const MadeUpComm c = makeEligible(4, 0);
  const int calls = standInAllReduceCalls();
  const int simulated = standInSimulatedGroupEnds();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(smallAllReduce(c.comm), ncclSuccess) << "the call ran at call time";
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess) << "the call ran in a simulated group";
  EXPECT_EQ(standInAllReduceCalls(), calls + 1) << "NCCL's simulation never saw the call";
  EXPECT_EQ(standInSimulatedGroupEnds(), simulated + 1);
  EXPECT_EQ(standInGroupDepth(), 0);
  EXPECT_EQ(pathOf(c.comm, 64), ncclLamportPathOneShot) << "the simulation changed the communicator";
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << "the simulated call was left over for the next group";
}

TEST_F(Dispatch, ACommunicatorDestroyedInsideTheGroupOfItsCallIsNotLaunched) {
  const MadeUpComm c = makeEligible(5, 0);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(smallAllReduce(c.comm), ncclSuccess);
  CommRegistry::instance().remove(c.comm);  // as a destroy releases it
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(standInGroupDepth(), 0);
}

// NCCL 2.28 refuses ncclCommRevoke with flags other than NCCL_REVOKE_DEFAULT and changes nothing;
// a communicator handed over on this rank alone would send its small calls to NCCL while its
// peers take the Lamport kernel (a hang).
TEST_F(Dispatch, ARevokeNcclRefusesLeavesTheCommunicatorAsItWas) {
  const MadeUpComm c = makeEligible(6, 0);
  const int taken = standInRevokesTaken();
  EXPECT_EQ(ncclCommRevoke(c.comm, 1), ncclInvalidArgument);
  EXPECT_EQ(standInRevokesTaken(), taken);
  EXPECT_EQ(pathOf(c.comm, 64), ncclLamportPathOneShot);
  EXPECT_EQ(c.lc->hostFlags->abort, 0u) << "the in-flight kernels of a live communicator were told to stop";
}

TEST_F(Dispatch, ARevokeNcclTakesHandsTheCommunicatorToNccl) {
  const MadeUpComm c = makeEligible(7, 0);
  const int taken = standInRevokesTaken();
  EXPECT_EQ(ncclCommRevoke(c.comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
  EXPECT_EQ(standInRevokesTaken(), taken + 1);
  EXPECT_EQ(pathOf(c.comm, 64), ncclLamportPathNccl);
  EXPECT_NE(c.lc->hostFlags->abort, 0u);
}

TEST_F(Dispatch, ARevokeAfterFinalizeIsLeftToNccl) {
  const MadeUpComm c = makeEligible(8, 0);
  ASSERT_EQ(ncclCommFinalize(c.comm), ncclSuccess);
  ncclCommRevoke(c.comm, NCCL_REVOKE_DEFAULT);  // NCCL refuses it after a finalize
  EXPECT_EQ(c.lc->hostFlags->abort, 0u) << "a finalized communicator's kernels were told to stop";
}

// ctest runs this binary once more with NCCL_CHECK_POINTERS=1 (tests/unit/cpu_tests.cmake).
TEST_F(Dispatch, WithPointerChecksOnABufferNcclWouldRefuseGoesToNccl) {
  const MadeUpComm c = makeEligible(9, 0);
  const char* env = getenv("NCCL_CHECK_POINTERS");
  const bool checksOn = env != nullptr && std::string(env) == "1";
  const int before = standInAllReduceCalls();
  // gBuf is host memory CUDA does not know: NCCL's CudaPtrCheck refuses it.
  EXPECT_EQ(smallAllReduce(c.comm), checksOn ? ncclSuccess : ncclUnhandledCudaError);
  EXPECT_EQ(standInAllReduceCalls(), before + (checksOn ? 1 : 0)) << "checks on: " << checksOn;
}

/** A counter of the stand-in NVTX tool (tests/shim/nvtx_counting_tool.c) that NVTX_INJECTION64_PATH
 *  names, or -1 where NVTX has not loaded it. */
int nvtxToolCount(const char* function) {
  const char* path = getenv("NVTX_INJECTION64_PATH");
  void* tool = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  const auto read = tool != nullptr ? reinterpret_cast<int (*)()>(dlsym(tool, function)) : nullptr;
  return read != nullptr ? read() : -1;
}

// A call we take never reaches NCCL's ncclAllReduce, which opens the "ncclAllReduce" range in
// NVTX domain "NCCL": ours opens it instead, once per call, closed on return; a call that goes
// to NCCL gets NCCL's. With NCCL_NVTX_DISABLE=1 no range is opened (NVTX never loads the tool).
// Runs as the ctest entries allreduce_dispatch.nvtx_range and .nvtx_disabled, with the tool.
TEST_F(Dispatch, ATakenCallOpensNcclsAllReduceRange) {
  if (getenv("NVTX_INJECTION64_PATH") == nullptr) {
    GTEST_SKIP() << "runs as allreduce_dispatch.nvtx_range, with the stand-in NVTX tool loaded";
  }
  const bool disabled = nvtxDisabledBy(getenv("NCCL_NVTX_DISABLE"));
  const MadeUpComm c = makeEligible(10, 0);
  EXPECT_EQ(smallAllReduce(c.comm), ncclUnhandledCudaError);  // taken
  EXPECT_EQ(nvtxToolCount("stubNvtxAllReduceRanges"), disabled ? -1 : 1);
  EXPECT_EQ(ncclAllReduce(gBuf, gBuf, 1 << 16, ncclFloat32, ncclSum, c.comm, nullptr), ncclSuccess);  // NCCL's
  EXPECT_EQ(nvtxToolCount("stubNvtxAllReduceRanges"), disabled ? -1 : 1);
  EXPECT_EQ(nvtxToolCount("stubNvtxOpenRanges"), disabled ? -1 : 0);
}

TEST(Nvtx, NcclNvtxDisableIsAnIntegerInBaseZero) {
  EXPECT_FALSE(nvtxDisabledBy(nullptr));
  EXPECT_TRUE(nvtxDisabledBy("1"));
  EXPECT_TRUE(nvtxDisabledBy("0x2"));
  EXPECT_FALSE(nvtxDisabledBy("0"));
  EXPECT_FALSE(nvtxDisabledBy(""));
  EXPECT_FALSE(nvtxDisabledBy("99999999999999999999"));  // out of range: NCCL keeps its default, on
}

TEST(PointerChecks, FollowNcclsVariables) {
  EXPECT_FALSE(ncclChecksPointers(nullptr, nullptr));
  EXPECT_TRUE(ncclChecksPointers("1", nullptr));
  EXPECT_TRUE(ncclChecksPointers("0x1", nullptr));  // NCCL's parameters are read with base 0
  EXPECT_FALSE(ncclChecksPointers("0", nullptr));
  EXPECT_FALSE(ncclChecksPointers("2", nullptr));   // NCCL compares with 1
  EXPECT_FALSE(ncclChecksPointers("", nullptr));
  EXPECT_TRUE(ncclChecksPointers(nullptr, "DEBUG_LOCAL"));
  EXPECT_TRUE(ncclChecksPointers(nullptr, "debug_global"));
  EXPECT_FALSE(ncclChecksPointers(nullptr, "DEFAULT"));
  EXPECT_FALSE(ncclChecksPointers("0", ""));
}

// cudaStreamPerThread is another stream on every thread: two calls through it from two threads
// must be ordered like calls on two streams.
TEST(StreamOrdering, ThePerThreadStreamIsTheSameOnlyOnOneThread) {
  const std::thread::id self = std::this_thread::get_id();
  std::thread::id other;
  std::thread([&] { other = std::this_thread::get_id(); }).join();
  auto* s1 = reinterpret_cast<cudaStream_t>(0x1000);
  auto* s2 = reinterpret_cast<cudaStream_t>(0x2000);
  EXPECT_TRUE(sameStreamAsLastCall(s1, self, s1, self));
  EXPECT_TRUE(sameStreamAsLastCall(s1, other, s1, self)) << "a real stream is one stream on every thread";
  EXPECT_FALSE(sameStreamAsLastCall(s1, self, s2, self));
  EXPECT_TRUE(sameStreamAsLastCall(nullptr, other, nullptr, self)) << "the legacy stream is process-wide";
  EXPECT_TRUE(sameStreamAsLastCall(cudaStreamPerThread, self, cudaStreamPerThread, self));
  EXPECT_FALSE(sameStreamAsLastCall(cudaStreamPerThread, other, cudaStreamPerThread, self));
}

}  // namespace
}  // namespace nccl_lamport
