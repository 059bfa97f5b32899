// Inline hooks on the exported entry points of a loaded library (tuner activation, docs/tuner-activation.md):
// the first bytes of each entry become a jump to a replacement function, and a trampoline (the
// relocated first instructions followed by a jump back) still runs the original. Every caller
// reaches the replacement, however it found the function: through the PLT, a pointer it took
// earlier, or a dlsym on a handle.
//
// All or nothing: install() first decodes every entry, allocates every trampoline and makes
// every entry page writable; only when all of that succeeded does it write a single byte, and
// writing cannot fail after that. Any failure leaves every entry as it was.
//
// Writing while other threads call the entries (the order of the Linux kernel's text_poke_bp):
// an int3 goes on the first byte (one byte: no later instruction boundary is touched; a thread
// that hits it is sent on to the replacement by a SIGTRAP handler), then, after a 50 ms grace
// period for threads already past the first instruction, the other bytes of the jump, then the
// first byte; each step is followed by a core-serialising membarrier(2) (a short sleep where the
// kernel lacks it). UCX's order (a 2-byte self-jump first) is not enough: real entries start
// with a 1-byte push (NCCL 2.28.9's pncclCommInitRank), and the self-jump's second byte breaks a
// thread just past it (SIGILL in the 8-thread test). The SIGTRAP handler, once installed, stays
// (a thread that executed the int3 may be preempted before its signal is delivered); traps that
// are not ours go to the handler the process had before. What this cannot exclude: a thread
// descheduled for longer than the grace period between two overwritten instructions (UCX has
// the same limit), or a thread that blocks SIGTRAP.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nccl_lamport::hooks {

/** One entry point to hook. */
struct EntryHook {
  const char* name = nullptr;   // for log lines and errors
  void* entry = nullptr;        // the function's address in the loaded library
  void* replacement = nullptr;  // where callers go from now on
  void* original = nullptr;     // out: the trampoline that runs the original function
  /** Optional: receives the trampoline (a release store) before the entry jump is written, so a
   *  replacement that reads it never sees null. Untouched when install() fails. */
  void** publishOriginal = nullptr;
};

/**
 * A set of hooks installed together. The object owns the trampoline pages; the hooks stay until
 * remove() (in production never: the object that holds the replacements pins itself in memory).
 * Not thread-safe itself: install and remove from one thread at a time.
 */
class EntryHookSet {
 public:
  EntryHookSet() = default;
  EntryHookSet(const EntryHookSet&) = delete;
  EntryHookSet& operator=(const EntryHookSet&) = delete;
  ~EntryHookSet() = default;  // deliberately leaves installed hooks (and their pages) in place

  /**
   * Installs every hook in `hooks` (filling in each `original`), or none. Returns false with a
   * reason naming the entry in *why when an entry cannot be relocated, no trampoline page fits
   * within +-2 GiB of it, or mprotect refuses to make its page writable; nothing is then
   * changed. Fails when this set is already installed. x86-64 only (false elsewhere).
   * `committed`, when given, is set (a release store) once nothing can fail any more, before the
   * first byte is written: a replacement reached through a hook always sees it set. Untouched
   * when install() fails.
   */
  bool install(std::vector<EntryHook>& hooks, std::string* why, std::atomic<bool>* committed = nullptr);

  /** Restores every entry's original bytes (same safe order). The trampoline pages stay mapped
   *  (a caller may still run in one). False when a page could not be made writable again (the
   *  hooks then stay). */
  bool remove(std::string* why);

  [[nodiscard]] bool installed() const { return !patches_.empty(); }

 private:
  struct Patch {
    uint8_t* site = nullptr;
    std::vector<uint8_t> saved;    // the original bytes at site
    std::vector<uint8_t> written;  // the jump
  };
  std::vector<Patch> patches_;
  std::vector<void*> pages_;  // trampoline pages (one per +-2 GiB neighbourhood)
  std::vector<uintptr_t> resumeOriginal_;  // per patch: where a caller trapped while removing goes
};

}  // namespace nccl_lamport::hooks
