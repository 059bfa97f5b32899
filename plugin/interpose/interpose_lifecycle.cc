// Wrappers of NCCL's communicator lifecycle and group calls (docs/design.md,
// "Communicator lifecycle", "Non-blocking communicators" and "Groups").
//
// Every wrapper calls the real function first and then records what it needs; a failure of ours
// never changes what NCCL returned. Workspace set-up runs only at safe points: after an ungrouped
// blocking init/split, or in the outermost ncclGroupEnd for the communicators created inside
// that group (all of them in one grouped exchange, so one thread can drive several GPUs), or,
// for non-blocking communicators, on a helper thread once NCCL reports them ready
// (plugin/comm/deferred_setup.h).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "plugin/abi/entry_guard.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/cta_cap.h"
#include "plugin/comm/comm_teardown.h"
#include "common/config.h"
#include "plugin/comm/deferred_setup.h"
#include "plugin/comm/nccl_settings.h"
#include "plugin/comm/pending_children.h"
#include "plugin/abi/export.h"
#include "plugin/hooks/tuner_activation.h"
#include "plugin/interpose/interpose_state.h"
#include "common/log.h"
#include "common/log_file.h"
#include "plugin/loader/real_nccl.h"
#include "plugin/comm/workspace_setup.h"
#include "tuner/load_mode.h"

