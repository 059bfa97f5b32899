// Where our own printer's lines go when NCCL_DEBUG_FILE is set: into NCCL's debug file, through
// NCCL's own open file, never through a second open of that name.
//
// Why not simply open the file ourselves: NCCL 2.28 opens it with fopen(name, "w") at its first
// log call (truncating it), and writes at the offset of its own open file description. Lines we
// wrote before that would be wiped, and lines appended through another description would be
// overwritten by NCCL's next ones. So:
//  - until NCCL has opened the file, our lines wait in a bounded in-memory buffer (pending);
//  - NCCL's descriptor is found by matching /proc/self/fd/* against the expanded name (device and
//    inode), only while lines are pending: at our next line, at logFileCheckpoint() (called
//    after our calls into NCCL's init paths) and when NCCL hands us its logger;
//  - from then on we write through a dup() of that descriptor: it shares NCCL's file offset, and
//    NCCL's stream is line-buffered (one write() per line), so neither side overwrites the other;
//    when NCCL truncates and reopens the file (ncclResetDebugInit) we notice and look again;
//  - when NCCL hands us its logger, lines still pending (NCCL has no file: it writes to stdout)
//    are replayed through that logger;
//  - at exit (or when our library is unloaded) lines still pending go to NCCL's file if it is now
//    open, else are appended to the file of that name opened by us (NCCL never opened it in this
//    process, so it will not truncate it later; appending keeps what other processes wrote
//    there), else to stdout, where NCCL writes when it cannot open the file;
//  - when the buffer is full, its lines go to stdout (in order) and buffering starts again.
// A forked child starts with nothing pending: the parent's lines are the parent's to write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/log.h"

namespace nccl_lamport {

/** Bytes of formatted lines (plus a small header each) kept while NCCL's file is not open yet. */
constexpr size_t kPendingLogBytes = 64 * 1024;

/** The host name as NCCL 2.28 prints it and puts in "%h": gethostname() cut at the first '.',
 *  "unknown" when gethostname fails. Computed once per process; never null. */
const char* ncclStyleHostName();

/**
 * NCCL_DEBUG_FILE's value expanded as NCCL 2.28 expands it: "%h" the host name, "%p" the pid,
 * "%%" one '%', any other "%x" (and a trailing '%') kept as written; cut at PATH_MAX characters.
 * Empty when `pattern` is null or empty (NCCL then opens nothing).
 */
std::string expandDebugFileName(const char* pattern, const char* host, int pid);

/** One line of our printer, as the file router needs it. */
struct LogFileLine {
  int level;             // LogLevel
  uint64_t subsys;       // LogSubsys bits
  const char* file;      // __FILE__ of the call (a literal: lives as long as our library)
  int line;              // __LINE__ of the call
  const char* message;   // the caller's text, without NCCL's or our prefix
  const char* text;      // the whole formatted line, newline(s) included
};

/**
 * Reads NCCL_DEBUG_FILE (null or empty: none) for the current level (NCCL opens its file only
 * above VERSION). Called when the level is read from the environment; lines already pending
 * stay pending when the file is still wanted, else go to stdout.
 */
void configureLogFile(const char* debugFilePattern, int level);

/**
 * Takes one line of our printer: returns true when it was written to NCCL's file or is pending
 * for it, false when no file is wanted and the caller prints it itself (stdout). Thread-safe.
 */
bool routeLogLineToFile(const LogFileLine& line);

/**
 * Called after our calls into NCCL's init paths: if lines are pending and NCCL has opened its
 * file meanwhile, writes them there. One relaxed atomic load when nothing is pending.
 */
void logFileCheckpoint();

/**
 * NCCL handed us its logger: pending lines go to NCCL's file when it is open, else through
 * `logger` (NCCL writes them where it writes its own). Null: nothing happens.
 */
void logFileHandOff(NcclDebugLogger logger);

}  // namespace nccl_lamport
