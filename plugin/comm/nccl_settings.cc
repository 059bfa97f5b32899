// NCCL's settings that keep a communicator on NCCL, as NCCL parses them (see nccl_settings.h).
#include "plugin/comm/nccl_settings.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace nccl_lamport {

bool ncclIntegerParameter(const char* text, long long* value) {
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  *value = strtoll(text, nullptr, 0);
  return errno == 0;
}

int ncclCommBlockingOverride(const char* text) {
  long long value = -1;
  if (!ncclIntegerParameter(text, &value)) return -1;
  return value == 0 || value == 1 ? static_cast<int>(value) : -1;
}

bool ncclUsesRemoteSyncDomain(const char* value) {
  long long domain = 1;
  if (!ncclIntegerParameter(value, &domain)) return true;
  return domain != 0;
}

bool processUsesRemoteSyncDomain() {
  static const bool remote = ncclUsesRemoteSyncDomain(getenv("NCCL_MEM_SYNC_DOMAIN"));
  return remote;
}

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

namespace {

/** Splits like strtok_r: empty pieces are dropped. */
std::vector<std::string> pieces(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::stringstream stream(text);
  std::string piece;
  while (std::getline(stream, piece, separator)) {
    if (!piece.empty()) out.push_back(piece);
  }
  return out;
}

}  // namespace

std::string ncclAllReduceChoiceReason(const char* variable, const char* value) {
  if (value == nullptr) return "";
  bool chooses = false;
  const std::vector<std::string> entries = pieces(value, ';');
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::vector<std::string> parts = pieces(entries[i], ':');
    if (parts.empty()) continue;
    std::string list = parts[0];
    if (parts.size() >= 2) {
      if (strcasecmp(parts[0].c_str(), "AllReduce") != 0) continue;  // another function's entry
      list = parts[1];
    } else if (i != 0) {
      return "";  // NCCL refuses an entry without a function after the first
    }
    chooses = list[0] != '^';
  }
  return chooses ? std::string(variable) + "=" + value + " chooses NCCL's allreduce" : "";
}

std::string processNcclSettingsOffReason() {
  static const std::string p2p = ncclP2pOffReason(getenv("NCCL_P2P_DISABLE"), getenv("NCCL_P2P_LEVEL"));
  if (!p2p.empty()) return p2p;
  for (const char* variable : {"NCCL_ALGO", "NCCL_PROTO"}) {
    std::string reason = ncclAllReduceChoiceReason(variable, getenv(variable));
    if (!reason.empty()) return reason;
  }
  return "";
}

}  // namespace nccl_lamport
