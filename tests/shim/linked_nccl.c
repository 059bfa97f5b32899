/* A program linked against the real libnccl.so.2 (DT_NEEDED), as libtorch_cuda.so is, that
 * refers to the NCCL exports outside nccl.h (plugin/abi/opaque_api_list.h). Run under the LD_AUDIT
 * module, the loader gives it libnccl-lamport.so instead, and the program only starts if our
 * object defines every symbol it refers to: PyTorch failed with "undefined symbol:
 * ncclDevCommDestroy" before plugin/abi/opaque_forward.S. Then a call goes through our trampoline to
 * the real NCCL behind us, and must answer as that NCCL does.
 * Prints "linked_nccl: PASS" and exits 0 on success. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "plugin/loader/audit_protocol.h"

/* Declared here: the nccl_device/ headers need the CUDA headers. Only their addresses are
 * taken (references the loader must bind at start-up), except ncclLLA2ACalcSlots. */
extern void ncclDevCommCreate(void);
extern void ncclDevCommDestroy(void);
extern void ncclGinBarrierCreateRequirement(void);
extern void ncclLLA2ACreateRequirement(void);
extern void ncclLsaBarrierCreateRequirement(void);
extern void ncclResetDebugInitInternal(void);
extern void ncclTeamLsa(void);
extern void ncclTeamRail(void);
extern void ncclTeamRankToLsa(void);
extern void ncclTeamRankToWorld(void);
extern void ncclTeamWorld(void);
extern int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);

typedef void (*AnyFn)(void);
AnyFn volatile gReferences[] = {
    ncclDevCommCreate,  ncclDevCommDestroy, ncclGinBarrierCreateRequirement, ncclLLA2ACreateRequirement,
    ncclLsaBarrierCreateRequirement, ncclResetDebugInitInternal, ncclTeamLsa, ncclTeamRail,
    ncclTeamRankToLsa,  ncclTeamRankToWorld, ncclTeamWorld,
};

int main(void) {
  int failures = 0;
  if (dlsym(RTLD_DEFAULT, "ncclLamportIsActive") == NULL) {
    fprintf(stderr, "FAIL: libnccl.so.2 is not libnccl-lamport.so here (run under LD_AUDIT)\n");
    return 1;
  }
  const int ours = ncclLLA2ACalcSlots(1000, 16);
  /* The real NCCL our object loaded, under the name only the audit module maps back to it. */
  void* real = dlopen(NCCL_LAMPORT_REAL_NCCL_PREFIX "libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  int (*realCalc)(int, int) = real != NULL ? (int (*)(int, int))dlsym(real, "ncclLLA2ACalcSlots") : NULL;
  if (realCalc == NULL || dlsym(real, "ncclLamportIsActive") != NULL) {
    fprintf(stderr, "FAIL: no real libnccl.so.2 loaded behind libnccl-lamport.so\n");
    ++failures;
  } else if (realCalc(1000, 16) != ours) {
    fprintf(stderr, "FAIL: ncclLLA2ACalcSlots(1000, 16): %d through our object, %d from NCCL\n", ours,
            realCalc(1000, 16));
    ++failures;
  } else {
    printf("ncclLLA2ACalcSlots(1000, 16) = %d through libnccl-lamport.so\n", ours);
  }
  if (failures != 0) return 1;
  printf("linked_nccl: PASS\n");
  return 0;
}
