/* Calls the signature-agnostic forwarders of libnccl-lamport.so (plugin/abi/opaque_forward.S, names
 * in plugin/abi/opaque_api_list.h) through dlopen/dlsym, with no GPU. Every function is called twice:
 * the first call takes the trampoline's slow path (the resolver runs between the caller and the
 * real function), the second its fast path.
 *
 *   opaque_calls real SO       the real libnccl.so.2 behind us (found by name): ncclLLA2ACalcSlots,
 *                              ncclLLA2ACreateRequirement and ncclLsaBarrierCreateRequirement
 *                              (host-only computations, no communicator) give through our object
 *                              exactly what they give called directly
 *   opaque_calls none SO       NCCL_LAMPORT_NCCL_PATH names a missing file (no NCCL): each
 *                              forwarded function returns its documented fallback, nothing
 *                              crashes; the functions NCCL 2.29 and 2.30 added are exported too
 *   opaque_calls abi SO        NCCL_LAMPORT_NCCL_PATH names tests/shim/fake_opaque_nccl.c: all
 *                              integer and vector argument registers, stack arguments, varargs,
 *                              struct arguments and results (in registers and in memory) and a
 *                              double result pass through unchanged
 * Prints "opaque_calls: PASS" and exits 0 on success. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_opaque_nccl.h"
#include "shim_check.h"

/* The real signatures (the nccl_device/ headers), with ncclTeam as FakeTeam (same layout). */
typedef int (*CalcSlotsFn)(int maxElts, int maxEltSize);
typedef ncclResult_t (*LLA2ARequirementFn)(int nBlocks, int nSlots, void* outHandle, void* outReq);
typedef ncclResult_t (*LsaBarrierRequirementFn)(FakeTeam team, int nBarriers, void* outHandle, void* outReq);
typedef ncclResult_t (*DevCommCreateFn)(ncclComm_t comm, const void* reqs, void* outDevComm);
typedef ncclResult_t (*DevCommDestroyFn)(ncclComm_t comm, const void* devComm);
typedef ncclResult_t (*GinBarrierRequirementFn)(ncclComm_t comm, FakeTeam team, int nBarriers, void* outHandle,
                                                void* outReq);
typedef FakeTeam (*TeamFn)(ncclComm_t comm);
typedef int (*TeamRankFn)(ncclComm_t comm, FakeTeam team, int rank);
typedef void (*VoidFn)(void);

static void* mustSym(void* handle, const char* name) {
  void* fn = dlsym(handle, name);
  if (fn == NULL) {
    fprintf(stderr, "FAIL: dlsym(%s): %s\n", name, dlerror());
    exit(1);
  }
  return fn;
}

/* Output buffers of the *CreateRequirement functions: larger than their structs, zeroed. */
struct Outputs {
  unsigned char handle[64];
  unsigned char req[256];
};

static void realNcclCalls(void* ours, void* real) {
  static const int kArgs[][2] = {{1, 1}, {7, 3}, {1000, 16}, {12345, 100}, {3, 64}, {1 << 20, 8}};
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < sizeof(kArgs) / sizeof(kArgs[0]); ++i) {
      const int a = kArgs[i][0];
      const int b = kArgs[i][1];
      const int got = ((CalcSlotsFn)mustSym(ours, "ncclLLA2ACalcSlots"))(a, b);
      const int want = ((CalcSlotsFn)mustSym(real, "ncclLLA2ACalcSlots"))(a, b);
      CHECK(got == want, "ncclLLA2ACalcSlots(%d, %d): %d through our object, %d from NCCL", a, b, got, want);
      if (round == 0 && i == 2) printf("ncclLLA2ACalcSlots(%d, %d) = %d (NCCL: %d)\n", a, b, got, want);
    }
    /* The same output buffers for both calls: the requirement points at the handle. */
    struct Outputs out, ourOut;
    const FakeTeam team = {8, 3, 1};
    const char* names[] = {"ncclLLA2ACreateRequirement", "ncclLsaBarrierCreateRequirement"};
    for (int which = 0; which < 2; ++which) {
      ncclResult_t ourResult = ncclInternalError;
      ncclResult_t realResult = ncclInternalError;
      for (int side = 0; side < 2; ++side) {
        void* lib = side == 0 ? ours : real;
        memset(&out, 0, sizeof(out));
        ncclResult_t* result = side == 0 ? &ourResult : &realResult;
        if (which == 0) {
          *result = ((LLA2ARequirementFn)mustSym(lib, names[which]))(4, 96, out.handle, out.req);
        } else {
          *result = ((LsaBarrierRequirementFn)mustSym(lib, names[which]))(team, 5, out.handle, out.req);
        }
        if (side == 0) ourOut = out;
      }
      CHECK(ourResult == realResult && ourResult == ncclSuccess, "%s: %d through our object, %d from NCCL",
            names[which], ourResult, realResult);
      CHECK(memcmp(&ourOut, &out, sizeof(out)) == 0, "%s: other outputs through our object", names[which]);
    }
  }
}

