#include "common/log_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace nccl_lamport {

namespace {

// All state below is plain static storage (no constructors or destructors): our library's
// constructors log before this file's dynamic initialisers would run, and the exit handler runs
// after destructors of function-local statics may have.
std::mutex gMutex;                       // guards everything below; constant-initialised
bool gWanted = false;                    // NCCL_DEBUG_FILE set and the level above VERSION
char gPattern[PATH_MAX + 1];             // NCCL_DEBUG_FILE as given (expanded at each lookup:
                                         // the pid changes in a forked child)
int gAttachedFd = -1;                    // our dup() of NCCL's descriptor, -1: none yet
int gNcclFd = -1;                        // NCCL's descriptor that gAttachedFd duplicates
dev_t gAttachedDev = 0;                  // what gAttachedFd referred to when we took it, to notice
ino_t gAttachedIno = 0;                  // a descriptor closed behind our back and reused
char gPending[kPendingLogBytes];         // records: RecordHeader, text, '\0', message, '\0'
size_t gPendingUsed = 0;                 // bytes of gPending in use
std::atomic<bool> gHasPending{false};    // gPendingUsed != 0, readable without the mutex
bool gHandlersInstalled = false;         // atexit and pthread_atfork, once per process

struct RecordHeader {
  int level;
  int line;
  uint64_t subsys;
  const char* file;
  uint32_t textLength;     // without the '\0'
  uint32_t messageLength;  // without the '\0'
};

// Visits each pending record in order.
template <typename Visit>
void forEachPending(Visit visit) {
  size_t at = 0;
  while (at < gPendingUsed) {
    RecordHeader header;
    memcpy(&header, gPending + at, sizeof(header));
    const char* text = gPending + at + sizeof(header);
    const char* message = text + header.textLength + 1;
    visit(header, text, message);
    at += sizeof(header) + header.textLength + 1 + header.messageLength + 1;
  }
}

void clearPending() {
  gPendingUsed = 0;
  gHasPending.store(false, std::memory_order_relaxed);
}

// True when all `length` bytes were written.
bool writeAll(int fd, const char* data, size_t length) {
  while (length > 0) {
    const ssize_t n = write(fd, data, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    length -= static_cast<size_t>(n);
  }
  return true;
}

// Where NCCL writes when it has no file. Through stdio, as our printer writes there otherwise,
// so the order with the program's own stdout output is kept.
void writeToStdout(const char* text) {
  fputs(text, stdout);
  fflush(stdout);
}

// Writes the pending records to fd (or stdout for fd < 0, or for what fd refuses), then clears.
void drainPendingTo(int fd) {
  bool fdWorks = fd >= 0;
  forEachPending([&](const RecordHeader& header, const char* text, const char*) {
    if (fdWorks) fdWorks = writeAll(fd, text, header.textLength);
    if (!fdWorks) writeToStdout(text);
  });
  clearPending();
}

// Our dup() of NCCL's descriptor, or -1. Forgets it when the number no longer refers to the file
// we took (someone closed it and the number was reused): never close what is not ours then.
// Drops it when NCCL's descriptor no longer shares its offset, i.e. NCCL closed or reopened its
// file (ncclResetDebugInit: fclose, then fopen "w" again): writing at the old offset would leave a
// hole in the truncated file or overwrite NCCL's new lines. Then the next line looks again.
int attachedFd() {
  if (gAttachedFd < 0) return -1;
  struct stat ours;
  if (fstat(gAttachedFd, &ours) != 0 || ours.st_dev != gAttachedDev || ours.st_ino != gAttachedIno) {
    gAttachedFd = -1;
    return -1;
  }
  // One open file description has one offset: ours and NCCL's differ only when they are two.
  struct stat theirs;
  const off_t offset = lseek(gAttachedFd, 0, SEEK_CUR);
  if (fstat(gNcclFd, &theirs) != 0 || theirs.st_dev != gAttachedDev || theirs.st_ino != gAttachedIno ||
      offset < 0 || lseek(gNcclFd, 0, SEEK_CUR) != offset || offset > ours.st_size) {
    close(gAttachedFd);
    gAttachedFd = -1;
  }
  return gAttachedFd;
}

// Looks for NCCL's open descriptor of the expanded name: a regular file open write-only without
// O_APPEND (fopen "w"), same device and inode. On success keeps a close-on-exec dup() of it.
bool findNcclDescriptor() {
  if (attachedFd() >= 0) return true;
  const std::string name = expandDebugFileName(gPattern, ncclStyleHostName(), static_cast<int>(getpid()));
  struct stat target;
  if (name.empty() || stat(name.c_str(), &target) != 0 || !S_ISREG(target.st_mode)) return false;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  int found = -1;
  while (struct dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || st.st_dev != target.st_dev || st.st_ino != target.st_ino) continue;
    const int flags = fcntl(static_cast<int>(fd), F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) != O_WRONLY || (flags & O_APPEND) != 0) continue;
    found = static_cast<int>(fd);
    break;
  }
  closedir(dir);
  if (found < 0) return false;
  const int copy = fcntl(found, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return false;
  gAttachedFd = copy;
  gNcclFd = found;
  gAttachedDev = target.st_dev;
  gAttachedIno = target.st_ino;
  return true;
}

// Called with gMutex held. If NCCL's file is open now, writes the pending lines there.
bool drainIfNcclFileOpen() {
  if (gPendingUsed == 0 || !findNcclDescriptor()) return false;
  drainPendingTo(gAttachedFd);
  return true;
}

void appendPending(const LogFileLine& line) {
  const size_t textLength = strlen(line.text);
  const size_t messageLength = strlen(line.message);
  const size_t size = sizeof(RecordHeader) + textLength + 1 + messageLength + 1;
  if (size > kPendingLogBytes) {  // cannot happen with our 1 KiB messages; never drop it
    writeToStdout(line.text);
    return;
  }
  // Full: the oldest lines go where NCCL writes without a file, rather than being dropped.
  if (gPendingUsed + size > kPendingLogBytes) drainPendingTo(-1);
  const RecordHeader header{line.level, line.line, line.subsys, line.file, static_cast<uint32_t>(textLength),
                            static_cast<uint32_t>(messageLength)};
  char* at = gPending + gPendingUsed;
  memcpy(at, &header, sizeof(header));
  memcpy(at + sizeof(header), line.text, textLength + 1);
  memcpy(at + sizeof(header) + textLength + 1, line.message, messageLength + 1);
  gPendingUsed += size;
  gHasPending.store(true, std::memory_order_relaxed);
}

// At exit (or when our library is unloaded): nothing pending may be lost.
void writePendingAtExit() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gPendingUsed == 0) return;
  if (!gWanted) return drainPendingTo(-1);
  if (drainIfNcclFileOpen()) return;
  // NCCL never opened the file in this process (it will not any more), or could not: open it
  // ourselves. Appending, not truncating as NCCL would: without "%p" other processes (ranks, or
  // this one's children) may share the name, and their lines must not be wiped by ours. Where the
  // open fails too, NCCL's own lines went to stdout, and so do ours.
  const std::string name = expandDebugFileName(gPattern, ncclStyleHostName(), static_cast<int>(getpid()));
  const int fd = name.empty() ? -1 : open(name.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  drainPendingTo(fd);
  if (fd >= 0) close(fd);
}

