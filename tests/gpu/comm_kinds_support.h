// Helpers shared by the communicator-kind GPU tests (test_gpu_comm_kinds.cc: splits, shrink,
// scalable init, revoke, several comms from several threads; test_gpu_comm_kinds_nonblocking.cc:
// non-blocking communicators): call specs, checked steps on blocking and non-blocking
// communicators, timed destroy, and NCCL entry points a library may lack. See the file comment of
// test_gpu_comm_kinds.cc for what "accelerated" and "checked" mean and how waits are bounded.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/gpu_test_support.h"

#ifndef NCCL_SHRINK_DEFAULT
#define NCCL_SHRINK_DEFAULT 0x00
#endif
#ifndef NCCL_REVOKE_DEFAULT
#define NCCL_REVOKE_DEFAULT 0x00
#endif

namespace nccl_lamport {
namespace gputest {
namespace comm_kinds {

inline constexpr double kWaitSeconds = 60, kReadySeconds = 120;

inline ForkOptions ranks(int n, double timeoutSeconds, std::vector<std::pair<std::string, std::string>> env = {}) {
  return forkRanks(n, timeoutSeconds, std::move(env), 20000);
}

inline CallSpec spec(ncclDataType_t dtype, size_t count, ncclRedOp_t op = ncclSum) {
  CallSpec s;
  s.dtype = dtype;
  s.count = count;
  s.op = op;
  return s;
}

inline bool lamportSized(const CallSpec& s) { return s.count > 0 && elementSize(s.dtype) * s.count <= kTestOneShotMaxBytes; }

/** Calls that cover both sides of the suite's 256K crossover: 4 Lamport-sized, 1 past it. */
inline std::vector<CallSpec> mixedSpecs() {
  return {spec(ncclBfloat16, 4096), spec(ncclFloat32, 1, ncclAvg), spec(ncclFloat16, 65537),
          spec(ncclBfloat16, kTestOneShotMaxBytes / 2), spec(ncclBfloat16, kTestOneShotMaxBytes / 2 + 64, ncclAvg)};
}

/** runCheckedStep for every spec of mixedSpecs() on a blocking comm; the Lamport-sized count. */
inline uint64_t runMixed(Harness& hx, uint64_t seed) {
  uint64_t lamport = 0, i = 0;
  for (const CallSpec& s : mixedSpecs()) {
    runCheckedStep(hx, s, mixSeed(seed, i++), true);
    lamport += lamportSized(s) ? 1 : 0;
  }
  return lamport;
}

/** ncclResult_t from a call on a non-blocking communicator: both of these mean "accepted". */
inline bool accepted(ncclResult_t rc) { return rc == ncclSuccess || rc == ncclInProgress; }

/** One checked allreduce (and NCCL's reference) on a non-blocking communicator. */
inline bool nonBlockingStep(Harness& hx, const CallSpec& s, uint64_t seed, const char* what) {
  RankSlot& slot = hx.slots[0];
  CheckedCall call(s, slot);
  if (!call.setupError().empty()) return failf(hx, "%s: %s", what, call.setupError().c_str()), false;
  call.stage(seed);
  const std::string label = std::string(what) + " " + call.label();
  if (!waitStreams(hx, {slot.stream}, kWaitSeconds, "staging")) return false;
  ncclResult_t rc = call.issue(hx, slot);
  if (!accepted(rc)) failf(hx, "%s: ncclAllReduce returned %d (%s)", label.c_str(), rc, ncclGetErrorString(rc));
  if (lamportSized(s) && !call.expectLamport) failf(hx, "%s: Lamport-sized but not accelerated", label.c_str());
  if (!waitCommReady(hx, slot.comm, kWaitSeconds, label.c_str())) return false;
  rc = call.issueReference();
  if (!accepted(rc)) failf(hx, "%s: NCCL's own allreduce (reference) returned %d", label.c_str(), rc);
  if (!waitCommReady(hx, slot.comm, kWaitSeconds, label.c_str())) return false;
  if (!waitStreams(hx, {slot.stream}, kWaitSeconds, label.c_str())) return false;
  const std::string problems = call.verify(true);
  hx.failures->addCheck();
  if (!problems.empty()) failf(hx, "%s: %s", label.c_str(), problems.c_str());
  hx.cross->submit(slot, label, call.result(), *hx.failures);
  return true;
}

/** ncclCommInitRankConfig(blocking = 0) on a fresh id shared over h's comm; nullptr on failure.
 *  Returns right after the call (the communicator is then usually still in progress). */
inline ncclComm_t startNonBlockingInit(Harness& h, ncclResult_t* rcOut = nullptr) {
  ncclUniqueId id;
  if (!shareUniqueId(h, &id)) return nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, h.slots[0].nRanks, id, h.slots[0].rank, &config);
  if (rcOut != nullptr) *rcOut = rc;
  if (!accepted(rc) || comm == nullptr) {
    failf(h, "non-blocking ncclCommInitRankConfig returned %d (%s), comm %p", rc, ncclGetErrorString(rc),
          static_cast<void*>(comm));
    return nullptr;
  }
  return comm;
}

/** ncclCommDestroy on a second thread with a limit; ncclInProgress is fine for non-blocking comms. */
inline void destroyTimed(Harness& h, ncclComm_t* comm, bool nonBlocking, const char* what) {
  if (*comm == nullptr) return;
  ncclResult_t rc = ncclInternalError;
  const ncclComm_t c = *comm;
  timedOnThread(h, what, 30, [&] { rc = ncclCommDestroy(c); });
  *comm = nullptr;
  if (rc != ncclSuccess && !(nonBlocking && rc == ncclInProgress)) {
    failf(h, "%s returned %d (%s)", what, rc, ncclGetErrorString(rc));
  }
  h.failures->addCheck();
}

/** Destroys *comm at scope exit unless the test already destroyed or aborted it (set it to null). */
struct DestroyAtExit {
  ncclComm_t* comm;
  ~DestroyAtExit() {
    if (*comm != nullptr) ncclCommDestroy(*comm);
  }
};

/** A real NCCL entry point the loaded library may lack (SKIP then); called through the plugin's
 *  wrapper when it has one (RTLD_DEFAULT finds libnccl-lamport.so before libnccl; in tuner
 *  activation it finds NCCL's own entry, whose hook leads to the same wrapper). */
template <typename Fn>
Fn entryPoint(const char* name) {
  const std::string real = std::string("p") + name;
  if (dlsym(RTLD_DEFAULT, real.c_str()) == nullptr) return nullptr;
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}
using ShrinkFn = ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
using ScalableFn = ncclResult_t (*)(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*);
using RevokeFn = ncclResult_t (*)(ncclComm_t, int);

/** comm must be accelerated with a crossover of `expected` bytes, and its reason must name a cap of
 *  maxCtas blocks per launch (0: none). */
inline void checkCtaCap(Harness& h, ncclComm_t comm, size_t expected, int maxCtas, const char* what) {
  requireAccelerated(h, comm, h.slots[0].nRanks, -1, what);
  const ncclLamportCommInfo_t info = commInfo(comm);
  h.failures->addCheck();
  if (info.oneShotMaxBytes != expected) {
    failf(h, "%s: crossover %zu bytes, expected %zu (%s)", what, info.oneShotMaxBytes, expected, info.reason);
  }
  const std::string reason = info.reason;
  const bool named = reason.find("at most " + std::to_string(maxCtas) + " blocks per launch") != std::string::npos;
  const bool any = reason.find("blocks per launch") != std::string::npos;
  h.failures->addCheck();
  if (maxCtas > 0 ? !named : any) failf(h, "%s: expected a cap of %d blocks per launch, reason: %s", what, maxCtas, info.reason);
}

}  // namespace comm_kinds
}  // namespace gputest
}  // namespace nccl_lamport
