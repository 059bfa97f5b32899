// Children of non-blocking ncclCommSplit / ncclCommShrink whose handles NCCL writes only when its
// job on the parent ends (NCCL 2.28): where they will appear, and their set-up once they do
// (plugin/comm/deferred_setup.h). docs/design.md, "Non-blocking communicators".
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace nccl_lamport {

struct LamportComm;

/** What a watched child gets once NCCL has written its handle. */
enum class OnChildWritten {
  kSetUp,     // the deferred set-up (plugin/comm/deferred_setup.h), after its CTA cap note moves
  kNoteOnly,  // tuner activation (set up inside the tuner's init): only the CTA cap note under
              // its slot moves to the handle, for the binding at its first call
};

/**
 * A non-blocking ncclCommSplit/ncclCommShrink of parent returned ncclInProgress with *newcomm
 * still null: NCCL writes the child's handle when its job on the parent ends. Remembers where.
 * The caller must keep *newcomm alive until NCCL reports the parent ready, which NCCL requires
 * anyway (the handle is only readable then).
 * inOpenGroup: the split was made inside ncclGroupStart/End, where NCCL leaves the parent ready
 * until the group ends: no poll may take the parent for done before stampGroupedChildren.
 */
void watchPendingChild(ncclComm_t parent, ncclComm_t* newcomm, bool inOpenGroup,
                       OnChildWritten onWritten = OnChildWritten::kSetUp);

/** At the outermost ncclGroupEnd of the thread that watched them in its open group: from now on
 *  a poll that finds their parent done may drop those of `slots` still null. */
void stampGroupedChildren(const std::vector<ncclComm_t*>& slots);

/** A counter that grows with every watchPendingChild: read it before asking NCCL about a parent
 *  and pass it to collectPendingChildren. */
uint64_t pendingChildrenEpoch();

/** After ncclCommGetAsyncError(parent): starts the deferred set-up (or, kNoteOnly, moves the
 *  CTA cap note) of every watched child NCCL has written by now (one whose set-up cannot start,
 *  for want of host memory, stays watched for the next poll, with a WARN); once parentDone (NCCL
 *  no longer reported the parent in progress), forgets the rest that were watched before the
 *  poll (epochBeforePoll: pendingChildrenEpoch() read before asking NCCL): the split failed, or
 *  NCCL_SPLIT_NOCOLOR. A split watched since, by another thread while this one was between its
 *  poll and this call, is kept. */
void collectPendingChildren(ncclComm_t parent, bool parentDone, uint64_t epochBeforePoll);

/** comm is unknown to the registry (or its entry is a leftover: LamportComm::handleFreeing): if
 *  it is a watched child that NCCL has written (the program read it before polling the parent
 *  again), starts its deferred set-up and returns true. A
 *  child another thread is collecting meanwhile is registered by the time this returns (false):
 *  look comm up again after the call either way (findOrAdoptChild does both). */
bool adoptPendingChild(ncclComm_t comm);

/** comm's registry entry; for a comm unknown to the registry that is a watched child NCCL has
 *  written (or one another thread is collecting), its set-up is started first. An entry whose
 *  handle NCCL is freeing (LamportComm::handleFreeing) counts as none: a call on that address
 *  then belongs to a newcomer (or, a program's error, to the communicator being torn down) and
 *  goes to NCCL or to its own set-up. Null for null or for a comm that is neither. Never throws
 *  (wrappers call it before NCCL: a failure of ours must not keep the call from NCCL). */
std::shared_ptr<LamportComm> findOrAdoptChild(ncclComm_t comm) noexcept;

/** Where NCCL will write one child's handle, and when it began to be watched. */
struct WatchedChild {
  ncclComm_t* slot;
  uint64_t epoch;  // pendingChildrenEpoch() right after it was added (or stamped); see the .cc
  OnChildWritten onWritten;
};

/** What a communicator's tear-down took out of the watch (detachPendingChildren). */
struct DetachedChildren {
  std::vector<WatchedChild> children;  // watched under comm as their parent, not yet set up
  bool watchedAsChild = false;         // comm itself was a watched child nothing had collected
  ncclComm_t parentOfComm = nullptr;   // ... of this parent (a communicator has one slot)
  WatchedChild watchAsChild{};
};

/**
 * Right before NCCL may free comm's handle (ncclCommDestroy, ncclCommAbort), so that nothing is
 * looked up by that address once another communicator may have it: starts the set-up of every
 * child of comm NCCL has written (as a poll would: another thread may use it meanwhile), takes
 * out the rest of comm's watched children, and takes out comm itself where it is a watched child
 * nothing has collected. Allocates nothing; on any failure it leaves the watch as it is.
 */
DetachedChildren detachPendingChildren(ncclComm_t comm) noexcept;

/** NCCL refused the tear-down (comm lives on): puts back what detachPendingChildren took out. */
void reattachPendingChildren(ncclComm_t comm, DetachedChildren detached) noexcept;

/** After NCCL freed comm: a child NCCL has written since gets its set-up now (or, where it
 *  cannot start, stays watched for its own first call); a slot still null, and comm's own watch as
 *  a child, go with their CTA cap notes. */
void settleDetachedChildren(DetachedChildren detached) noexcept;

}  // namespace nccl_lamport
