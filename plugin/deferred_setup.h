// Workspace set-up of non-blocking communicators (config.blocking = 0), SPEC 4.3.
//
// NCCL asks programs to poll ncclCommGetAsyncError until a non-blocking communicator reports
// ncclSuccess before they use it. We keep that window open a little longer: a helper thread
// waits until NCCL reports every communicator of the batch ready (a batch is what one init,
// split or outermost group created on one thread), runs the ordinary set-up exchange on them,
// and only then lets our ncclCommGetAsyncError report ncclSuccess. The exchange is therefore
// the first operation on the communicator on every rank, and the user's thread never blocks on
// peers. Until then every call on the communicator goes to NCCL.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <vector>

namespace nccl_lamport {

/** Registers every comm of `comms` (created together, non-blocking) as pending and starts its
 *  set-up on a helper thread. Never blocks on peers; never throws. */
void startDeferredSetup(const std::vector<ncclComm_t>& comms);

/** True while comm's deferred set-up has not finished (our ncclCommGetAsyncError then reports
 *  ncclInProgress). Cheap; false for communicators that never had one. */
bool deferredSetupPending(ncclComm_t comm);

/**
 * For a call on comm made before our ncclCommGetAsyncError reported it ready. If NCCL itself
 * has not reported it ready yet, returns false at once: the caller answers ncclInvalidArgument,
 * as NCCL does for a communicator still in progress (and must not call NCCL on it meanwhile).
 * Otherwise blocks until our set-up has finished (NCCL would have taken the call) and returns
 * true. Returns true at once when comm has no deferred set-up.
 */
bool waitForDeferredSetup(ncclComm_t comm);

/** The ncclInvalidArgument answer for a call on a communicator that is still in progress, with
 *  NCCL's own warning. */
ncclResult_t rejectNotReady(ncclComm_t comm, const char* function);

/**
 * Stops comm's deferred set-up (ncclCommDestroy / ncclCommAbort / ncclCommRevoke): once this
 * returns, the helper never calls NCCL on any communicator of that batch again and registers
 * none of them. Call before the real NCCL function.
 */
void cancelDeferredSetup(ncclComm_t comm);

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

/** True when returnAddress lies in the real NCCL library: NCCL calls its own
 *  ncclCommGetAsyncError internally (ncclCommEnsureReady) and, since it is not linked
 *  -Bsymbolic, through our exported wrapper. Those calls must get NCCL's own answer. */
bool calledFromNccl(const void* returnAddress);

/** Drops parent's watched children (ncclCommDestroy / ncclCommAbort of the parent). */
void forgetPendingChildren(ncclComm_t parent);

/** Waits up to timeoutMs for comm's cancelled set-up to end (its buffers freed); false if it is
 *  still running (it then ends on its own). Call after the real abort/destroy. */
bool joinDeferredSetup(ncclComm_t comm, uint64_t timeoutMs);

}  // namespace nccl_lamport
