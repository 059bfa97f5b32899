// NCCL's P2P switches, as NCCL parses them (see nccl_p2p_settings.h).
#include "plugin/comm/nccl_p2p_settings.h"

#include <cstdlib>

namespace nccl_lamport {

std::string ncclP2pOffReason(const char* p2pDisable, const char* p2pLevel) {
  if (p2pDisable != nullptr && strtol(p2pDisable, nullptr, 0) == 1) {
    return std::string("NCCL_P2P_DISABLE=") + p2pDisable + " turns NCCL's P2P off";
  }
  if (p2pLevel == nullptr) return "";
  // NCCL first looks the text up among its path names, where LOC is the only one below NVL; a
  // text that names no path and starts with a digit is an old-style level, where 0 maps to LOC.
  // Anything else leaves the level unset (NCCL's default, which allows NVLink).
  const bool loc = std::string(p2pLevel) == "LOC" ||
                   (p2pLevel[0] >= '0' && p2pLevel[0] <= '9' && strtol(p2pLevel, nullptr, 0) == 0);
  return loc ? std::string("NCCL_P2P_LEVEL=") + p2pLevel + " allows no P2P between GPUs" : "";
}

const std::string& processNcclP2pOffReason() {
  static const std::string reason = ncclP2pOffReason(getenv("NCCL_P2P_DISABLE"), getenv("NCCL_P2P_LEVEL"));
  return reason;
}

}  // namespace nccl_lamport
