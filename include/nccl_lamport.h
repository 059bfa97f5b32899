/*
 * nccl-lamport public extension API.
 *
 * These entry points are exported by libnccl-lamport.so next to the interposed NCCL API. They let
 * tools (nccl-lamport-bench, the tests) ask which path a call takes and what a communicator was
 * given. They never launch work, never change a communicator's path, and are safe on any thread.
 * The first call of any of them in a process may load the real NCCL (dlopen of libnccl.so.2, or
 * NCCL_LAMPORT_NCCL_PATH) if none is loaded yet, as the first NCCL call through the plugin would.
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
  int known;                 /**< 1 if nccl-lamport set up state for it: created through a wrapped
                                  entry point, or, under tuner activation, set up in the tuner's
                                  init (the first communicator included) */
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
 * The path an ncclAllReduce(comm, count, datatype, op) call would be routed to now, from the
 * communicator's state and the routing table (count in elements). The answer depends only on
 * values that are identical on every rank (docs/design.md, "Routing"). It does not see the call's buffers or
 * stream: the call itself still goes to NCCL, even where this says one-shot or two-shot, when a
 * buffer is NULL, NCCL reports the communicator failed or busy, or NCCL's pointer checks
 * (NCCL_CHECK_POINTERS) would refuse a buffer.
 * Returns ncclInvalidArgument if path is NULL; ncclSystemError / ncclInternalError if nccl-lamport
 * failed internally (WARN logged); ncclSuccess otherwise (an unknown comm: NCCL path).
 */
ncclResult_t ncclLamportGetAllReducePath(ncclComm_t comm, size_t count, ncclDataType_t datatype,
                                         ncclRedOp_t op, ncclLamportPath_t* path);

/**
 * Fills *info for comm. Returns ncclInvalidArgument if info is NULL; ncclSystemError /
 * ncclInternalError if nccl-lamport failed internally (WARN logged); else ncclSuccess. For a
 * communicator nccl-lamport never saw, info->known is 0 and the rest is zero.
 */
ncclResult_t ncclLamportGetCommInfo(ncclComm_t comm, ncclLamportCommInfo_t* info);

/** 1 if nccl-lamport's wrappers are in NCCL's call path in this process and switched on; else 0.
 *  In the path: preloaded or linked (or loaded as libnccl), or, under NCCL_TUNER_PLUGIN alone,
 *  tuner activation's hooks installed (NCCL 2.28+); a process that loaded the object only as NCCL's
 *  tuner, without hooks, gets 0. Switched on: NCCL_LAMPORT_ENABLE unset or one of its "on"
 *  spellings (any other value is off; README, knob table), and an NCCL with its profiling aliases
 *  (>= 2.16.2) found behind the wrappers. */
int ncclLamportIsActive(void);

#ifdef __cplusplus
}
#endif

#endif  // NCCL_LAMPORT_H_
