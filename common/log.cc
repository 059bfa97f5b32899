#include "common/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace nccl_lamport {
namespace detail {
std::atomic<int> gLogLevel{-1};
std::atomic<uint64_t> gLogSubsys{LogSettings{}.subsysMask};
}  // namespace detail

namespace {

std::atomic<NcclDebugLogger> gNcclLogger{nullptr};
std::atomic<void (*)(const char*)> gSink{nullptr};
thread_local int tLogDevice = -1;

struct SubsysName {
  const char* name;
  uint64_t bit;
};

// NCCL's subsystem names (src/debug.cc) and their bits.
constexpr SubsysName kSubsysNames[] = {
    {"INIT", 0x1},     {"COLL", 0x2},       {"P2P", 0x4},     {"SHM", 0x8},
    {"NET", 0x10},     {"GRAPH", 0x20},     {"TUNING", 0x40}, {"ENV", 0x80},
    {"ALLOC", 0x100},  {"CALL", 0x200},     {"PROXY", 0x400}, {"NVLS", 0x800},
    {"BOOTSTRAP", 0x1000}, {"REG", 0x2000}, {"PROFILE", 0x4000}, {"RAS", 0x8000},
    {"ALL", ~0ull},
};

const char* levelName(int level) {
  switch (level) {
    case kLogVersion: return "VERSION";
    case kLogWarn: return "WARN";
    case kLogInfo: return "INFO";
    case kLogAbort: return "ABORT";
    case kLogTrace: return "TRACE";
    default: return "NONE";
  }
}

}  // namespace

LogSettings parseLogSettings(const char* ncclDebug, const char* ncclDebugSubsys) {
  LogSettings settings;
  if (ncclDebug != nullptr) {
    for (int level = kLogVersion; level <= kLogTrace; ++level) {
      if (strcasecmp(ncclDebug, levelName(level)) == 0) settings.level = level;
    }
  }
  if (ncclDebugSubsys != nullptr && ncclDebugSubsys[0] != '\0') {
    const char* list = ncclDebugSubsys;
    bool invert = false;
    if (list[0] == '^') {
      invert = true;
      ++list;
    }
    uint64_t mask = 0;
    std::string all(list);
    size_t start = 0;
    while (start <= all.size()) {
      size_t comma = all.find(',', start);
      std::string token = all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      for (const SubsysName& entry : kSubsysNames) {
        if (strcasecmp(token.c_str(), entry.name) == 0) mask |= entry.bit;
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    settings.subsysMask = invert ? ~mask : mask;
  }
  return settings;
}

namespace detail {
void initLogFromEnvironment() {
  LogSettings settings = parseLogSettings(getenv("NCCL_DEBUG"), getenv("NCCL_DEBUG_SUBSYS"));
  gLogSubsys.store(settings.subsysMask, std::memory_order_relaxed);
  gLogLevel.store(settings.level, std::memory_order_relaxed);
}
}  // namespace detail

void setNcclLogger(NcclDebugLogger logger) { gNcclLogger.store(logger, std::memory_order_release); }

void setLogDevice(int cudaDev) { tLogDevice = cudaDev; }

void setLogSettingsForTest(const LogSettings& settings) {
  detail::gLogSubsys.store(settings.subsysMask, std::memory_order_relaxed);
  detail::gLogLevel.store(settings.level, std::memory_order_relaxed);
}

void setLogSinkForTest(void (*sink)(const char* line)) { gSink.store(sink, std::memory_order_release); }

void logMessage(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);

  NcclDebugLogger ncclLogger = gNcclLogger.load(std::memory_order_acquire);
  if (ncclLogger != nullptr && gSink.load(std::memory_order_acquire) == nullptr) {
    // NCCL adds its own "host:pid:tid [dev] NCCL INFO" prefix and applies its own filters.
    ncclLogger(level, static_cast<unsigned long>(subsys), file, line, "Lamport: %s", message);
    return;
  }

  static char hostname[64] = {0};
  static std::once_flag hostOnce;
  std::call_once(hostOnce, [] {
    gethostname(hostname, sizeof(hostname) - 1);
    char* dot = strchr(hostname, '.');
    if (dot != nullptr) *dot = '\0';
  });
  const int pid = static_cast<int>(getpid());
  const int tid = static_cast<int>(syscall(SYS_gettid));
  char full[1280];
  if (level == kLogWarn) {
    const char* base = strrchr(file, '/');
    snprintf(full, sizeof(full), "%s:%d:%d [%d] %s:%d NCCL WARN Lamport: %s\n", hostname, pid, tid,
             tLogDevice, base ? base + 1 : file, line, message);
  } else {
    snprintf(full, sizeof(full), "%s:%d:%d [%d] NCCL %s Lamport: %s\n", hostname, pid, tid,
             tLogDevice, levelName(level), message);
  }
  void (*sink)(const char*) = gSink.load(std::memory_order_acquire);
  if (sink != nullptr) {
    sink(full);
  } else {
    fputs(full, stdout);
    fflush(stdout);
  }
}

}  // namespace nccl_lamport