static void noNcclCalls(void* ours) {
  const FakeTeam team = {8, 3, 1};
  const FakeTeam zero = {0, 0, 0};
  struct Outputs out;
  for (int round = 0; round < 2; ++round) {
    CHECK(((CalcSlotsFn)mustSym(ours, "ncclLLA2ACalcSlots"))(1000, 16) == 0, "ncclLLA2ACalcSlots must return 0");
    CHECK(((LLA2ARequirementFn)mustSym(ours, "ncclLLA2ACreateRequirement"))(4, 96, out.handle, out.req) ==
              ncclSystemError,
          "ncclLLA2ACreateRequirement must fail with ncclSystemError");
    CHECK(((LsaBarrierRequirementFn)mustSym(ours, "ncclLsaBarrierCreateRequirement"))(team, 5, out.handle,
                                                                                       out.req) == ncclSystemError,
          "ncclLsaBarrierCreateRequirement must fail with ncclSystemError");
    CHECK(((GinBarrierRequirementFn)mustSym(ours, "ncclGinBarrierCreateRequirement"))(NULL, team, 5, out.handle,
                                                                                       out.req) == ncclSystemError,
          "ncclGinBarrierCreateRequirement must fail with ncclSystemError");
    CHECK(((DevCommCreateFn)mustSym(ours, "ncclDevCommCreate"))(NULL, NULL, NULL) == ncclSystemError,
          "ncclDevCommCreate must fail with ncclSystemError");
    CHECK(((DevCommDestroyFn)mustSym(ours, "ncclDevCommDestroy"))(NULL, NULL) == ncclSystemError,
          "ncclDevCommDestroy must fail with ncclSystemError");
    const char* teams[] = {"ncclTeamWorld", "ncclTeamLsa", "ncclTeamRail"};
    for (int i = 0; i < 3; ++i) {
      const FakeTeam got = ((TeamFn)mustSym(ours, teams[i]))(NULL);
      CHECK(memcmp(&got, &zero, sizeof(got)) == 0, "%s must return a zero team, not {%d, %d, %d}", teams[i],
            got.nRanks, got.rank, got.stride);
    }
    CHECK(((TeamRankFn)mustSym(ours, "ncclTeamRankToWorld"))(NULL, team, 2) == 0, "ncclTeamRankToWorld must return 0");
    CHECK(((TeamRankFn)mustSym(ours, "ncclTeamRankToLsa"))(NULL, team, 2) == 0, "ncclTeamRankToLsa must return 0");
    ((VoidFn)mustSym(ours, "ncclResetDebugInitInternal"))();
    ((VoidFn)mustSym(ours, "ncclResetDebugInit"))(); /* forwarded opaquely too (opaque_api_list.h) */
    /* Added by NCCL 2.29 and 2.30 (not in the 2.28 headers): a program built against them must
     * find each in our object, and without an NCCL behind us each fails with ncclSystemError
     * (the stand-in reads no argument, so none is passed here; ncclParamDumpAll returns nothing). */
    static const char* const kNewer[] = {
        "ncclCommGetUniqueId", "ncclCommGrow", "ncclCommMemStats", "ncclCommQueryProperties", "ncclCommResume",
        "ncclCommSuspend", "ncclGetLsaDevicePointer", "ncclGetLsaMultimemDevicePointer",
        "ncclGetMultimemDevicePointer", "ncclGetPeerDevicePointer", "ncclGinInboxA2ACreateRequirement",
        "ncclGinOutboxCreateRequirement", "ncclParamBind", "ncclParamGet", "ncclParamGetAllParameterKeys",
        "ncclParamGetI16", "ncclParamGetI32", "ncclParamGetI64", "ncclParamGetI8", "ncclParamGetParameter",
        "ncclParamGetStr", "ncclParamGetU16", "ncclParamGetU32", "ncclParamGetU64", "ncclParamGetU8",
        "ncclPutSignal", "ncclSignal", "ncclWaitSignal", "ncclWinGetUserPtr"};
    for (size_t i = 0; i < sizeof(kNewer) / sizeof(kNewer[0]); ++i) {
      void* fn = dlsym(ours, kNewer[i]);
      CHECK(fn != NULL, "%s (NCCL 2.29/2.30) is not exported", kNewer[i]);
      if (fn != NULL) {
        CHECK(((ncclResult_t(*)(void))fn)() == ncclSystemError, "%s must fail with ncclSystemError", kNewer[i]);
      }
    }
    void* dumpAll = dlsym(ours, "ncclParamDumpAll");
    CHECK(dumpAll != NULL, "ncclParamDumpAll (NCCL 2.30) is not exported");
    if (dumpAll != NULL) ((VoidFn)dumpAll)();
  }
  CHECK(dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD) == NULL, "the plugin loaded an NCCL after all");
}

