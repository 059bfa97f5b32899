// The CTA cap of a communicator, from its config or NCCL_MAX_CTAS (see cta_cap.h).
#include "plugin/comm/cta_cap.h"

#include <climits>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "plugin/comm/nccl_settings.h"  // ncclIntegerParameter

namespace nccl_lamport {

int ctaCapFromConfig(const ncclConfig_t* config) {
  if (config == nullptr || config->version < NCCL_VERSION(2, 17, 0)) return 0;  // no maxCTAs field
  return config->maxCTAs > 0 ? config->maxCTAs : 0;  // NCCL_CONFIG_UNDEF_INT is INT_MIN
}

int ctaCapFromEnvironment(const char* value) {
  long long cap = 0;
  if (!ncclIntegerParameter(value, &cap) || cap <= 0) return 0;  // NCCL: "too low", ignored
  return cap > INT_MAX ? INT_MAX : static_cast<int>(cap);
}

int channelCapFromEnvironment(const char* maxNchannels, const char* maxNrings) {
  // -2 is NCCL's "not set" for both (ncclMaxNchannels compares with it).
  long long channels = 0;
  const auto given = [&channels](const char* text) { return ncclIntegerParameter(text, &channels) && channels != -2; };
  if (!given(maxNchannels) && !given(maxNrings)) return 0;
  return channels < 1 ? 1 : channels > kNcclMaxChannels ? kNcclMaxChannels : static_cast<int>(channels);
}

int combinedCtaCap(int configCap, int maxCtasVariable, int channelCap) {
  int cap = maxCtasVariable > 0 ? maxCtasVariable : configCap;
  if (cap > kNcclMaxChannels) cap = kNcclMaxChannels;
  if (channelCap > 0 && (cap == 0 || channelCap < cap)) cap = channelCap;
  return cap;
}

int effectiveCtaCap(int configCap) {
  static const int maxCtasVariable = ctaCapFromEnvironment(getenv("NCCL_MAX_CTAS"));
  static const int channelCap = channelCapFromEnvironment(getenv("NCCL_MAX_NCHANNELS"), getenv("NCCL_MAX_NRINGS"));
  return combinedCtaCap(configCap, maxCtasVariable, channelCap);
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
  // Room first (the one step that may throw, before anything changed), then re-keyed in place:
  // a note is never lost half-way.
  notes().reserve(notes().size() + 1);
  it = notes().find(slot);  // reserve may rehash
  auto node = notes().extract(it);
  node.key() = comm;
  auto inserted = notes().insert(std::move(node));
  if (!inserted.inserted) inserted.position->second = inserted.node.mapped();
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
