// Tear-down of communicators (docs/design.md, "Communicator lifecycle"): abort requests,
// finalize, hand-over to NCCL, and the release of a workspace once no kernel of ours can still
// use it. Defined in comm_teardown.cc.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>

namespace nccl_lamport {

struct LamportComm;

/** Milliseconds an abort waits for our own parts of a communicator (its kernels, its set-up
 *  thread): ncclCommAbort must return promptly, and our kernels stop within microseconds of the
 *  abort flag. */
constexpr uint64_t kAbortWaitMs = 2000;

/** Milliseconds a destroy, or a call waiting for a set-up, allows beyond NCCL_LAMPORT_TIMEOUT_MS
 *  (the longest a kernel or a set-up round waits for its peers): the local steps after it take
 *  milliseconds. */
constexpr uint64_t kTimeoutSlackMs = 1000;

/** How long a tear-down waits for our work on the communicator: kAbortWaitMs when aborting, else
 *  NCCL_LAMPORT_TIMEOUT_MS + kTimeoutSlackMs (at most 30 days: no overflow). */
uint64_t teardownWaitMs(bool aborting);

/** Frees lc's workspace, peer mappings, host flags and event. Only once no kernel of ours can
 *  still use them. */
void releaseResources(LamportComm& lc);

/** Asks any Lamport kernel of comm that is waiting for peers to stop (ncclCommAbort). */
void requestAbort(ncclComm_t comm);

/** Marks comm finalized (ncclCommFinalize): its later calls all go to NCCL. */
void markFinalized(ncclComm_t comm);

/** ncclCommRevoke, ncclCommShrink with NCCL_SHRINK_ABORT: stops our waiting kernels, sends every
 *  later call to NCCL, and leaves the error state to NCCL (an interrupted kernel is not an error). */
void handOverToNccl(ncclComm_t comm);

/** Forgets comm; once its device is idle (bounded wait: teardownWaitMs), unmaps and frees its workspace, else keeps it mapped (WARN). Safe for unknown
 *  communicators. */
void releaseComm(ncclComm_t comm, bool aborting);

/** releaseComm for an entry already out of the registry (or never to be looked up by handle
 *  again: ncclCommAbort / ncclCommDestroy after NCCL freed it); null is a no-op. */
void releaseCommEntry(std::shared_ptr<LamportComm> lc, bool aborting);

}  // namespace nccl_lamport