// fork(): the child must not inherit a locked mutex, nor write the parent's pending lines again.
void beforeFork() { gMutex.lock(); }
void afterForkInParent() { gMutex.unlock(); }
void afterForkInChild() {
  clearPending();
  gMutex.unlock();
}

}  // namespace

const char* ncclStyleHostName() {
  static char host[1024];
  static std::once_flag once;
  std::call_once(once, [] {
    if (gethostname(host, sizeof(host)) != 0) {
      snprintf(host, sizeof(host), "unknown");
      return;
    }
    host[sizeof(host) - 1] = '\0';
    if (char* dot = strchr(host, '.')) *dot = '\0';
  });
  return host;
}

std::string expandDebugFileName(const char* pattern, const char* host, int pid) {
  std::string name;
  if (pattern == nullptr) return name;
  for (size_t i = 0; pattern[i] != '\0' && name.size() < PATH_MAX; ++i) {
    if (pattern[i] != '%') {
      name += pattern[i];
      continue;
    }
    const char next = pattern[i + 1];
    if (next == '\0') {  // a '%' at the end stays
      name += '%';
      break;
    }
    ++i;
    if (next == '%') {
      name += '%';
    } else if (next == 'h') {
      name += host;
    } else if (next == 'p') {
      name += std::to_string(pid);
    } else {  // unknown: kept as written
      name += '%';
      name += next;
    }
  }
  if (name.size() > PATH_MAX) name.resize(PATH_MAX);
  return name;
}

void configureLogFile(const char* debugFilePattern, int level) {
  std::lock_guard<std::mutex> lock(gMutex);
  const bool wanted = debugFilePattern != nullptr && debugFilePattern[0] != '\0' && level > kLogVersion &&
                      strlen(debugFilePattern) <= PATH_MAX;
  if (wanted && strcmp(gPattern, debugFilePattern) != 0) {
    snprintf(gPattern, sizeof(gPattern), "%s", debugFilePattern);
    if (attachedFd() >= 0) close(gAttachedFd);  // another file: look again
    gAttachedFd = -1;
  }
  gWanted = wanted;
  if (!wanted && gPendingUsed != 0) drainPendingTo(-1);
  if (wanted && !gHandlersInstalled) {
    // atexit from a shared library runs at its dlclose too (glibc keys it to our object).
    atexit(writePendingAtExit);
    pthread_atfork(beforeFork, afterForkInParent, afterForkInChild);
    gHandlersInstalled = true;
  }
}

bool routeLogLineToFile(const LogFileLine& line) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gWanted) return false;
  const int fd = attachedFd();
  if (fd >= 0) {
    if (!writeAll(fd, line.text, strlen(line.text))) writeToStdout(line.text);
    return true;
  }
  appendPending(line);
  drainIfNcclFileOpen();
  return true;
}

void logFileCheckpoint() {
  if (!gHasPending.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(gMutex);
  drainIfNcclFileOpen();
}

void logFileHandOff(NcclDebugLogger logger) {
  if (logger == nullptr || !gHasPending.load(std::memory_order_relaxed)) return;
  struct Replayed {
    RecordHeader header;
    std::string message;
  };
  std::vector<Replayed> replay;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (drainIfNcclFileOpen() || gPendingUsed == 0) return;
    // NCCL has logged by now (it loads tuners inside a communicator's init) and has no file
    // open: it writes to stdout. Its logger puts our lines wherever it puts its own.
    forEachPending([&](const RecordHeader& header, const char*, const char* message) {
      replay.push_back({header, std::string(message, header.messageLength)});
    });
    clearPending();
  }
  // Outside our mutex: NCCL's logger takes its own.
  for (const Replayed& r : replay) {
    logger(r.header.level, static_cast<unsigned long>(r.header.subsys), r.header.file, r.header.line, "Lamport: %s",
           r.message.c_str());
  }
}


}  // namespace nccl_lamport
