// The verdicts of a communicator's set-up, each computed from what every rank has alike so that
// every rank reaches the same one: after round 1 from the exchanged records, after round 2 from
// the ok words (workspace_setup.h describes the two rounds). logCommVerdict logs the result.
#pragma once

#include <string>

#include "plugin/comm/setup_state.h"

namespace nccl_lamport {

/** Round-1 verdict from s.records alone (identical on every rank): s.proceed, the agreed slot
 *  (layout) and two-shot override, or the reason in s.why. */
void decideFromRecords(SetupState& s);

/** Round-2 verdict from the ok words of the nRanks ranks (`words`: nRanks OkRecords in rank
 *  order): true when every rank said ok. *firstNo gets the lowest rank that did not (-1 when all
 *  did). Never throws: a throw there would give one rank another verdict than its peers. */
bool allRanksOk(const char* words, int nRanks, int* firstNo) noexcept;

/** The message of a round-2 "no" from rank firstNo ("" if it cannot be formatted). */
std::string peerNotOkReason(int firstNo) noexcept;

/** What an eligible communicator's reason and ON line add for a cap of maxCtas blocks per launch
 *  ("" for none; plugin/comm/cta_cap.h). */
std::string ctaCapNote(int maxCtas);

/** What an eligible communicator's reason and ON line add for the two-shot kernel: its crossover
 *  in bytes where nRanks >= kTwoShotMinRanks and it takes any message ("" otherwise). */
std::string twoShotNote(const RoutingTable& table, int nRanks);

/** An eligible communicator's reason: its crossovers and its block cap. */
std::string eligibleReason(const LamportComm& lc);

/** Fills in the final verdict on s.lc (eligible or not, the reason, the routing table and the
 *  launch template; frees the resources of a communicator that stays on NCCL, but for a failed
 *  set-up's, which its tear-down frees). Logs nothing. */
void settleVerdict(SetupState& s, bool allOk);

/** Logs lc's verdict once at INFO, naming lc.comm: the ON line (crossovers, workspace size, block
 *  cap) or the OFF line with the reason. setupWorkspaces calls it itself; the set-up inside the
 *  tuner's init leaves it to whoever binds the entry to its handle. */
void logCommVerdict(const LamportComm& lc);

}  // namespace nccl_lamport
