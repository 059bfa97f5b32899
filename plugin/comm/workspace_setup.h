// Workspace set-up for communicators (docs/design.md, "Workspace"); tear-down is plugin/comm/comm_teardown.h.
//
// setupWorkspaces() is the one place where ranks talk to each other outside the user's calls. It
// must run at a point that is the same on every rank and outside any group and any stream
// capture: right after an ungrouped blocking init/split returns, or in the outermost
// ncclGroupEnd for communicators created inside that group (one grouped exchange for all of
// them, so one thread can drive several GPUs). Every rank takes part in both exchange rounds,
// whatever fails locally, so a local failure never leaves a peer waiting; only a rank whose
// round-1 all-gather did not complete (a peer is gone) skips round 2 and reports the
// communicator failed (plugin/comm/exchange_rounds.h).
//
// Protocol, per communicator:
//   1. each rank allocates its workspace (VMM), exports it and fills an ExchangeRecord;
//   2. round 1: all-gather of the records (pncclAllGather, grouped over the communicators);
//   3. every rank decides from the same records whether to proceed (all capable, one host),
//      checks NVLink + P2P to every peer, maps every peer's workspace (same process: the handle;
//      other process: a POSIX fd over a Unix socket), fills its buffers with the empty sentinel;
//   4. round 2: all-gather of one "ok" word per rank; the communicator is accelerated only if
//      every rank reported ok.
//
// The steps are driven here (workspace_setup.cc); one round over NCCL is exchange_rounds.h,
// steps 1 and 3 are this rank's workspace and its peers' (workspace_mapping.h), the verdicts
// after each round are setup_verdict.h, and the state they share is setup_state.h.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plugin/comm/setup_control.h"

namespace nccl_lamport {

struct LamportComm;

/** Sets up every communicator in `comms` (all must be ready and created together). Registers
 *  each one, eligible or not, with the reason logged once at INFO; registers nothing once
 *  options.control is cancelled. Never throws. */
void setupWorkspaces(const std::vector<ncclComm_t>& comms, const SetupOptions& options = {});

/** The two all-gather rounds of the set-up over something other than the communicator itself
 *  (tuner activation: the host rendezvous, plugin/comm/tuner_setup.h). */
class SetupExchange {
 public:
  virtual ~SetupExchange() = default;
  /** Gathers `bytes` from every rank: *all gets nRanks blocks in one order that is the same on
   *  every rank, *index this rank's place in it. False (with *why) when not every rank took part;
   *  then it is false on every rank. */
  virtual bool allGather(const void* mine, size_t bytes, std::vector<uint8_t>* all, int* index, std::string* why) = 0;
};

/**
 * The set-up of setupWorkspaces for one communicator whose handle is not known yet (inside the
 * tuner's init, docs/tuner-activation.md), with both rounds over `exchange`: nRanks ranks, this rank's device
 * cudaDev; this rank's rank is its place in the exchange's order (the same order on every rank,
 * hence the same reduction order). Returns the entry, eligible or not, NOT registered: it is
 * bound to its handle at the handle's first hooked call. Logs no per-communicator verdict line:
 * that line names the handle, so the binder logs it (logCommVerdict) once the handle is known.
 * Each local step is guarded (guardedStep): a throw ends this rank's part without skipping a
 * round the peers wait in. Only running out of memory for its own state (before the first round)
 * or for the verdict's text throws.
 */
std::unique_ptr<LamportComm> setupWorkspaceOverExchange(int nRanks, int cudaDev, SetupExchange& exchange);


/** Registers comm as known but never accelerated, with a reason (logged once at INFO). */
void registerIneligible(ncclComm_t comm, const char* reason, bool nonBlocking = false);

}  // namespace nccl_lamport
