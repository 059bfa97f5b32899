#include "common/config.h"

#include <cerrno>
#include <cstdlib>
#include <strings.h>

#include <cstring>
#include <limits>

#include "common/bool_knob.h"
#include "common/log.h"

namespace nccl_lamport {

namespace {

void warnBad(const char* variable, const char* value, const char* expected) {
  LAMPORT_WARN("ignoring %s=\"%s\": expected %s; keeping the default", variable, value, expected);
}

// Always printed, whatever NCCL_DEBUG says: the A/B switch must never fail open, nor fail closed
// without a word.
void warnUnknownSwitch(const char* variable, const char* value) {
  LAMPORT_WARN_ALWAYS("%s=\"%s\" is none of 0/1, false/true, no/yes, off/on (any case): the Lamport path is "
                      "OFF, every call goes to NCCL",
                      variable, value);
}

// One parser per KnobKind; the table's kind column picks it at compile time.
template <KnobKind kind>
void parseKnob(const KnobInfo& knob, const char* text, typename KnobValue<kind>::type* value);

void parseBoolKnob(const KnobInfo& knob, const char* text, bool* value) {
  if (parseBool(text, value)) return;
  if (knob.kind == KnobKind::Switch) {
    *value = false;
    warnUnknownSwitch(knob.variable, text);
  } else {
    warnBad(knob.variable, text, "0/1, false/true, no/yes or off/on");
  }
}

template <>
void parseKnob<KnobKind::Switch>(const KnobInfo& knob, const char* text, bool* value) {
  parseBoolKnob(knob, text, value);
}

template <>
void parseKnob<KnobKind::Bool>(const KnobInfo& knob, const char* text, bool* value) {
  parseBoolKnob(knob, text, value);
}

// Bytes and Ms: below the minimum is rejected, above the maximum clamped.
template <typename T>
void acceptInRange(const KnobInfo& knob, const char* text, uint64_t parsed, T* value) {
  if (parsed < knob.minimum) {
    warnBad(knob.variable, text, knob.minimum == 1 ? "a positive value" : "a larger value");
    return;
  }
  if (parsed > knob.maximum) {
    LAMPORT_WARN("%s=\"%s\" is above the maximum %llu %s: using %llu", knob.variable, text,
                 static_cast<unsigned long long>(knob.maximum), knob.unit,
                 static_cast<unsigned long long>(knob.maximum));
    parsed = knob.maximum;
  }
  *value = static_cast<T>(parsed);
}

template <>
void parseKnob<KnobKind::Bytes>(const KnobInfo& knob, const char* text, size_t* value) {
  size_t bytes = 0;
  if (!parseByteSize(text, &bytes)) {
    warnBad(knob.variable, text, "a byte count such as 65536, 64K, 64KiB or 8M");
    return;
  }
  acceptInRange(knob, text, bytes, value);
}

template <>
void parseKnob<KnobKind::Ms>(const KnobInfo& knob, const char* text, uint64_t* value) {
  uint64_t number = 0;
  if (!parseUnsigned(text, &number)) {
    // Digits only, too many for 64 bits: a user who means "wait for ever" gets the longest wait
    // (clamped with a WARN, as for any value above the maximum), not the 10-minute default.
    const bool digitsOnly = text[0] != '\0' && std::strspn(text, "0123456789") == std::strlen(text);
    if (!digitsOnly) {
      warnBad(knob.variable, text, "a number of milliseconds");
      return;
    }
    number = std::numeric_limits<uint64_t>::max();
  }
  acceptInRange(knob, text, number, value);
}

template <>
void parseKnob<KnobKind::Path>(const KnobInfo& /*knob*/, const char* text, std::string* value) {
  *value = text;
}

}  // namespace

const std::vector<KnobInfo>& knobTable() {
  static const std::vector<KnobInfo> table = {
#define NCCL_LAMPORT_KNOB_INFO(field, kind, variable, defaultValue, defaultText, unit, minimum, maximum, doc) \
  {variable, KnobKind::kind, defaultText, unit, minimum, maximum, doc},
      NCCL_LAMPORT_KNOBS(NCCL_LAMPORT_KNOB_INFO)
#undef NCCL_LAMPORT_KNOB_INFO
  };
  return table;
}

bool parseUnsigned(const char* text, uint64_t* out) {
  if (text == nullptr || *text == '\0') return false;
  uint64_t value = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    uint64_t digit = static_cast<uint64_t>(*p - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

bool parseBool(const char* text, bool* out) {
  int value = 0;
  if (lamportParseBool(text, &value) == 0) return false;
  *out = value != 0;
  return true;
}

bool switchIsOn(const char* text) {
  bool on = true;
  return text == nullptr || (parseBool(text, &on) && on);
}

Config parseConfig(const EnvLookup& env) {
  Config config;
  size_t index = 0;
  // One statement per line of common/knobs.h, in table order (knobTable()[index] is that line).
#define NCCL_LAMPORT_KNOB_PARSE(field, kind, ...)                                               \
  {                                                                                             \
    const KnobInfo& knob = knobTable()[index++];                                                \
    if (const char* text = env(knob.variable)) parseKnob<KnobKind::kind>(knob, text, &config.field); \
  }
  NCCL_LAMPORT_KNOBS(NCCL_LAMPORT_KNOB_PARSE)
#undef NCCL_LAMPORT_KNOB_PARSE
  return config;
}

const Config& globalConfig() {
  static const Config config = [] {
    Config parsed = parseConfig([](const char* name) { return static_cast<const char*>(getenv(name)); });
    LAMPORT_INFO(kSubsysEnv | kSubsysInit,
                 "config: enable=%d oneShotMaxBytes=%zu workspaceMaxBytes=%zu timeoutMs=%llu",
                 parsed.enable ? 1 : 0, parsed.oneShotMaxBytes, parsed.workspaceMaxBytes,
                 static_cast<unsigned long long>(parsed.timeoutMs));
    return parsed;
  }();
  return config;
}

}  // namespace nccl_lamport
