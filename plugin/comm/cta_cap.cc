// The CTA cap of a communicator, from its config or NCCL_MAX_CTAS (see cta_cap.h).
#include "plugin/comm/cta_cap.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace nccl_lamport {

int ctaCapFromConfig(const ncclConfig_t* config) {
  if (config == nullptr || config->version < NCCL_VERSION(2, 17, 0)) return 0;  // no maxCTAs field
  return config->maxCTAs > 0 ? config->maxCTAs : 0;  // NCCL_CONFIG_UNDEF_INT is INT_MIN
}

int ctaCapFromEnvironment(const char* value) {
  if (value == nullptr) return 0;
  char* end = nullptr;
  errno = 0;
  const long long cap = strtoll(value, &end, 0);
  if (end == value || errno != 0 || cap <= 0) return 0;
  return cap > INT_MAX ? INT_MAX : static_cast<int>(cap);
}

int effectiveCtaCap(int configCap) {
  static const int environmentCap = ctaCapFromEnvironment(getenv("NCCL_MAX_CTAS"));
  return environmentCap > 0 ? environmentCap : configCap;
}

namespace {

std::mutex gNotesMutex;

std::unordered_map<const void*, int>& notes() {
  static auto* map = new std::unordered_map<const void*, int>();  // never destroyed: used at exit
  return *map;
}

}  // namespace

void noteCtaCap(const void* key, int cap) {
  std::lock_guard<std::mutex> lock(gNotesMutex);
  notes()[key] = cap;
}

int peekCtaCap(const void* key) {
  std::lock_guard<std::mutex> lock(gNotesMutex);
  auto it = notes().find(key);
  return it == notes().end() ? 0 : it->second;
}

void moveCtaCap(const void* slot, ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(gNotesMutex);
  auto it = notes().find(slot);
  if (it == notes().end()) return;
  const int cap = it->second;
  notes().erase(it);
  notes()[comm] = cap;
}

int takeCtaCap(const void* key) {
  std::lock_guard<std::mutex> lock(gNotesMutex);
  auto it = notes().find(key);
  if (it == notes().end()) return 0;
  const int cap = it->second;
  notes().erase(it);
  return cap;
}

}  // namespace nccl_lamport
