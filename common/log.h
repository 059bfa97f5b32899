// Logging in NCCL's own format and through NCCL's own logger once NCCL hands it to us.
//
// Before NCCL calls the tuner's init (and in processes where it never does) we print lines as
// NCCL 2.28+ prints its own (src/debug.cc): an optional timestamp (NCCL_DEBUG_TIMESTAMP_LEVELS,
// default WARN only; NCCL_DEBUG_TIMESTAMP_FORMAT, default "[%F %T] ", '_' read as a space, %1f..%9f
// for fractions of a second), then "host:pid:tid [dev] NCCL INFO Lamport: ...", a WARN with
// "file:line" and a blank line before it, a TRACE with the milliseconds since logging started;
// honouring NCCL_DEBUG and NCCL_DEBUG_SUBSYS exactly as NCCL parses them. With NCCL_DEBUG_FILE set
// (and NCCL_DEBUG above VERSION) those lines go into NCCL's debug file instead of stdout, held back
// until NCCL has opened it (common/log_file.h). The level test happens before any formatting,
// so a disabled log line costs one relaxed load and a compare on the hot path.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace nccl_lamport {

/** NCCL's log levels (ncclDebugLogLevel); the numeric values are NCCL's ABI. */
enum LogLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};

/** NCCL's subsystem bits (ncclDebugLogSubSys); values are NCCL's ABI. */
enum LogSubsys : uint64_t {
  kSubsysInit = 0x1,
  kSubsysColl = 0x2,
  kSubsysP2p = 0x4,
  kSubsysTuning = 0x40,
  kSubsysEnv = 0x80,
  kSubsysAlloc = 0x100,
  kSubsysAll = ~0ull,
};

/** NCCL's logger type, as passed to tuner init (ncclDebugLogger_t). */
typedef void (*NcclDebugLogger)(int level, unsigned long flags, const char* file, int line,
                                const char* fmt, ...);

/** What NCCL_DEBUG / NCCL_DEBUG_SUBSYS select. */
struct LogSettings {
  int level = kLogNone;
  uint64_t subsysMask = kSubsysInit | kSubsysEnv | 0x1000 /*BOOTSTRAP*/;
};

/**
 * Parses NCCL_DEBUG (VERSION|WARN|INFO|ABORT|TRACE, any case; unknown: none) and NCCL_DEBUG_SUBSYS
 * (comma list of NCCL subsystem names, optional leading '^' to invert, ALL). Either may be null.
 */
LogSettings parseLogSettings(const char* ncclDebug, const char* ncclDebugSubsys);

/** Which levels get a timestamp, and its strftime format (NCCL_DEBUG_TIMESTAMP_*). */
struct TimestampSettings {
  uint32_t levels = 1u << kLogWarn;  // bit (1 << level)
  std::string format = "[%F %T] ";
};

/** Parses NCCL_DEBUG_TIMESTAMP_LEVELS (comma list of VERSION/WARN/INFO/ABORT/TRACE/ALL, any case,
 *  optional leading '^' to invert; unknown names ignored) and NCCL_DEBUG_TIMESTAMP_FORMAT ('_' becomes a space; empty: no
 *  timestamp). Either may be null (NCCL's default). */
TimestampSettings parseTimestampSettings(const char* levels, const char* format);

/** The timestamp prefix for a wall-clock time (seconds, nanoseconds), local time: "%Nf" (N 1..9)
 *  gives the first N digits of the fraction. Empty when the format is empty. */
std::string formatTimestamp(const std::string& format, long long seconds, long nanoseconds);

namespace detail {
extern std::atomic<int> gLogLevel;            // -1 until initialised from the environment
extern std::atomic<uint64_t> gLogSubsys;
void initLogFromEnvironment();
}  // namespace detail

/** True if a message of this level and subsystem would be printed. Cheap; call before formatting. */
inline bool logEnabled(int level, uint64_t subsys) {
  int current = detail::gLogLevel.load(std::memory_order_relaxed);
  if (current < 0) {
    detail::initLogFromEnvironment();
    current = detail::gLogLevel.load(std::memory_order_relaxed);
  }
  if (level > current) return false;
  const uint64_t mask = detail::gLogSubsys.load(std::memory_order_relaxed);
  // WARN and VERSION lines count for every subsystem, as NCCL's (NCCL_ALL): only an empty mask
  // (NCCL_DEBUG_SUBSYS="" or "^ALL") drops them.
  if (level == kLogWarn || level == kLogVersion) return mask != 0;
  return (mask & subsys) != 0;
}

/** Formats and prints one line. Prefer the LAMPORT_* macros, which test logEnabled() first. */
void logMessage(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

/** Routes later messages through NCCL's logger (null: back to our own printer); lines still waiting
 *  for NCCL_DEBUG_FILE go to NCCL's file, or through `logger`, first. Thread-safe. */
void setNcclLogger(NcclDebugLogger logger);

/** Prints one WARN line even when NCCL_DEBUG would hide it (our own printer, on stderr, when the
 *  level is below WARN): for the few mistakes a user must see, such as an unknown value of the
 *  A/B switch. Prefer LAMPORT_WARN_ALWAYS. */
void logWarnAlways(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/** The CUDA device printed in the "[dev]" field of our own lines on this thread (-1: unknown, then
 *  the device query below is asked). */
void setLogDevice(int cudaDev);

/** How our printer asks the calling thread's current CUDA device when setLogDevice did not say
 *  (returns -1 when it cannot tell). Installed by the plugin once CUDA is known to be initialised
 *  (a communicator exists), so logging never initialises CUDA itself; null: "[-1]". */
void setLogDeviceQuery(int (*query)());

/** Replaces the timestamp settings (tests only). */
void setTimestampSettingsForTest(const TimestampSettings& settings);

/** Replaces the settings (tests only). */
void setLogSettingsForTest(const LogSettings& settings);

/** Where our own printer writes (tests only; null: stdout or NCCL_DEBUG_FILE, as NCCL does). */
void setLogSinkForTest(void (*sink)(const char* line));

}  // namespace nccl_lamport

#define LAMPORT_LOG_(level, subsys, ...)                                                       \
  do {                                                                                         \
    if (::nccl_lamport::logEnabled((level), (subsys)))                                         \
      ::nccl_lamport::logMessage((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)

#define LAMPORT_WARN_ALWAYS(...) ::nccl_lamport::logWarnAlways(__FILE__, __LINE__, __VA_ARGS__)
#define LAMPORT_WARN(...) LAMPORT_LOG_(::nccl_lamport::kLogWarn, ::nccl_lamport::kSubsysAll, __VA_ARGS__)
#define LAMPORT_INFO(subsys, ...) LAMPORT_LOG_(::nccl_lamport::kLogInfo, (subsys), __VA_ARGS__)
#define LAMPORT_TRACE(subsys, ...) LAMPORT_LOG_(::nccl_lamport::kLogTrace, (subsys), __VA_ARGS__)