namespace nccl_lamport {

namespace {

thread_local int tGroupDepth = 0;
thread_local std::vector<ncclComm_t> tCommsCreatedInGroup;
thread_local std::vector<ncclComm_t> tNonBlockingCreatedInGroup;
/** Where blocking splits and shrinks made inside the open group will find their child: NCCL
 *  writes it only when the split's job ends, at the outermost ncclGroupEnd (src/init.cc,
 *  ncclCommInitChildComm sets *newcomm to NULL at the call). The caller keeps the slot alive until
 *  then, as NCCL requires. */
thread_local std::vector<ncclComm_t*> tChildSlotsInGroup;
/** Slots of non-blocking splits watched in this thread's open group (plugin/comm/pending_children.h,
 *  stampGroupedChildren at its outermost ncclGroupEnd). */
thread_local std::vector<ncclComm_t*> tWatchedSlotsInGroup;

/**
 * Whether NCCL makes a new communicator blocking, by NCCL's own rule (2.28, src/init.cc
 * parseCommConfig / copyCommConfig / envConfigOverride): NCCL_COMM_BLOCKING=0 or 1 overrides
 * every config; otherwise config.blocking, where undefined (or a config older than 2.14, which
 * has no such field) blocking. `whenNoConfig`: the answer for config == nullptr (true for an
 * init; a split or shrink without a config copies its parent's).
 */
bool isBlocking(const ncclConfig_t* config, bool whenNoConfig) {
  const int forced = ncclCommBlockingOverride(getenv("NCCL_COMM_BLOCKING"));
  if (forced >= 0) return forced == 1;
  if (config == nullptr) return whenNoConfig;
  if (config->version < NCCL_VERSION(2, 14, 0) || config->blocking == NCCL_CONFIG_UNDEF_INT) return true;
  return config->blocking != 0;
}

/** The calling thread's CUDA device for our log lines' "[dev]" field (-1 if CUDA cannot say). */
int currentCudaDevice() {
  int device = -1;
  return cudaGetDevice(&device) == cudaSuccess ? device : -1;
}

/** What every init/split wrapper does once NCCL returned the communicators it created together
 *  (one, or ncclCommInitAll's): set them up now, later, or never. ctaCap: the blocks per launch
 *  their config (or parent) allows (plugin/comm/cta_cap.h; 0: none). */
void onCommsCreated(ncclResult_t result, const std::vector<ncclComm_t>& comms, bool blocking, int ctaCap) noexcept try {
  // NCCL has logged (and so opened NCCL_DEBUG_FILE) by now: our lines waiting for it go there.
  logFileCheckpoint();
  if (comms.empty() || (result != ncclSuccess && result != ncclInProgress)) return;
  for (ncclComm_t comm : comms) {
    if (comm == nullptr) return;
  }
  // NCCL's answer wins over our reading of the mode: NCCL keeps its first reading of
  // NCCL_COMM_BLOCKING and may take it from its environment plugin. A set-up run inside init on a
  // communicator still in progress would have its exchange refused or wait on peers. Only
  // ncclInProgress tells: NCCL 2.28 answers ncclSuccess for a non-blocking split or shrink (its
  // group end's ncclInProgress is swallowed) and for a non-blocking init whose job already ended.
  if (result == ncclInProgress) blocking = false;
  // From the first communicator on, NCCL has initialised CUDA: our log lines may ask for the
  // device (before, they never touch CUDA and print [-1]).
  setLogDeviceQuery(currentCudaDevice);
  // Taken by the set-up, or under tuner activation by the binding at the first call.
  for (ncclComm_t comm : comms) noteCtaCap(comm, ctaCap);
  // Tuner activation: these set-up points are not the same on every rank in that mode (a rank's
  // first communicator was created before its hooks); the comm is bound at its first call.
  if (tunerHooksInstalled()) return;
  if (!blocking) {
    if (tGroupDepth > 0) {
      tNonBlockingCreatedInGroup.insert(tNonBlockingCreatedInGroup.end(), comms.begin(), comms.end());
    } else {
      startDeferredSetup(comms);
    }
    return;
  }
  if (tGroupDepth > 0) {
    tCommsCreatedInGroup.insert(tCommsCreatedInGroup.end(), comms.begin(), comms.end());
    return;
  }
  setupWorkspaces(comms);
} catch (...) {
  resultOfException("workspace set-up after init");  // the communicators stay on NCCL
}

/** onCommsCreated for the n communicators NCCL wrote at comms (ncclCommInitAll's; one for an
 *  init, split or shrink). */
void onCommArrayCreated(ncclResult_t result, const ncclComm_t* comms, int n, bool blocking, int ctaCap) noexcept {
  try {
    onCommsCreated(result, std::vector<ncclComm_t>(comms, comms + n), blocking, ctaCap);
  } catch (...) {  // the vector's allocation
    resultOfException("workspace set-up after init");
  }
}

/** onCommsCreated for the one communicator of an init, split or shrink. */
void onCommCreated(ncclResult_t result, ncclComm_t comm, bool blocking, int ctaCap) noexcept {
  onCommArrayCreated(result, &comm, 1, blocking, ctaCap);
}

/** Split and shrink: a non-blocking child's handle appears only once NCCL's job on the parent
 *  ends (NCCL 2.28), so it is picked up later (plugin/comm/pending_children.h, watchPendingChild);
 *  its CTA cap waits under its slot until then. config: the split's, or null (the parent's cap,
 *  as NCCL copies the parent's config). */
void onChildCreated(ncclResult_t result, ncclComm_t parent, ncclComm_t* newcomm, bool blocking,
                    const ncclConfig_t* config) noexcept try {
  if (newcomm == nullptr) return;
  int ctaCap = ctaCapFromConfig(config);
  if (config == nullptr) {
    const std::shared_ptr<LamportComm> lc = CommRegistry::instance().find(parent);
    ctaCap = lc != nullptr ? lc->maxCtas : peekCtaCap(parent);  // the latter: set-up not run yet
  }
  // NCCL 2.28 returns ncclSuccess or ncclInProgress here and writes the child later, from its own
  // thread: read it atomically (ThreadSanitizer saw the plain read race with that write).
  const ncclComm_t child = __atomic_load_n(newcomm, __ATOMIC_ACQUIRE);
  if (result == ncclInProgress) blocking = false;  // NCCL's answer wins, as in onCommsCreated
  // Tuner activation: the child was set up inside the tuner's init. Only its cap is noted, for
  // the binding at its first call: under the handle, or under the slot until NCCL writes it.
  const bool tunerActivation = tunerHooksInstalled();
  if (tunerActivation && child != nullptr) {
    if (result == ncclSuccess || result == ncclInProgress) noteCtaCap(child, ctaCap);
    return;
  }
  if (!blocking && (result == ncclSuccess || result == ncclInProgress) && child == nullptr) {
    noteCtaCap(newcomm, ctaCap);
    // Room first: a watch left "in an open group" for ever would read the slot at every poll.
    if (tGroupDepth > 0) tWatchedSlotsInGroup.reserve(tWatchedSlotsInGroup.size() + 1);
    watchPendingChild(parent, newcomm, /*inOpenGroup=*/tGroupDepth > 0,
                      tunerActivation ? OnChildWritten::kNoteOnly : OnChildWritten::kSetUp);
    if (tGroupDepth > 0) tWatchedSlotsInGroup.push_back(newcomm);
    return;
  }
  if (blocking && result == ncclSuccess && child == nullptr && tGroupDepth > 0) {
    noteCtaCap(newcomm, ctaCap);
    tChildSlotsInGroup.push_back(newcomm);  // set up with the group's other communicators
    return;
  }
  if (tunerActivation) return;
  onCommCreated(result, child, blocking, ctaCap);
} catch (...) {
  // NCCL's answer stands. A child that could not be noted for its set-up (host memory) stays on
  // NCCL on this rank; its peers' set-up then times out (NCCL_LAMPORT_TIMEOUT_MS).
  takeCtaCap(newcomm);
  resultOfException("noting a split child for its set-up (it stays on NCCL)");
}

/** What we keep under a communicator's handle, taken while the handle is still its own. */
struct HeldComm {
  DetachedSetup setup;
  std::shared_ptr<LamportComm> entry;
};

HeldComm holdComm(ncclComm_t comm) { return {findDeferredSetup(comm), CommRegistry::instance().find(comm)}; }

/** Right before NCCL may free comm's handle (on = true), and after NCCL refused to (false): a
 *  split child NCCL writes at that address meanwhile is not taken for `held` (LamportComm::handleFreeing). */
void markHandleFreeing(const HeldComm& held, bool on) {
  if (held.entry != nullptr) held.entry->handleFreeing.store(on, std::memory_order_release);
}

/** NCCL's ncclCommDestroy of comm (`destroy`), with comm's entry marked and its pending split
 *  children detached while NCCL may free the handle. Where `kept(result)` (NCCL refused and keeps
 *  the communicator) both are put back; otherwise the children are settled, never looked up by
 *  handle again. Returns NCCL's answer. */
template <class Destroy, class Kept>
ncclResult_t destroyWithHandleAside(ncclComm_t comm, const HeldComm& held, Destroy destroy, Kept kept) {
  markHandleFreeing(held, true);
  DetachedChildren detached = detachPendingChildren(comm);
  const ncclResult_t result = destroy(comm);
  if (kept(result)) {
    markHandleFreeing(held, false);
    reattachPendingChildren(comm, std::move(detached));
  } else {
    settleDetachedChildren(std::move(detached));
  }
  return result;
}

/** After NCCL freed comm's handle: takes out what `held` holds where no communicator created
 *  meanwhile at that address replaced it, waits (bounded) for its set-up, releases its workspace.
 *  Never throws: NCCL has destroyed the communicator, and a program told otherwise might destroy
 *  it again. */
void releaseHeldComm(ncclComm_t comm, HeldComm held, bool aborting) noexcept {
  try {
    forgetDeferredSetupIfSame(comm, held.setup);
    CommRegistry::instance().removeIfSame(comm, held.entry);
    joinDetachedSetup(held.setup, comm, kAbortWaitMs);
    releaseCommEntry(std::move(held.entry), aborting);
  } catch (...) {
    resultOfException("releasing a destroyed communicator's workspace");
  }
}

}  // namespace

ncclResult_t realNcclMissing(const char* name) {
  LAMPORT_WARN("%s: the real NCCL function was not found (is libnccl loaded?)", name);
  return ncclSystemError;
}

bool interposerEnabled() {
  // Without NCCL's profiling aliases (NCCL < 2.16.2) we could not reach NCCL's own functions
  // behind our wrappers reliably: pass everything through (real_nccl.cc WARNs once).
  // Cached in a constant-initialized atomic (0 unknown, 1 off, 2 on), not a static with an
  // initializer: that one's guard would be held across the resolution's dlsym (the loader's
  // lock), a deadlock with a library constructor calling NCCL (tests/shim/test_resolve_lock_order.cc).
  static std::atomic<int> state{0};
  int known = state.load(std::memory_order_acquire);
  if (__builtin_expect(known == 0, 0)) {
    known = globalConfig().enable && realNcclHasProfilingApi() ? 2 : 1;
    state.store(known, std::memory_order_release);
  }
  return known == 2;
}

int groupDepth() { return tGroupDepth; }

}  // namespace nccl_lamport

