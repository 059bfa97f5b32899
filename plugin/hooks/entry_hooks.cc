#include "plugin/hooks/entry_hooks.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <atomic>
#include <cstdio>
#include <cstring>

#if defined(__linux__)
#include <linux/membarrier.h>
#endif

#include "plugin/hooks/prologue_relocator.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace nccl_lamport::hooks {

#if defined(__x86_64__)

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kSlotBytes = 128;  // a 16-byte stub (jmp [rip]; .quad replacement) + trampoline
constexpr size_t kStubBytes = 16;
static_assert(kStubBytes + kMaxTrampolineBytes <= kSlotBytes, "slot too small");
constexpr size_t kSlotsPerPage = kPage / kSlotBytes;
// Trampolines sit within this distance of the entry, so that their own rel32 branches and
// RIP-relative operands still reach anything in the library (which is far smaller than this).
constexpr int64_t kNearReach = int64_t(1) << 30;
// How far past the entry we read: prologue + the branch scan, never past the entry's mapping.
constexpr size_t kReadBytes = 192;
// Time for threads already past the first overwritten instruction to leave the patched bytes.
// A thread preempted there runs again within a few scheduler periods even on an oversubscribed
// host (measured: 2 ms was too short with 9 busy threads on 2 cores, one install in five
// crashed); hooks go in once per process, so 50 ms of NCCL init time is the price.
constexpr useconds_t kGraceMicroseconds = 50000;

struct Region {
  uintptr_t start = 0;
  uintptr_t end = 0;
  int prot = 0;
};

std::vector<Region> readMaps() {
  std::vector<Region> regions;
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return regions;
  char line[512];
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long start = 0, end = 0;
    char perms[5] = {0};
    if (std::sscanf(line, "%lx-%lx %4s", &start, &end, perms) != 3) continue;
    Region r;
    r.start = start;
    r.end = end;
    r.prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
             (perms[2] == 'x' ? PROT_EXEC : 0);
    regions.push_back(r);
  }
  std::fclose(maps);
  std::sort(regions.begin(), regions.end(), [](const Region& a, const Region& b) { return a.start < b.start; });
  return regions;
}

const Region* regionOf(const std::vector<Region>& regions, uintptr_t address) {
  for (const Region& r : regions) {
    if (address >= r.start && address < r.end) return &r;
  }
  return nullptr;
}

int64_t distance(uintptr_t a, uintptr_t b) {
  return a > b ? static_cast<int64_t>(a - b) : static_cast<int64_t>(b - a);
}

// A fresh read-write page within kNearReach of target, in a gap of the address space.
void* mapPageNear(uintptr_t target) {
  const std::vector<Region> regions = readMaps();
  std::vector<uintptr_t> candidates;
  uintptr_t previousEnd = 0x10000;
  for (const Region& r : regions) {
    if (r.start >= previousEnd + kPage) {
      // The gap [previousEnd, r.start): its page nearest to target.
      const uintptr_t low = previousEnd;
      const uintptr_t high = r.start - kPage;
      candidates.push_back(target < low ? low : (target > high ? high : target & ~(kPage - 1)));
    }
    previousEnd = std::max(previousEnd, r.end);
  }
  std::sort(candidates.begin(), candidates.end(),
            [target](uintptr_t a, uintptr_t b) { return distance(a, target) < distance(b, target); });
  for (uintptr_t candidate : candidates) {
    if (distance(candidate, target) > kNearReach) break;
    void* page = mmap(reinterpret_cast<void*>(candidate), kPage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (page == MAP_FAILED) continue;
    // Kernels older than 4.17 take the flag as a plain hint and may map elsewhere.
    if (distance(reinterpret_cast<uintptr_t>(page), target) <= kNearReach) return page;
    munmap(page, kPage);
  }
  return nullptr;
}

// Makes every core that runs this process's threads refetch instructions (membarrier's
// SYNC_CORE, Linux 4.16+); where the kernel refuses it, a short sleep has to do.
void serializeAllCores() {
  static const bool registered =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
  if (registered && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0) return;
  usleep(1000);
}

struct PageSpan {
  uintptr_t start;
  size_t length;
  int prot;  // protection to restore
};

bool setProtection(const std::vector<PageSpan>& spans, bool writable, size_t* done, std::string* why) {
  for (*done = 0; *done < spans.size(); ++*done) {
    const PageSpan& s = spans[*done];
    const int prot = writable ? (s.prot | PROT_WRITE | PROT_EXEC) : s.prot;
    if (mprotect(reinterpret_cast<void*>(s.start), s.length, prot) != 0) {
      if (why != nullptr) {
        *why = std::string("mprotect refused to make code writable: ") + std::strerror(errno);
      }
      return false;
    }
  }
  return true;
}

}  // namespace

