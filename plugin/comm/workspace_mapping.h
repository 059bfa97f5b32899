// This rank's side of a communicator's workspace set-up, between the exchange rounds of
// plugin/comm/workspace_setup.cc: allocate and export the local workspace (before round 1), then,
// once every rank's record is in, serve our export to peers in other processes, map every peer's
// workspace and make ours ready for the kernel (before round 2). Each step records its first
// failure in SetupState::why and never skips what peers wait for (a fetch, a serve).
#pragma once

#include "common/config.h"
#include "plugin/comm/setup_state.h"

namespace nccl_lamport {

/** Bytes of user message one slot may hold so that the whole workspace (control block and
 *  3 buffers of nRanks - 1 slots, capBytes rounded down to the 2 MiB VMM granularity) stays under
 *  capBytes, and at most kLamportMaxSlotBytes (what the kernels take); a multiple of 16, 0 when
 *  not even one vector fits. */
size_t maxSlotBytesForCap(int nRanks, size_t capBytes);

/** The slot (bytes per sender in each buffer) this rank proposes in round 1: the one-shot
 *  crossover (oneShotOverride if non-zero, else the built-in table for nRanks / smArch), capped
 *  by what workspaceCapBytes holds and, where launches are capped at maxCtas blocks (> 0), by
 *  cappedOneShotMaxBytes(maxCtas) (tuner/routing.h), rounded up to 16 bytes; 0 when the cap
 *  holds no slot. */
size_t proposedSlotBytes(int nRanks, int smArch, size_t oneShotOverride, size_t workspaceCapBytes, int maxCtas = 0);

/** Before round 1: sets s.mine (identity, proposed slot and two-shot bound, export) and
 *  allocates and exports the workspace; capable = 1 only when all of it worked. */
void prepareLocal(SetupState& s, const Config& config);

/** How long a rank waits for one peer to fetch its descriptor, or to serve one, during the
 *  set-up (ms). */
int fdExchangeTimeoutMs(const Config& config);

/** Starts serving our descriptor to the peers in other processes (a thread, joined by
 *  finishLocal), each given fdExchangeTimeoutMs(config) to fetch it. */
void startServing(SetupState& s, const Config& config);

/** Maps every peer's workspace and checks the links; sets s.localOk. */
void mapPeers(SetupState& s, const Config& config);

/** Joins the server, then prepares what the kernel needs; s.localOk stays true only if all of
 *  it worked. */
void finishLocal(SetupState& s);

}  // namespace nccl_lamport
