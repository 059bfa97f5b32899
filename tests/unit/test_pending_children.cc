// plugin/comm/pending_children: under tuner activation (OnChildWritten::kNoteOnly) a non-blocking
// split child was set up inside the tuner's init, so once NCCL writes its handle only its CTA cap
// note moves there (for the binding at its first call), and no deferred set-up starts; and an
// entry whose handle NCCL is freeing is never handed to a call. No NCCL is called: the handles
// are plain addresses.
#include <gtest/gtest.h>
#include <nccl.h>

#include <memory>

#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cta_cap.h"
#include "plugin/comm/pending_children.h"

namespace {

using nccl_lamport::CommRegistry;
using nccl_lamport::OnChildWritten;

ncclComm_t fakeHandle(uintptr_t address) { return reinterpret_cast<ncclComm_t>(address); }

TEST(PendingChildren, ANoteOnlyChildGetsItsCapAtTheParentsPollAndNoSetUp) {
  static ncclComm_t slot = nullptr;  // where NCCL writes the child
  const ncclComm_t parent = fakeHandle(0x7100), child = fakeHandle(0x7200);
  nccl_lamport::noteCtaCap(&slot, 6);
  nccl_lamport::watchPendingChild(parent, &slot, /*inOpenGroup=*/false, OnChildWritten::kNoteOnly);
  nccl_lamport::collectPendingChildren(parent, /*parentDone=*/false, nccl_lamport::pendingChildrenEpoch());
  EXPECT_EQ(nccl_lamport::peekCtaCap(&slot), 6) << "the note left its slot before NCCL wrote the child";
  __atomic_store_n(&slot, child, __ATOMIC_RELEASE);
  nccl_lamport::collectPendingChildren(parent, /*parentDone=*/true, nccl_lamport::pendingChildrenEpoch());
  EXPECT_EQ(nccl_lamport::peekCtaCap(&slot), 0);
  EXPECT_EQ(nccl_lamport::takeCtaCap(child), 6) << "the child's handle has no cap note for its binding";
  EXPECT_EQ(CommRegistry::instance().find(child), nullptr) << "a deferred set-up started for a tuner-mode child";
  EXPECT_FALSE(nccl_lamport::adoptPendingChild(child)) << "the child is still watched after its collection";
}

TEST(PendingChildren, ANoteOnlyChildUsedBeforeItsParentsPollIsAdopted) {
  static ncclComm_t slot = nullptr;
  const ncclComm_t parent = fakeHandle(0x7300), child = fakeHandle(0x7400);
  nccl_lamport::noteCtaCap(&slot, 3);
  nccl_lamport::watchPendingChild(parent, &slot, /*inOpenGroup=*/false, OnChildWritten::kNoteOnly);
  __atomic_store_n(&slot, child, __ATOMIC_RELEASE);
  EXPECT_EQ(nccl_lamport::findOrAdoptChild(child), nullptr) << "a tuner-mode child got an entry of its own";
  EXPECT_EQ(nccl_lamport::takeCtaCap(child), 3) << "its first call came before the parent's poll: no cap note";
  EXPECT_FALSE(nccl_lamport::adoptPendingChild(child));
}

TEST(PendingChildren, ANoteOnlySlotLeftNullIsDroppedWithItsNoteOnceTheParentIsDone) {
  static ncclComm_t slot = nullptr;  // NCCL_SPLIT_NOCOLOR: NCCL never writes it
  const ncclComm_t parent = fakeHandle(0x7500);
  nccl_lamport::noteCtaCap(&slot, 5);
  nccl_lamport::watchPendingChild(parent, &slot, /*inOpenGroup=*/false, OnChildWritten::kNoteOnly);
  nccl_lamport::collectPendingChildren(parent, /*parentDone=*/true, nccl_lamport::pendingChildrenEpoch());
  EXPECT_EQ(nccl_lamport::peekCtaCap(&slot), 0) << "the note of a child that never came outlived its parent's job";
}

// While another thread's ncclCommAbort / ncclCommDestroy is inside NCCL, the entry still under
// the handle is a leftover: a call on that address (a newcomer's under tuner activation, bound at
// its first call) must not get it, or it would launch on the aborted communicator's workspace.
TEST(PendingChildren, AnEntryWhoseHandleIsBeingFreedIsNotHandedToACall) {
  const ncclComm_t comm = fakeHandle(0x7600);
  auto entry = std::make_shared<nccl_lamport::LamportComm>();
  entry->comm = comm;
  CommRegistry::instance().insert(entry);
  EXPECT_EQ(nccl_lamport::findOrAdoptChild(comm), entry);
  entry->handleFreeing.store(true);
  EXPECT_EQ(nccl_lamport::findOrAdoptChild(comm), nullptr) << "a call got the entry of a communicator being freed";
  CommRegistry::instance().removeIfSame(comm, entry);
}

}  // namespace
