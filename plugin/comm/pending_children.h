// Children of non-blocking ncclCommSplit / ncclCommShrink whose handles NCCL writes only when its
// job on the parent ends (NCCL 2.28): where they will appear, and their set-up once they do
// (plugin/comm/deferred_setup.h). docs/design.md, "Non-blocking communicators".
#pragma once

#include <nccl.h>

namespace nccl_lamport {

/**
 * A non-blocking ncclCommSplit/ncclCommShrink of parent returned ncclInProgress with *newcomm
 * still null: NCCL writes the child's handle when its job on the parent ends. Remembers where.
 * The caller must keep *newcomm alive until NCCL reports the parent ready, which NCCL requires
 * anyway (the handle is only readable then).
 */
void watchPendingChild(ncclComm_t parent, ncclComm_t* newcomm);

/** After ncclCommGetAsyncError(parent): starts the deferred set-up of every watched child NCCL
 *  has written by now; once parentDone (NCCL no longer reports the parent in progress), forgets
 *  the rest (the split failed, or NCCL_SPLIT_NOCOLOR). */
void collectPendingChildren(ncclComm_t parent, bool parentDone);

/** comm is unknown to the registry: if it is a watched child that NCCL has written (the program
 *  read it before polling the parent again), starts its deferred set-up and returns true. */
bool adoptPendingChild(ncclComm_t comm);

/** Drops comm's watched children, and comm itself where it is a watched child nothing has
 *  collected yet (ncclCommDestroy / ncclCommAbort of comm, before NCCL frees the handle). */
void forgetPendingChildren(ncclComm_t comm);

}  // namespace nccl_lamport
