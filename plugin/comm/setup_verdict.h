// The verdicts of a communicator's set-up, each computed from what every rank has alike so that
// every rank reaches the same one (SPEC 4.4): after round 1 from the exchanged records, after
// round 2 from the ok words. logCommVerdict (plugin/comm/workspace_setup.h) logs the result.
#pragma once

#include <string>

#include "plugin/comm/setup_state.h"

namespace nccl_lamport {

/** Round-1 verdict from s.records alone (identical on every rank): s.proceed, the agreed slot
 *  (layout) and two-shot override, or the reason in s.why. */
void decideFromRecords(SetupState& s);

/** What an eligible communicator's reason and ON line add for a cap of maxCtas blocks per launch
 *  ("" for none; plugin/comm/cta_cap.h). */
std::string ctaCapNote(int maxCtas);

/** An eligible communicator's reason: its crossover and its block cap. */
std::string eligibleReason(const LamportComm& lc);

/** Fills in the final verdict on s.lc (eligible or not, the reason, the routing table and the
 *  launch template; frees the resources of a communicator that stays on NCCL, but for a failed
 *  set-up's, which its tear-down frees). Logs nothing. */
void settleVerdict(SetupState& s, bool allOk);

}  // namespace nccl_lamport
