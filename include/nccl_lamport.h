/*
 * nccl-lamport public extension API.
 *
 * These entry points are exported by libnccl-lamport.so next to the interposed NCCL API. They let
 * tools (nccl-lamport-bench, the tests) ask which path a call takes and what a communicator was
 * given, without changing anything. They never launch work and are safe on any thread.
 */
#ifndef NCCL_LAMPORT_H_
#define NCCL_LAMPORT_H_

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Which implementation an allreduce call runs on. */
typedef enum {
  ncclLamportPathNccl = 0,    /**< passed through to the real NCCL */
  ncclLamportPathOneShot = 1, /**< Lamport one-shot kernel of nccl-lamport */
  ncclLamportPathTwoShot = 2, /**< Lamport two-shot kernel of nccl-lamport (4 or more ranks) */
} ncclLamportPath_t;

/** Per-communicator state as nccl-lamport sees it. */
typedef struct {
  int known;                 /**< 1 if the communicator was created through a wrapped entry point */
  int eligible;              /**< 1 if every rank agreed and the workspace is mapped */
  int nRanks;                /**< ranks in the communicator */
  int rank;                  /**< this rank */
  size_t workspaceBytes;     /**< device memory of this rank's Lamport workspace, bytes */
  size_t oneShotMaxBytes;    /**< largest message (bytes) routed to the one-shot kernel */
  uint64_t lamportCalls;     /**< allreduce calls run on the Lamport kernel so far */
  uint64_t ncclCalls;        /**< allreduce calls passed to NCCL so far */
  char reason[128];          /**< why the communicator is (not) eligible, NUL-terminated */
} ncclLamportCommInfo_t;

/**
 * The path ncclAllReduce(comm, count, datatype, op) would take now. The answer depends only on
 * values that are identical on every rank (SPEC 4.6).
 * Returns ncclInvalidArgument if path is NULL; ncclSuccess otherwise (an unknown comm: NCCL path).
 */
ncclResult_t ncclLamportGetAllReducePath(ncclComm_t comm, size_t count, ncclDataType_t datatype,
                                         ncclRedOp_t op, ncclLamportPath_t* path);

/**
 * Fills *info for comm. Returns ncclInvalidArgument if info is NULL; for a communicator nccl-lamport
 * never saw, info->known is 0 and the rest is zero.
 */
ncclResult_t ncclLamportGetCommInfo(ncclComm_t comm, ncclLamportCommInfo_t* info);

/** 1 if the interposer is active in this process: preloaded or linked, NCCL_LAMPORT_ENABLE!=0, and
 *  an NCCL with its profiling aliases (>= 2.16.2) found behind it; else 0. */
int ncclLamportIsActive(void);

#ifdef __cplusplus
}
#endif

#endif  // NCCL_LAMPORT_H_