namespace {

// Every site ever written, and where a thread that hits the int3 at it continues: the stub when
// installing, the trampoline when removing (both stay valid for ever: pages are never unmapped).
// The handler stays installed once set: a thread that executed the int3 may be preempted before
// its SIGTRAP is delivered, so no moment is safe to take the handler away again.
constexpr size_t kMaxSites = 4096;
std::atomic<size_t> gTrapCount{0};
uintptr_t gTrapSite[kMaxSites];
uintptr_t gTrapResume[kMaxSites];
struct sigaction gPreviousTrapAction;
std::once_flag gTrapHandlerOnce;

void onTrap(int signo, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  const uintptr_t trapped = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]) - 1;  // after the int3
  // Newest first: a site written several times resumes where its latest write says.
  for (size_t i = gTrapCount.load(std::memory_order_acquire); i > 0; --i) {
    if (gTrapSite[i - 1] == trapped) {
      uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(gTrapResume[i - 1]);
      return;
    }
  }
  // Not ours: what the process had before.
  if ((gPreviousTrapAction.sa_flags & SA_SIGINFO) && gPreviousTrapAction.sa_sigaction != nullptr) {
    gPreviousTrapAction.sa_sigaction(signo, info, context);
  } else if (gPreviousTrapAction.sa_handler != SIG_IGN && gPreviousTrapAction.sa_handler != SIG_DFL) {
    gPreviousTrapAction.sa_handler(signo);
  } else {
    sigaction(SIGTRAP, &gPreviousTrapAction, nullptr);
    raise(SIGTRAP);
  }
}

// Records the sites (false when the table is full: the caller then must not write an int3).
bool recordTrapSites(const std::vector<uint8_t*>& sites, const std::vector<uintptr_t>& resume) {
  std::call_once(gTrapHandlerOnce, [] {
    struct sigaction trap {};
    trap.sa_sigaction = onTrap;
    trap.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&trap.sa_mask);
    sigaction(SIGTRAP, &trap, &gPreviousTrapAction);
  });
  const size_t n = gTrapCount.load(std::memory_order_relaxed);
  if (n + sites.size() > kMaxSites) return false;
  for (size_t i = 0; i < sites.size(); ++i) {
    gTrapSite[n + i] = reinterpret_cast<uintptr_t>(sites[i]);
    gTrapResume[n + i] = resume[i];
  }
  gTrapCount.store(n + sites.size(), std::memory_order_release);
  return true;
}

// Writes each patch's `bytes` over its site in the order that keeps concurrent callers safe
// (the kernel's text_poke_bp order): an int3 on the first byte (one byte, so no instruction
// boundary after it is touched; a thread that hits it is sent on by onTrap), then the other
// bytes once threads already past the first instruction have left them, then the first byte.
// Every site's pages are writable.
void writePatches(const std::vector<uint8_t*>& sites, const std::vector<const std::vector<uint8_t>*>& bytes) {
  for (uint8_t* site : sites) __atomic_store_n(site, static_cast<uint8_t>(0xCC), __ATOMIC_RELEASE);
  serializeAllCores();
  // Yield in small steps, so preempted threads get the CPU back sooner than a single sleep would.
  for (useconds_t waited = 0; waited < kGraceMicroseconds; waited += 1000) {
    sched_yield();
    usleep(1000);
  }
  for (size_t i = 0; i < sites.size(); ++i) std::memcpy(sites[i] + 1, bytes[i]->data() + 1, bytes[i]->size() - 1);
  serializeAllCores();
  for (size_t i = 0; i < sites.size(); ++i) __atomic_store_n(sites[i], (*bytes[i])[0], __ATOMIC_RELEASE);
  serializeAllCores();
}

