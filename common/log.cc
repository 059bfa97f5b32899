#include "common/log.h"
#include "common/log_file.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
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
std::atomic<int (*)()> gDeviceQuery{nullptr};
thread_local int tLogDevice = -1;

// Timestamp settings: read once with the level (initLogFromEnvironment), replaced by tests. A
// function-local object, not a global: constructors of this object (the preload one) log before
// the globals of this file are constructed.
std::mutex gTimestampMutex;  // constant-initialised
TimestampSettings& timestampSettings() {
  static TimestampSettings settings;
  return settings;
}
// TRACE lines carry the milliseconds since logging started, as NCCL's do since its debug init.
std::chrono::steady_clock::time_point logEpoch() {
  static const std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
  return epoch;
}

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

constexpr int kLevelCount = kLogTrace + 1;

}  // namespace

TimestampSettings parseTimestampSettings(const char* levels, const char* format) {
  TimestampSettings settings;
  if (levels != nullptr) {
    // As NCCL 2.28 reads it: a leading '^' means every level but those listed.
    const bool invert = levels[0] == '^';
    if (invert) ++levels;
    settings.levels = 0;
    std::string list(levels);
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      std::string token = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (strcasecmp(token.c_str(), "ALL") == 0) settings.levels |= (1u << kLevelCount) - 2;  // VERSION..TRACE
      for (int level = kLogVersion; level <= kLogTrace; ++level) {
        if (strcasecmp(token.c_str(), levelName(level)) == 0) settings.levels |= 1u << level;
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (invert) settings.levels = ((1u << kLevelCount) - 2) & ~settings.levels;
  }
  if (format != nullptr) {
    settings.format = format;
    for (char& c : settings.format) {
      if (c == '_') c = ' ';
    }
  }
  return settings;
}

std::string formatTimestamp(const std::string& format, long long seconds, long nanoseconds) {
  if (format.empty()) return "";
  // Put the fraction's digits in place of the first "%Nf", then let strftime do the rest.
  std::string expanded;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size() && format[i + 1] == '%') {
      expanded += "%%";
      ++i;
      continue;
    }
    if (format[i] == '%' && i + 2 < format.size() && format[i + 1] >= '1' && format[i + 1] <= '9' &&
        format[i + 2] == 'f') {
      const int digits = format[i + 1] - '0';
      long divisor = 1000000000L;
      for (int d = 0; d < digits; ++d) divisor /= 10;
      char fraction[16];
      snprintf(fraction, sizeof(fraction), "%0*ld", digits, nanoseconds / divisor);
      expanded += fraction;
      i += 2;
      continue;
    }
    expanded += format[i];
  }
  const time_t t = static_cast<time_t>(seconds);
  struct tm local;
  localtime_r(&t, &local);
  char out[256];
  size_t n = strftime(out, sizeof(out), expanded.c_str(), &local);
  if (n == 0) n = strftime(out, sizeof(out), "[%F %T] ", &local);  // too long: NCCL's default
  return std::string(out, n);
}

LogSettings parseLogSettings(const char* ncclDebug, const char* ncclDebugSubsys) {
  LogSettings settings;
  if (ncclDebug != nullptr) {
    for (int level = kLogVersion; level <= kLogTrace; ++level) {
      if (strcasecmp(ncclDebug, levelName(level)) == 0) settings.level = level;
    }
  }
  // Set but empty is an empty list, as NCCL reads it (src/debug.cc: the mask starts at 0, or at
  // all bits after '^', and no token changes it): no line of any subsystem, and (as in NCCL,
  // whose WARNs carry NCCL_ALL) no WARN either.
  if (ncclDebugSubsys != nullptr) {
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
  {
    std::lock_guard<std::mutex> lock(gTimestampMutex);
    timestampSettings() = parseTimestampSettings(getenv("NCCL_DEBUG_TIMESTAMP_LEVELS"), getenv("NCCL_DEBUG_TIMESTAMP_FORMAT"));
    logEpoch();  // TRACE milliseconds count from here
  }
  // NCCL opens NCCL_DEBUG_FILE only above VERSION: where our lines go depends on the level too.
  configureLogFile(getenv("NCCL_DEBUG_FILE"), settings.level);
  gLogSubsys.store(settings.subsysMask, std::memory_order_relaxed);
  gLogLevel.store(settings.level, std::memory_order_relaxed);
}
}  // namespace detail

