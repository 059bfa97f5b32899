/* What the stand-in NCCL of tests/unit/dispatch_stand_in_nccl.c counts. */
#ifndef NCCL_LAMPORT_DISPATCH_STAND_IN_NCCL_H_
#define NCCL_LAMPORT_DISPATCH_STAND_IN_NCCL_H_

#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

int standInAllReduceCalls(void);      /* ncclAllReduce calls that reached NCCL */
int standInGroupDepth(void);          /* NCCL's group depth */
int standInGroupEnds(void);           /* outermost ncclGroupEnd calls */
int standInSimulatedGroupEnds(void);  /* outermost ncclGroupSimulateEnd calls */
int standInRevokesTaken(void);        /* ncclCommRevoke calls NCCL accepted */
/* What ncclCommGetAsyncError reports from now on (ncclInProgress: a non-blocking comm busy). */
void standInSetAsyncState(ncclResult_t state);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_LAMPORT_DISPATCH_STAND_IN_NCCL_H_ */