using namespace nccl_lamport;

#define REAL_OR_FAIL(fname)                     \
  auto real = REAL_NCCL(fname);                 \
  if (real == nullptr) return realNcclMissing(#fname)

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) try {
  REAL_OR_FAIL(ncclCommInitRank);
  if (!interposerEnabled()) return real(comm, nranks, commId, rank);
  markInterposerActive();
  ncclResult_t result = real(comm, nranks, commId, rank);
  onCommCreated(result, comm ? *comm : nullptr, isBlocking(nullptr, true), 0);
  return result;
} catch (...) {
  return resultOfException("ncclCommInitRank");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                        ncclConfig_t* config) try {
  REAL_OR_FAIL(ncclCommInitRankConfig);
  if (!interposerEnabled()) return real(comm, nranks, commId, rank, config);
  markInterposerActive();
  ncclResult_t result = real(comm, nranks, commId, rank, config);
  onCommCreated(result, comm ? *comm : nullptr, isBlocking(config, true), ctaCapFromConfig(config));
  return result;
} catch (...) {
  return resultOfException("ncclCommInitRankConfig");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                          ncclUniqueId* commIds, ncclConfig_t* config) try {
  REAL_OR_FAIL(ncclCommInitRankScalable);
  if (!interposerEnabled()) return real(newcomm, nranks, myrank, nId, commIds, config);
  markInterposerActive();
  ncclResult_t result = real(newcomm, nranks, myrank, nId, commIds, config);
  onCommCreated(result, newcomm ? *newcomm : nullptr, isBlocking(config, true), ctaCapFromConfig(config));
  return result;
} catch (...) {
  return resultOfException("ncclCommInitRankScalable");
}

