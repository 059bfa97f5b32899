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

/** Blocks until comm's deferred set-up has finished (a program that uses a non-blocking
 *  communicator without polling it first). Returns at once when there is none. */
void waitForDeferredSetup(ncclComm_t comm);

/**
 * Stops comm's deferred set-up (ncclCommDestroy / ncclCommAbort / ncclCommRevoke): once this
 * returns, the helper never calls NCCL on any communicator of that batch again and registers
 * none of them. Call before the real NCCL function.
 */
void cancelDeferredSetup(ncclComm_t comm);

/** Waits up to timeoutMs for comm's cancelled set-up to end (its buffers freed); false if it is
 *  still running (it then ends on its own). Call after the real abort/destroy. */
bool joinDeferredSetup(ncclComm_t comm, uint64_t timeoutMs);

}  // namespace nccl_lamport
