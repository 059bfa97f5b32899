// Workspace set-up of non-blocking communicators (config.blocking = 0): docs/design.md,
// "Non-blocking communicators".
//
// NCCL asks programs to poll ncclCommGetAsyncError until a non-blocking communicator reports
// ncclSuccess before they use it. We keep that window open a little longer: a helper thread
// waits until NCCL reports every communicator of the batch ready (a batch is what one init,
// split or outermost group created on one thread), runs the ordinary set-up exchange on them,
// and only then lets our ncclCommGetAsyncError report ncclSuccess. The exchange is therefore
// the first operation on the communicator on every rank, and the user's thread never blocks on
// peers. Until then every call on the communicator goes to NCCL. The children of a non-blocking
// split are found when NCCL writes them (plugin/comm/pending_children.h); the set-up's bounded
// waits are plugin/comm/setup_control.h's.
#pragma once

#include <nccl.h>

#include <absl/functional/function_ref.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace nccl_lamport {

/** Registers every comm of `comms` (created together, non-blocking) as pending and starts its
 *  set-up on a helper thread. Never blocks on peers. Throws only for want of host memory, and
 *  then leaves nothing registered; a helper thread that cannot start leaves the batch on NCCL,
 *  with a WARN. */
void startDeferredSetup(const std::vector<ncclComm_t>& comms);

/** What waitForDeferredSetup did with a call on a communicator. */
enum class PendingCall {
  kProceed,   // no set-up pending any more: route the call as usual
  kAnswered,  // the call is answered: return *result
};

/**
 * For a call on comm made while its deferred set-up may still be pending (our
 * ncclCommGetAsyncError has not reported it ready). Returns kProceed at once when comm has no
 * deferred set-up.
 *  - NCCL itself still has comm in progress: runs `callNccl` (the real NCCL function) serialised
 *    with the set-up thread, so the program gets NCCL's own answer (ncclInvalidArgument for a
 *    communicator in progress, with the group and async errors NCCL records), and returns
 *    kAnswered. `destroysComm`: callNccl frees comm if it succeeds (ncclCommDestroy); the set-up
 *    is then cancelled before the set-up thread can touch comm again.
 *  - NCCL reports it ready: waits until our set-up has finished (its round 1 is bounded by
 *    NCCL_LAMPORT_TIMEOUT_MS, its round 2 only by an abort: plugin/comm/setup_control.h,
 *    ExchangeRound) and returns kProceed, so that every
 *    rank routes the call the same way; except when another thread aborted comm meanwhile:
 *    *result = ncclInvalidArgument, kAnswered, and NCCL is not called on it. The wait lasts at
 *    most NCCL_LAMPORT_TIMEOUT_MS + 1 s: a set-up still running then (a peer gone during its
 *    round 2) answers the call ncclInvalidArgument, as NCCL answers a communicator in progress,
 *    with a WARN (kAnswered, NCCL not called); the program is to abort the communicator.
 */
PendingCall waitForDeferredSetup(ncclComm_t comm, absl::FunctionRef<ncclResult_t()> callNccl, ncclResult_t* result,
                                 bool destroysComm = false);

/** Why a deferred set-up is stopped. */
enum class CancelReason {
  kCommGoingAway,  // ncclCommAbort: comm is freed next; calls waiting on it must not reach NCCL
  kHandedToNccl,   // ncclCommRevoke, ncclCommShrink with NCCL_SHRINK_ABORT: comm lives on, on NCCL
};

/**
 * Stops comm's deferred set-up: once this returns, the helper never calls NCCL on comm again,
 * stops waiting for it and registers nothing of its own for it (kHandedToNccl: an OFF entry, and
 * comm is no longer "in progress" for us). The batch's other communicators finish both exchange
 * rounds with their peers, whose grouped exchange includes them. Call before the real NCCL
 * function.
 */
void cancelDeferredSetup(ncclComm_t comm, CancelReason why);

/** Waits up to timeoutMs until comm's set-up has ended, or let go of comm once it was stopped
 *  (no NCCL call on it again; what it allocated for comm goes when the set-up ends, with the
 *  batch's other communicators), and forgets it; false if it still uses comm (it then ends on
 *  its own). */
bool joinDeferredSetup(ncclComm_t comm, uint64_t timeoutMs);

/** A communicator's set-up, held by object rather than by handle (null when it had none). For
 *  ncclCommAbort / ncclCommDestroy: NCCL frees the handle, and another thread may get the same
 *  address for a new communicator at once, so nothing of ours is looked up by it afterwards. */
struct DeferredBatch;
using DetachedSetup = std::shared_ptr<DeferredBatch>;

/** comm's set-up, left reachable by the handle (calls during NCCL's abort still find it gone). */
DetachedSetup findDeferredSetup(ncclComm_t comm);

/** Forgets comm's set-up only if it is still `setup`: once NCCL has freed the handle, a
 *  communicator created at the same address may have replaced it. */
void forgetDeferredSetupIfSame(ncclComm_t comm, const DetachedSetup& setup);

/** joinDeferredSetup for a set-up held by object: waits up to timeoutMs; true if it ended or let
 *  go of comm (or there was none). */
bool joinDetachedSetup(const DetachedSetup& setup, ncclComm_t comm, uint64_t timeoutMs);

}  // namespace nccl_lamport