static void abiCalls(void* ours) {
  const FakeAllRegistersFn all = (FakeAllRegistersFn)mustSym(ours, "ncclLLA2ACalcSlots");
  const FakeVarargsFn varargs = (FakeVarargsFn)mustSym(ours, "ncclDevCommCreate");
  const FakeTeamFn team = (FakeTeamFn)mustSym(ours, "ncclTeamWorld");
  const FakeDoubleFn twice = (FakeDoubleFn)mustSym(ours, "ncclTeamRail");
  const FakeBigFn big = (FakeBigFn)mustSym(ours, "ncclTeamLsa");
#define I(i) FAKE_OPAQUE_INT(i)
#define D(i) FAKE_OPAQUE_DOUBLE(i)
  for (int round = 0; round < 2; ++round) {
    long wrong = all(I(0), I(1), I(2), I(3), I(4), I(5), D(0), D(1), D(2), D(3), D(4), D(5), D(6), D(7), I(6), I(7));
    CHECK(wrong == 0, "16 arguments: mask of those that arrived wrong 0x%lx (round %d)", wrong, round);
    wrong = varargs(8, D(0), D(1), D(2), D(3), D(4), D(5), D(6), D(7), I(0), I(1), I(2), I(3), I(4), I(5), I(6),
                    I(7));
    CHECK(wrong == 0, "varargs: mask of those that arrived wrong 0x%lx (round %d)", wrong, round);
    const FakeTeam in = {8, 3, 1};
    const FakeTeam got = team(in, 10 + round);
    CHECK(got.nRanks == 18 + round && got.rank == 13 + round && got.stride == 11 + round,
          "team by value: {%d, %d, %d} (round %d)", got.nRanks, got.rank, got.stride, round);
    const double x = twice(D(3), 7);
    CHECK(x == 2 * D(3) + 7, "double result %g, expected %g (round %d)", x, 2 * D(3) + 7, round);
    const FakeBig b = big(I(round));
    for (int i = 0; i < 5; ++i) {
      CHECK(b.words[i] == I(round) + i, "struct in memory: word %d is %ld (round %d)", i, b.words[i], round);
    }
  }
#undef I
#undef D
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const char* so = argc > 2 ? argv[2] : NULL;
  void* ours = so != NULL ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (ours == NULL) {
    fprintf(stderr, "usage: %s real|none|abi libnccl-lamport.so (%s)\n", argv[0], so != NULL ? dlerror() : "");
    return 2;
  }
  CHECK(dlsym(ours, "ncclLamportIsActive") != NULL, "%s is not libnccl-lamport.so", so);
  if (strcmp(mode, "real") == 0) {
    /* Our first call makes the plugin load libnccl.so.2 by name (nothing loaded it before). */
    const int first = ((CalcSlotsFn)mustSym(ours, "ncclLLA2ACalcSlots"))(777, 24);
    void* real = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    CHECK(real != NULL && dlsym(real, "ncclLamportIsActive") == NULL, "no real libnccl.so.2 loaded by the plugin");
    if (real != NULL) {
      const int want = ((CalcSlotsFn)mustSym(real, "ncclLLA2ACalcSlots"))(777, 24);
      CHECK(first == want, "first ncclLLA2ACalcSlots(777, 24): %d through our object, %d from NCCL", first, want);
      realNcclCalls(ours, real);
    }
  } else if (strcmp(mode, "none") == 0) {
    noNcclCalls(ours);
  } else if (strcmp(mode, "abi") == 0) {
    abiCalls(ours);
  } else {
    fprintf(stderr, "usage: %s real|none|abi libnccl-lamport.so\n", argv[0]);
    return 2;
  }
  return shimCheckResult("opaque_calls");
}
