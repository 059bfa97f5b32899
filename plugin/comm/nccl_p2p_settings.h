// NCCL's own switches for its peer-to-peer transport, read the way NCCL reads them. The Lamport
// path is peer-to-peer over NVLink, so a user who turns NCCL's P2P off (typically because P2P is
// broken or forbidden on the machine) must not get peer mappings from us either: such a
// communicator stays on NCCL, which then uses its shared-memory or network transport.
#pragma once

#include <string>

namespace nccl_lamport {

/**
 * Why NCCL's settings rule out P2P between NVLink peers, or "" when they allow it.
 * p2pDisable, p2pLevel: the values of NCCL_P2P_DISABLE and NCCL_P2P_LEVEL (nullptr: unset).
 * Follows ncclGetLevel in NCCL 2.28's src/graph/paths.cc:
 *  - NCCL_P2P_DISABLE, parsed as an integer in base 0, equal to 1 means level LOC and wins over
 *    NCCL_P2P_LEVEL; any other value leaves NCCL_P2P_LEVEL in charge;
 *  - NCCL_P2P_LEVEL is a path name compared case-sensitively ("LOC", "NVL", "PIX", ...) or, when
 *    it starts with a digit, an old-style number (0 = LOC).
 * Only LOC rules NVLink out: every other level is at least NVL, the path type of two GPUs joined
 * by NVLink (directly or through NVSwitch), the only peers the Lamport path maps.
 */
std::string ncclP2pOffReason(const char* p2pDisable, const char* p2pLevel);

/** ncclP2pOffReason for this process's environment, read at the first call and kept, as NCCL
 *  keeps the level it reads at its first topology query. NCCL puts nccl.conf's values into the
 *  environment before any communicator exists, so they count; values that NCCL's environment
 *  plugin (NCCL_ENV_PLUGIN) supplies are not seen. */
const std::string& processNcclP2pOffReason();

}  // namespace nccl_lamport