// ncclCommInitAll does not go through the public ncclCommInitRank, so it is wrapped itself.
NCCL_LAMPORT_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) try {
  REAL_OR_FAIL(ncclCommInitAll);
  if (!interposerEnabled()) return real(comms, ndev, devlist);
  markInterposerActive();
  ncclResult_t result = real(comms, ndev, devlist);
  // comms is read only where NCCL created the communicators: after a refusal (a bad ndev or
  // devlist) it may be shorter than ndev. No config: NCCL_MAX_CTAS alone caps the blocks.
  if ((result == ncclSuccess || result == ncclInProgress) && comms != nullptr && ndev > 0) {
    onCommArrayCreated(result, comms, ndev, isBlocking(nullptr, true), 0);
  } else {
    logFileCheckpoint();
  }
  return result;
} catch (...) {
  return resultOfException("ncclCommInitAll");
}

/** A split or shrink child's mode: with a config NCCL's rule for it, without one the parent's. */
static bool childBlocking(ncclComm_t parent, const ncclConfig_t* config) {
  const std::shared_ptr<LamportComm> lc = config == nullptr ? CommRegistry::instance().find(parent) : nullptr;
  return isBlocking(config, lc == nullptr || !lc->nonBlocking);
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                               ncclConfig_t* config) try {
  REAL_OR_FAIL(ncclCommSplit);
  if (!interposerEnabled()) return real(comm, color, key, newcomm, config);
  // The parent's set-up thread may still be using it.
  ncclResult_t result = ncclSuccess;
  if (waitForDeferredSetup(comm, [&] { return real(comm, color, key, newcomm, config); }, &result) ==
      PendingCall::kProceed) {
    result = real(comm, color, key, newcomm, config);
  }
  onChildCreated(result, comm, newcomm, childBlocking(comm, config), config);
  return result;
} catch (...) {
  return resultOfException("ncclCommSplit");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                                ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) try {
  REAL_OR_FAIL(ncclCommShrink);
  if (!interposerEnabled()) return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  // A split child NCCL wrote but nothing of ours collected yet: its set-up must precede this
  // shrink, not start after it (on a communicator NCCL then owns).
  (void)findOrAdoptChild(comm);
  const auto callNccl = [&] { return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags); };
  bool aborting = false;
