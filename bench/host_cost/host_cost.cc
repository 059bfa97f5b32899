// nccl-lamport-host-cost: the host time nccl-lamport adds to an ncclAllReduce call, measured with
// Google Benchmark against a stand-in NCCL whose calls return at once (null_nccl.c: no GPU, no
// kernel).
//
// The program links libnccl-lamport.so before the stand-in, as nccl-lamport-bench links the real
// NCCL, so ncclAllReduce reaches our wrapper and pncclAllReduce the stand-in directly:
//   BM_StandInDirect        pncclAllReduce on the stand-in: the floor (what NCCL itself costs here)
//   BM_WrapperKnownComm     ncclAllReduce on a communicator our wrapper knows: registry lookup,
//                           routing decision, counter, forwarding to the stand-in
//   BM_WrapperUnknownComm   ncclAllReduce on a communicator we never saw (lookup miss, forward)
//   BM_RouteQuery           ncclLamportGetAllReducePath: the lookup + routing alone
// Wrapper cost = BM_WrapperKnownComm - BM_StandInDirect. Without a GPU the communicator is not
// eligible, so the Lamport branch (device guard, argument copy, launch) is not in these numbers;
// docs/host-cost.md lists what that branch adds per call.
#include <benchmark/benchmark.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#include "nccl_lamport.h"

namespace {

ncclComm_t gKnown = nullptr;
ncclComm_t gUnknown = nullptr;
constexpr size_t kCount = 1024;  // bf16: 2 KB, a size the one-shot would take on an eligible comm

void initOnce() {
  if (gKnown != nullptr) return;
  ncclUniqueId id{};  // the stand-in ignores it (and has no ncclGetUniqueId)
  if (ncclCommInitRank(&gKnown, 2, id, 0) != ncclSuccess ||
      pncclCommInitRank(&gUnknown, 2, id, 0) != ncclSuccess) {  // p*: the wrapper never sees it
    std::fprintf(stderr, "nccl-lamport-host-cost: the stand-in NCCL could not create communicators\n");
    std::exit(1);
  }
  ncclLamportCommInfo_t info{};
  ncclLamportGetCommInfo(gKnown, &info);
  std::fprintf(stderr, "nccl-lamport-host-cost: plugin active %d; comm known %d eligible %d (%s)\n",
               ncclLamportIsActive(), info.known, info.eligible, info.reason);
}

void BM_StandInDirect(benchmark::State& state) {
  initOnce();
  for (auto _ : state) {
    benchmark::DoNotOptimize(pncclAllReduce(nullptr, nullptr, kCount, ncclBfloat16, ncclSum, gKnown, nullptr));
  }
}

void BM_WrapperKnownComm(benchmark::State& state) {
  initOnce();
  for (auto _ : state) {
    benchmark::DoNotOptimize(ncclAllReduce(nullptr, nullptr, kCount, ncclBfloat16, ncclSum, gKnown, nullptr));
  }
}

void BM_WrapperUnknownComm(benchmark::State& state) {
  initOnce();
  for (auto _ : state) {
    benchmark::DoNotOptimize(ncclAllReduce(nullptr, nullptr, kCount, ncclBfloat16, ncclSum, gUnknown, nullptr));
  }
}

void BM_RouteQuery(benchmark::State& state) {
  initOnce();
  ncclLamportPath_t path = ncclLamportPathNccl;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ncclLamportGetAllReducePath(gKnown, kCount, ncclBfloat16, ncclSum, &path));
  }
}

BENCHMARK(BM_StandInDirect);
BENCHMARK(BM_WrapperKnownComm);
BENCHMARK(BM_WrapperUnknownComm);
BENCHMARK(BM_RouteQuery);

}  // namespace

BENCHMARK_MAIN();