std::vector<PageSpan> spansOf(const std::vector<uint8_t*>& sites, size_t bytes,
                              const std::vector<Region>& regions) {
  std::vector<PageSpan> spans;
  for (uint8_t* site : sites) {
    const uintptr_t first = reinterpret_cast<uintptr_t>(site) & ~(kPage - 1);
    const uintptr_t last = (reinterpret_cast<uintptr_t>(site) + bytes - 1) & ~(kPage - 1);
    for (uintptr_t page = first; page <= last; page += kPage) {
      const Region* r = regionOf(regions, page);
      const int prot = r != nullptr ? r->prot : (PROT_READ | PROT_EXEC);
      const bool seen = std::any_of(spans.begin(), spans.end(), [page](const PageSpan& s) { return s.start == page; });
      if (!seen) spans.push_back(PageSpan{page, kPage, prot});
    }
  }
  return spans;
}

}  // namespace

bool EntryHookSet::install(std::vector<EntryHook>& hooks, std::string* why, std::atomic<bool>* committed) {
  if (installed()) {
    *why = "hooks already installed";
    return false;
  }
  const std::vector<Region> regions = readMaps();
  struct Planned {
    uint8_t* site;
    uint8_t* slot;
    RelocatedPrologue prologue;
    std::vector<uint8_t> jump;
    std::vector<uint8_t> saved;
  };
  std::vector<Planned> plan;
  std::vector<void*> pages;
  std::vector<size_t> used;  // slots used per page
  auto fail = [&](const std::string& reason) {
    for (void* page : pages) munmap(page, kPage);
    *why = reason;
    return false;
  };

  for (EntryHook& hook : hooks) {
    const std::string name = hook.name != nullptr ? hook.name : "?";
    const auto entry = reinterpret_cast<uintptr_t>(hook.entry);
    const Region* region = regionOf(regions, entry);
    if (hook.entry == nullptr || hook.replacement == nullptr || region == nullptr ||
        (region->prot & PROT_EXEC) == 0) {
      return fail(name + ": not an executable address");
    }
    // A trampoline page near this entry: reuse one of ours with a free slot, else map one.
    size_t pageIndex = pages.size();
    for (size_t i = 0; i < pages.size(); ++i) {
      if (used[i] < kSlotsPerPage && distance(reinterpret_cast<uintptr_t>(pages[i]), entry) <= kNearReach) {
        pageIndex = i;
        break;
      }
    }
    if (pageIndex == pages.size()) {
      void* page = mapPageNear(entry);
      if (page == nullptr) return fail(name + ": no free page within 1 GiB for its trampoline");
      pages.push_back(page);
      used.push_back(0);
    }
    uint8_t* slot = static_cast<uint8_t*>(pages[pageIndex]) + used[pageIndex]++ * kSlotBytes;

    Planned p;
    p.slot = slot;
    const size_t available = std::min<size_t>(kReadBytes, region->end - entry);
    std::string reason;
    if (!relocatePrologue(static_cast<const uint8_t*>(hook.entry), available, entry,
                          reinterpret_cast<uintptr_t>(slot + kStubBytes), kEntryJumpBytes, &p.prologue,
                          &reason)) {
      return fail(name + ": " + reason);
    }
    p.site = static_cast<uint8_t*>(hook.entry) + p.prologue.patchOffset;
    appendJump(&p.jump, reinterpret_cast<uintptr_t>(p.site), reinterpret_cast<uintptr_t>(slot));
    if (p.jump.size() != kEntryJumpBytes) return fail(name + ": trampoline out of jump reach");
    p.saved.assign(p.site, p.site + kEntryJumpBytes);
    // The stub: an absolute jump to the replacement; then the trampoline.
    std::vector<uint8_t> stub = {0xFF, 0x25, 0, 0, 0, 0};
    const auto target = reinterpret_cast<uint64_t>(hook.replacement);
    stub.insert(stub.end(), reinterpret_cast<const uint8_t*>(&target), reinterpret_cast<const uint8_t*>(&target) + 8);
    std::memset(slot, 0xCC, kSlotBytes);
    std::memcpy(slot, stub.data(), stub.size());
    std::memcpy(slot + kStubBytes, p.prologue.code.data(), p.prologue.code.size());
    plan.push_back(std::move(p));
  }
  for (void* page : pages) {
    if (mprotect(page, kPage, PROT_READ | PROT_EXEC) != 0) {
      return fail(std::string("mprotect refused to make a trampoline executable: ") + std::strerror(errno));
    }
  }

  std::vector<uint8_t*> sites;
  std::vector<const std::vector<uint8_t>*> jumps;
  for (const Planned& p : plan) {
    sites.push_back(p.site);
    jumps.push_back(&p.jump);
  }
  const std::vector<PageSpan> spans = spansOf(sites, kEntryJumpBytes, regions);
  size_t done = 0;
  std::string reason;
  if (!setProtection(spans, true, &done, &reason)) {
    const std::vector<PageSpan> undo(spans.begin(), spans.begin() + static_cast<long>(done));
    setProtection(undo, false, &done, nullptr);
    return fail(reason);
  }
  std::vector<uintptr_t> resume;
  for (const Planned& p : plan) resume.push_back(reinterpret_cast<uintptr_t>(p.slot));  // the stub
  if (!recordTrapSites(sites, resume)) {
    setProtection(spans, false, &done, nullptr);
    return fail("too many hooked sites in this process");
  }
  // From here nothing can fail: every page is writable, every trampoline is in place and every
  // site is known to the trap handler. Published before the first byte is written, so that a
  // replacement reached through a hook never sees a null original or an uncommitted set.
  for (size_t i = 0; i < hooks.size(); ++i) {
    if (hooks[i].publishOriginal != nullptr) {
      __atomic_store_n(hooks[i].publishOriginal, static_cast<void*>(plan[i].slot + kStubBytes), __ATOMIC_RELEASE);
    }
  }
  if (committed != nullptr) committed->store(true, std::memory_order_release);
  writePatches(sites, jumps);
  setProtection(spans, false, &done, nullptr);

  for (size_t i = 0; i < hooks.size(); ++i) {
    hooks[i].original = plan[i].slot + kStubBytes;
    patches_.push_back(Patch{plan[i].site, plan[i].saved, plan[i].jump});
    // While removing, a thread at the int3 runs the original through the trampoline, entering it
    // after the endbr64 it already passed.
    resumeOriginal_.push_back(reinterpret_cast<uintptr_t>(plan[i].slot + kStubBytes + plan[i].prologue.patchOffset));
  }
  pages_ = std::move(pages);
  return true;
}