#ifdef NCCL_SHRINK_ABORT
  aborting = (shrinkFlags & NCCL_SHRINK_ABORT) != 0;
#endif
  ncclResult_t result = ncclSuccess;
  if (aborting) {
    // A rank died and NCCL aborts the parent's in-flight work first: our kernels stop too, a
    // set-up still waiting for that rank is stopped rather than waited for, and NCCL owns the
    // parent's state from then on, so its later calls go to NCCL.
    bindQueriedComm(comm);  // tuner activation: one not called yet must be handed over too
    cancelDeferredSetup(comm, CancelReason::kHandedToNccl);
    joinDeferredSetup(comm, kAbortWaitMs);
    handOverToNccl(comm);
    result = callNccl();
  } else if (waitForDeferredSetup(comm, callNccl, &result) == PendingCall::kProceed) {
    result = callNccl();
  }
  onChildCreated(result, comm, newcomm, childBlocking(comm, config), config);
  return result;
} catch (...) {
  return resultOfException("ncclCommShrink");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) try {
  REAL_OR_FAIL(ncclCommFinalize);
  if (!interposerEnabled()) return real(comm);
  (void)findOrAdoptChild(comm);  // its set-up must precede this, not start after it
  ncclResult_t result = ncclSuccess;
  if (waitForDeferredSetup(comm, [&] { return real(comm); }, &result) == PendingCall::kAnswered) return result;
  // Tuner activation binds a communicator at its first call; one finalized before that would be
  // bound later as if it were not, and its allreduces after the finalize taken by us.
  bindQueriedComm(comm);
  // Only once NCCL has taken the finalize (done, or in progress on a non-blocking communicator):
  // one it refuses (an operation of its own still in progress) leaves the communicator as it was,
  // and marking it anyway would send this rank's allreduces to NCCL while its peers' run ours.
  result = real(comm);
  if (result == ncclSuccess || result == ncclInProgress) markFinalized(comm);
  return result;
} catch (...) {
  return resultOfException("ncclCommFinalize");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) try {
  REAL_OR_FAIL(ncclCommDestroy);
  // Null: NCCL's no-op. Nothing of ours is kept under it, and the pending-children cleanup below
  // would take every split child NCCL has not written yet (their slots still hold null).
  if (!interposerEnabled() || comm == nullptr) return real(comm);
  // An uncollected split child: its set-up starts now, to be ended below like any other (NCCL's
  // own readiness check inside the destroy would otherwise start it on the freed handle).
  (void)findOrAdoptChild(comm);
  // NCCL refuses to destroy a communicator it still has in progress (ncclInvalidArgument: its
  // init, a split job, a non-blocking operation not yet completed): then nothing of ours changes
  // either. Once our set-up is done (it is not cancelled but finishes: one grouped exchange for
  // every communicator created with this one, in which the peers take part; the wait gives up
  // after NCCL_LAMPORT_TIMEOUT_MS + 1 s with ncclInvalidArgument, then abort is the way out),
  // NCCL is asked first, and ours is released only if it agreed.
  ncclResult_t result = ncclSuccess;
  HeldComm held = holdComm(comm);
  // Inside the wait, any error keeps the communicator: refused (see below), or an error the
  // early return keeps.
  const auto destroyInWait = [&] {
    return destroyWithHandleAside(comm, held, real, [](ncclResult_t r) { return r != ncclSuccess; });
  };
  const bool answered =
      waitForDeferredSetup(comm, destroyInWait, &result, /*destroysComm=*/true) == PendingCall::kAnswered;
  if (answered && result != ncclSuccess) return result;
  if (answered) {
    // NCCL destroyed it inside the wait (its init job ended between our check and NCCL's): the
    // handle may already be another communicator's. A comm NCCL had not ready has no children.
    releaseHeldComm(comm, std::move(held), /*aborting=*/false);
    return result;
  }
  joinDeferredSetup(comm, teardownWaitMs(/*aborting=*/false));
  held = holdComm(comm);  // the entry the set-up may have registered since the first hold
  // A CTA-cap note still under the handle (tuner activation binds at the first call) goes while
  // the handle is its own: a newcomer at that address notes its own.
  const int ctaCapNote = takeCtaCap(comm);
  // ncclInvalidArgument is NCCL's refusal (ncclCommEnsureReady): it keeps the communicator, and
  // with it our entry and its pending split children. After any other answer the handle may be
  // freed: what was held or watched under it is settled.
  result = destroyWithHandleAside(comm, held, real, [](ncclResult_t r) { return r == ncclInvalidArgument; });
  if (result == ncclInvalidArgument) {
    if (ctaCapNote > 0) noteCtaCap(comm, ctaCapNote);
    return result;
  }
  releaseHeldComm(comm, std::move(held), /*aborting=*/false);
  return result;
} catch (...) {
  return resultOfException("ncclCommDestroy");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) try {
  REAL_OR_FAIL(ncclCommAbort);
  if (!interposerEnabled() || comm == nullptr) return real(comm);  // null: as in ncclCommDestroy
  // Stop our set-up thread and our waiting kernels first, so nothing of ours holds the device or
  // the communicator while NCCL aborts. Its split children NCCL has written live on.
  DetachedChildren detached = detachPendingChildren(comm);
  cancelDeferredSetup(comm, CancelReason::kCommGoingAway);
  requestAbort(comm);
  // NCCL frees the handle, and another thread may be handed the same address for a new
  // communicator at once. What we keep under this handle stays reachable during NCCL's abort (a
  // call on this comm from another thread meanwhile still finds it gone) and is then taken out
  // only where a newcomer at that address has not replaced it: never looked up by handle after.
  HeldComm held = holdComm(comm);
  takeCtaCap(comm);  // as in ncclCommDestroy
  markHandleFreeing(held, true);
  ncclResult_t result = real(comm);
  settleDetachedChildren(std::move(detached));
  releaseHeldComm(comm, std::move(held), /*aborting=*/true);
  return result;
} catch (...) {
  return resultOfException("ncclCommAbort");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) try {
  REAL_OR_FAIL(ncclCommRevoke);
  if (!interposerEnabled() || comm == nullptr) return real(comm, revokeFlags);
  (void)findOrAdoptChild(comm);  // its set-up must precede this, not start after it
  // What NCCL refuses before it changes anything (NCCL 2.28 src/init.cc: flags other than
  // NCCL_REVOKE_DEFAULT, a communicator already finalized or revoked) changes nothing of ours
  // either: a live communicator handed over on this rank alone would hang its peers' next call.
  bindQueriedComm(comm);  // tuner activation: one not called yet is handed over too
  const std::shared_ptr<LamportComm> lc = CommRegistry::instance().find(comm);
  if (revokeFlags != NCCL_REVOKE_DEFAULT || (lc != nullptr && lc->routesToNccl.load())) return real(comm, revokeFlags);
  // NCCL stops every in-flight operation: stop ours first (NCCL's revoke waits for the device),
  // and send every later call to NCCL.
  cancelDeferredSetup(comm, CancelReason::kHandedToNccl);
  handOverToNccl(comm);
  return real(comm, revokeFlags);
} catch (...) {
  return resultOfException("ncclCommRevoke");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) try {
  REAL_OR_FAIL(ncclCommGetAsyncError);
  if (!interposerEnabled()) return real(comm, asyncError);
  std::shared_ptr<LamportComm> lc = findOrAdoptChild(comm);
  // Ready only once our set-up is done too. Meanwhile the set-up thread alone asks NCCL for the
  // program (its ncclCommGetAsyncError also completes NCCL's pending group job, which must happen
  // once); NCCL's own internal calls still get NCCL's answer.
  const void* caller = __builtin_return_address(0);
  if (lc != nullptr && asyncError != nullptr && lc->setupPending.load(std::memory_order_acquire) &&
      !calledFromNccl(caller)) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  const uint64_t epochBeforePoll = pendingChildrenEpoch();
  ncclResult_t result = real(comm, asyncError);
  if (result == ncclSuccess && asyncError != nullptr) {
    try {
      collectPendingChildren(comm, *asyncError != ncclInProgress, epochBeforePoll);
    } catch (...) {  // NCCL's answer stands; what was not collected is collected at the next poll
      resultOfException("collecting split children");
    }
  }
  if (result != ncclSuccess || asyncError == nullptr) return result;
  // Who asks matters only for a failed set-up's communicator that NCCL still has in progress
  // (dladdr is not free, and watchdogs poll this often).
  const bool fromNccl = *asyncError == ncclInProgress && lc != nullptr && lc->setupFailed && calledFromNccl(caller);
  *asyncError = asyncErrorToReport(lc.get(), *asyncError, fromNccl);
  return result;
} catch (...) {
  return resultOfException("ncclCommGetAsyncError");
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclGroupStart() try {
  REAL_OR_FAIL(ncclGroupStart);
  ncclResult_t result = real();
  if (result == ncclSuccess) ++tGroupDepth;
  return result;
} catch (...) {
  return resultOfException("ncclGroupStart");
}

static void endGroup(ncclResult_t result, bool runSetup) noexcept try {
  runSetup = runSetup && !tunerHooksInstalled();  // as onCommCreated
  if (tGroupDepth > 0) --tGroupDepth;
  if (tGroupDepth > 0) return;
  // Everything this group queued is taken off the thread first (swaps, which cannot throw): a
  // failure below must not leave it for the thread's next, unrelated group.
  std::vector<ncclComm_t> nonBlocking, created;
  nonBlocking.swap(tNonBlockingCreatedInGroup);
  created.swap(tCommsCreatedInGroup);
  std::vector<ncclComm_t*> watchedSlots, childSlots;
  watchedSlots.swap(tWatchedSlotsInGroup);
  childSlots.swap(tChildSlotsInGroup);
  stampGroupedChildren(watchedSlots);  // NCCL has launched the group's splits: polls may judge now
  for (ncclComm_t* slot : childSlots) {
    // Written by NCCL inside the ncclGroupEnd that just returned; still null for
    // NCCL_SPLIT_NOCOLOR or a split that failed.
    const ncclComm_t child = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (child != nullptr) {
      moveCtaCap(slot, child);
      created.push_back(child);
    } else {
      takeCtaCap(slot);  // no child on this rank: the note goes
    }
  }
  if (runSetup && interposerEnabled() && !nonBlocking.empty()) {
    // A group of non-blocking inits returns ncclInProgress; NCCL finishes them in the background.
    if (result == ncclSuccess || result == ncclInProgress) {
      startDeferredSetup(nonBlocking);
    } else {
      for (ncclComm_t c : nonBlocking) registerIneligible(c, "the group that created it failed", true);
    }
  }
  if (created.empty() || !runSetup || !interposerEnabled()) return;
  if (result == ncclSuccess) {
    setupWorkspaces(created);
  } else {
    for (ncclComm_t c : created) registerIneligible(c, "the group that created it failed");
  }
} catch (...) {
  resultOfException("workspace set-up in ncclGroupEnd");  // NCCL's result stands
}

// NCCL's error wins; else a failed launch of ours; else NCCL's answer (ncclInProgress included).
static ncclResult_t groupResult(ncclResult_t nccl, ncclResult_t ours) {
  if (nccl != ncclSuccess && nccl != ncclInProgress) return nccl;
  return ours != ncclSuccess ? ours : nccl;
}

NCCL_LAMPORT_EXPORT ncclResult_t ncclGroupEnd() try {
  REAL_OR_FAIL(ncclGroupEnd);
  // The outermost end: the group's Lamport calls launch first, then NCCL's share of the group.
  const ncclResult_t ours = tGroupDepth == 1 ? launchGroupedAllReduces() : ncclSuccess;
  ncclResult_t result = real();
  endGroup(result, /*runSetup=*/true);
  return groupResult(result, ours);
} catch (...) {
  return resultOfException("ncclGroupEnd");
}

// Ends a group without running it: nothing was created, so nothing is set up, and the group's
// Lamport calls go to NCCL's estimate instead of running.
NCCL_LAMPORT_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) try {
  REAL_OR_FAIL(ncclGroupSimulateEnd);
  const ncclResult_t ours = tGroupDepth == 1 ? simulateGroupedAllReduces() : ncclSuccess;
  ncclResult_t result = real(simInfo);
  endGroup(result, /*runSetup=*/false);
  return groupResult(result, ours);
} catch (...) {
  return resultOfException("ncclGroupSimulateEnd");
}
