// This rank's side of a communicator's workspace set-up, between the exchange rounds of
// plugin/comm/workspace_setup.cc: allocate and export the local workspace (before round 1), then,
// once every rank's record is in, serve our export to peers in other processes, map every peer's
// workspace and make ours ready for the kernel (before round 2). Each step records its first
// failure in SetupState::why and never skips what peers wait for (a fetch, a serve).
#pragma once

#include "common/config.h"
#include "plugin/comm/setup_state.h"

namespace nccl_lamport {

/** Before round 1: sets s.mine (identity, proposed slot and two-shot bound, export) and
 *  allocates and exports the workspace; capable = 1 only when all of it worked. */
void prepareLocal(SetupState& s, const Config& config);

/** Starts serving our descriptor to the peers in other processes (a thread, joined by
 *  finishLocal). */
void startServing(SetupState& s);

/** Maps every peer's workspace and checks the links; sets s.localOk. */
void mapPeers(SetupState& s, const Config& config);

/** Joins the server, then prepares what the kernel needs; s.localOk stays true only if all of
 *  it worked. */
void finishLocal(SetupState& s);

}  // namespace nccl_lamport