void setNcclLogger(NcclDebugLogger logger) {
  // Lines still waiting for NCCL's file go first; the second hand-off takes a line that another
  // thread printed between the first one and the store (it would otherwise wait until exit).
  logFileHandOff(logger);
  gNcclLogger.store(logger, std::memory_order_release);
  logFileHandOff(logger);
}

void setLogDevice(int cudaDev) { tLogDevice = cudaDev; }

void setLogDeviceQuery(int (*query)()) { gDeviceQuery.store(query, std::memory_order_release); }

void setTimestampSettingsForTest(const TimestampSettings& settings) {
  std::lock_guard<std::mutex> lock(gTimestampMutex);
  timestampSettings() = settings;
}

void setLogSettingsForTest(const LogSettings& settings) {
  detail::gLogSubsys.store(settings.subsysMask, std::memory_order_relaxed);
  detail::gLogLevel.store(settings.level, std::memory_order_relaxed);
}

void setLogSinkForTest(void (*sink)(const char* line)) { gSink.store(sink, std::memory_order_release); }

namespace {

// Our own printer: one line as NCCL 2.28+ prints it, to the test sink, to NCCL_DEBUG_FILE (for
// stdout: common/log_file.h), or to `out`.
void printLine(int level, uint64_t subsys, const char* file, int line, const char* message, FILE* out) {
  const char* hostname = ncclStyleHostName();
  std::string timestamp;
  {
    std::lock_guard<std::mutex> lock(gTimestampMutex);
    if (level >= 0 && level < kLevelCount && (timestampSettings().levels & (1u << level)) != 0) {
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      timestamp = formatTimestamp(timestampSettings().format, now.tv_sec, now.tv_nsec);
    }
  }
  int device = tLogDevice;
  if (device < 0) {
    if (int (*query)() = gDeviceQuery.load(std::memory_order_acquire)) device = query();
  }
  const int pid = static_cast<int>(getpid());
  const int tid = static_cast<int>(syscall(SYS_gettid));
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char full[1400];
  if (level == kLogWarn) {
    snprintf(full, sizeof(full), "\n%s%s:%d:%d [%d] %s:%d NCCL WARN Lamport: %s\n", timestamp.c_str(), hostname,
             pid, tid, device, base, line, message);
  } else if (level == kLogTrace) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - logEpoch()).count();
    snprintf(full, sizeof(full), "%s%s:%d:%d [%d] %f %s:%d NCCL TRACE Lamport: %s\n", timestamp.c_str(), hostname,
             pid, tid, device, ms, base, line, message);
  } else if (level == kLogVersion) {
    snprintf(full, sizeof(full), "%sLamport: %s\n", timestamp.c_str(), message);
  } else {
    snprintf(full, sizeof(full), "%s%s:%d:%d [%d] NCCL %s Lamport: %s\n", timestamp.c_str(), hostname, pid, tid,
             device, levelName(level), message);
  }
  void (*sink)(const char*) = gSink.load(std::memory_order_acquire);
  if (sink != nullptr) {
    sink(full);
  } else if (out == stdout && routeLogLineToFile(LogFileLine{level, subsys, file, line, message, full})) {
    // in NCCL's file, or waiting for it
  } else {
    fputs(full, out);
    fflush(out);
  }
}

/** printLine, or where it throws (host memory: the timestamp, the file's queue) the bare message:
 *  a log line must never throw, as it is written from noexcept code and from catch blocks. */
void printLineOrMessage(int level, uint64_t subsys, const char* file, int line, const char* message, FILE* out) {
  try {
    printLine(level, subsys, file, line, message, out);
  } catch (...) {
    fprintf(out, "Lamport: %s\n", message);
    fflush(out);
  }
}

}  // namespace

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
  printLineOrMessage(level, subsys, file, line, message, stdout);
}

void logWarnAlways(const char* file, int line, const char* fmt, ...) {
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  if (logEnabled(kLogWarn, kSubsysAll)) {
    logMessage(kLogWarn, kSubsysAll, file, line, "%s", message);  // where every WARN goes
  } else {
    printLineOrMessage(kLogWarn, kSubsysAll, file, line, message, stderr);  // NCCL_DEBUG unset: not stdout, unasked
  }
}

}  // namespace nccl_lamport