bool EntryHookSet::remove(std::string* why) {
  if (!installed()) return true;
  std::vector<uint8_t*> sites;
  std::vector<const std::vector<uint8_t>*> saved;
  for (const Patch& p : patches_) {
    sites.push_back(p.site);
    saved.push_back(&p.saved);
  }
  const std::vector<PageSpan> spans = spansOf(sites, kEntryJumpBytes, readMaps());
  size_t done = 0;
  if (!setProtection(spans, true, &done, why)) {
    const std::vector<PageSpan> undo(spans.begin(), spans.begin() + static_cast<long>(done));
    setProtection(undo, false, &done, nullptr);
    return false;
  }
  if (!recordTrapSites(sites, resumeOriginal_)) {
    setProtection(spans, false, &done, nullptr);
    *why = "too many hooked sites in this process";
    return false;
  }
  writePatches(sites, saved);
  setProtection(spans, false, &done, nullptr);
  // The trampoline pages stay mapped: a caller may still be inside one (an early call in a
  // relocated prologue returns into it), and nothing can tell when the last one has left.
  pages_.clear();
  patches_.clear();
  resumeOriginal_.clear();
  return true;
}

#else  // not x86-64

bool EntryHookSet::install(std::vector<EntryHook>&, std::string* why, std::atomic<bool>*) {
  // aarch64: see prologue_relocator.cc (single-B reach, BTI); other architectures: no decoder.
  *why = "entry hooks are implemented for x86-64 only";
  return false;
}

bool EntryHookSet::remove(std::string*) { return true; }

#endif

}  // namespace nccl_lamport::hooks
