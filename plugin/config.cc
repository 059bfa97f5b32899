#include "plugin/config.h"

#include <cerrno>
#include <cstdlib>
#include <strings.h>

#include <cstring>
#include <limits>

#include "plugin/log.h"

namespace nccl_lamport {

namespace {

constexpr const char* kEnable = "NCCL_LAMPORT_ENABLE";
constexpr const char* kOneShotMax = "NCCL_LAMPORT_ONESHOT_MAX_BYTES";
constexpr const char* kTwoShotMax = "NCCL_LAMPORT_TWOSHOT_MAX_BYTES";
constexpr const char* kWorkspaceMax = "NCCL_LAMPORT_WORKSPACE_MAX_BYTES";
constexpr const char* kTimeout = "NCCL_LAMPORT_TIMEOUT_MS";
constexpr const char* kNcclPath = "NCCL_LAMPORT_NCCL_PATH";
constexpr const char* kRequireNvlink = "NCCL_LAMPORT_REQUIRE_NVLINK";
constexpr const char* kKernel = "NCCL_LAMPORT_KERNEL";
// Read by the LD_AUDIT module (plugin/ld_audit.c), not here: listed for the README check only.
constexpr const char* kAuditDebug = "NCCL_LAMPORT_AUDIT_DEBUG";

void warnBad(const char* variable, const char* value, const char* expected) {
  LAMPORT_WARN("ignoring %s=\"%s\": expected %s; keeping the default", variable, value, expected);
}

}  // namespace

const std::vector<KnobInfo>& knobTable() {
  static const std::vector<KnobInfo> table = {
      {kEnable, "1", "bool"},
      {kOneShotMax, "0 (built-in table)", "bytes"},
      {kTwoShotMax, "0 (built-in table: off)", "bytes"},
      {kWorkspaceMax, "64M", "bytes"},
      {kTimeout, "600000", "ms"},
      {kNcclPath, "unset", "path"},
      {kAuditDebug, "0", "bool"},
      {kRequireNvlink, "1", "bool"},
      {kKernel, "fast", "name"},
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
  if (strcmp(text, "1") == 0 || strcasecmp(text, "true") == 0 || strcasecmp(text, "yes") == 0) {
    *out = true;
    return true;
  }
  if (strcmp(text, "0") == 0 || strcasecmp(text, "false") == 0 || strcasecmp(text, "no") == 0) {
    *out = false;
    return true;
  }
  return false;
}

bool parseByteSize(const char* text, size_t* out) {
  if (text == nullptr || *text == '\0') return false;
  std::string digits(text);
  uint64_t multiplier = 1;
  char last = digits.back();
  if (last == 'K' || last == 'k') multiplier = uint64_t{1} << 10;
  if (last == 'M' || last == 'm') multiplier = uint64_t{1} << 20;
  if (last == 'G' || last == 'g') multiplier = uint64_t{1} << 30;
  if (multiplier != 1) digits.pop_back();
  uint64_t value = 0;
  if (!parseUnsigned(digits.c_str(), &value)) return false;
  if (value > std::numeric_limits<size_t>::max() / multiplier) return false;
  *out = static_cast<size_t>(value * multiplier);
  return true;
}

Config parseConfig(const EnvLookup& env) {
  Config config;
  if (const char* v = env(kEnable)) {
    if (!parseBool(v, &config.enable)) warnBad(kEnable, v, "0 or 1");
  }
  if (const char* v = env(kOneShotMax)) {
    size_t bytes = 0;
    if (parseByteSize(v, &bytes)) {
      config.oneShotMaxBytes = bytes;
    } else {
      warnBad(kOneShotMax, v, "a byte count such as 65536, 64K or 8M");
    }
  }
  if (const char* v = env(kTwoShotMax)) {
    size_t bytes = 0;
    if (parseByteSize(v, &bytes)) {
      config.twoShotMaxBytes = bytes;
    } else {
      warnBad(kTwoShotMax, v, "a byte count such as 1M or 8M");
    }
  }
  if (const char* v = env(kWorkspaceMax)) {
    size_t bytes = 0;
    if (parseByteSize(v, &bytes) && bytes > 0) {
      config.workspaceMaxBytes = bytes;
    } else {
      warnBad(kWorkspaceMax, v, "a positive byte count such as 64M");
    }
  }
  if (const char* v = env(kTimeout)) {
    uint64_t ms = 0;
    if (parseUnsigned(v, &ms) && ms > 0) {
      config.timeoutMs = ms;
    } else {
      warnBad(kTimeout, v, "a positive number of milliseconds");
    }
  }
  if (const char* v = env(kNcclPath)) config.ncclPath = v;
  if (const char* v = env(kKernel)) {
    if (strcasecmp(v, "fast") == 0 || strcasecmp(v, "baseline") == 0) {
      config.baselineKernel = strcasecmp(v, "baseline") == 0;
    } else {
      warnBad(kKernel, v, "fast or baseline");
    }
  }
  if (const char* v = env(kRequireNvlink)) {
    if (!parseBool(v, &config.requireNvlink)) warnBad(kRequireNvlink, v, "0 or 1");
  }
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
