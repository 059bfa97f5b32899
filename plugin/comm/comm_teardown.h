// Tear-down of communicators (docs/design.md, "Communicator lifecycle"): abort requests,
// finalize, hand-over to NCCL, and the release of a workspace once no kernel of ours can still
// use it. Defined in comm_teardown.cc.
#pragma once

#include <nccl.h>

#include <memory>

namespace nccl_lamport {

struct LamportComm;

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

/** Forgets comm; once its device is idle (bounded wait: 2 s when aborting, the kernel timeout
 *  otherwise), unmaps and frees its workspace, else keeps it mapped (WARN). Safe for unknown
 *  communicators. */
void releaseComm(ncclComm_t comm, bool aborting);

/** releaseComm for an entry already out of the registry (or never to be looked up by handle
 *  again: ncclCommAbort / ncclCommDestroy after NCCL freed it); null is a no-op. */
void releaseCommEntry(std::shared_ptr<LamportComm> lc, bool aborting);

}  // namespace nccl_lamport
