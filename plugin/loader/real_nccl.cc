#include "plugin/loader/real_nccl.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "plugin/abi/wrapped_api_list.h"
#include "plugin/loader/audit_protocol.h"
#include "common/config.h"
#include "common/log.h"
#include "common/small_file.h"

// LeakSanitizer's interface where the build has it (a weak reference: null otherwise).
extern "C" void __lsan_ignore_object(const void* p) __attribute__((weak));

namespace nccl_lamport {

namespace {

// A library we load binds its own symbols first (RTLD_DEEPBIND): NCCL's calls of its own public
// API must not land in our exported wrappers. RTLD_LOCAL keeps it out of the global scope, where
// it could shadow an NCCL the application loads later.
// The sanitizers' runtimes refuse RTLD_DEEPBIND (google/sanitizers#611), so a sanitizer build
// (NCCL_LAMPORT_SANITIZE, tests only) loads without it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kOwnLoadFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int kOwnLoadFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

/** How the NCCL in use was found (logged once). */
enum class Source { kNone, kGlobalScope, kAlreadyLoaded, kConfiguredPath, kLoaderSearch };

const char* sourceText(Source source) {
  switch (source) {
    case Source::kGlobalScope: return "in the global scope";
    case Source::kAlreadyLoaded: return "already loaded";
    case Source::kConfiguredPath: return "loaded from NCCL_LAMPORT_NCCL_PATH";
    case Source::kLoaderSearch: return "loaded by name";
    default: return "none";
  }
}

/** The NCCL library of this process, chosen once. */
struct RealLibrary {
  Source source = Source::kNone;
  void* handle = nullptr;     // null only for kNone (kGlobalScope: the library holding pncclAllReduce)
  bool profilingApi = false;  // pncclAllReduce resolves
};

// Our own link map: under whatever name a handle or a symbol comes to us, this says it is us.
// No function-local static with a dynamic initializer on the resolution path: its guard would be
// held across dladdr/dlsym/dlopen, which take the loader's lock, and a library constructor (run
// under that lock) calling a forwarder would wait for the guard for ever (ABBA). Racing first
// calls compute the same value; a constant-initialized atomic publishes it.
const link_map* ownLinkMap() {
  static std::atomic<const link_map*> self{nullptr};
  if (const link_map* map = self.load(std::memory_order_acquire)) return map;
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&resolveRealNccl), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0) {
    map = nullptr;
  }
  self.store(map, std::memory_order_release);
  return map;
}

bool isOwnAddress(void* address) {
  Dl_info info{};
  link_map* map = nullptr;
  return address != nullptr &&
         dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) != 0 &&
         map == ownLinkMap();
}

bool isOwnHandle(void* handle) {
  link_map* map = nullptr;
  return handle != nullptr && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map == ownLinkMap();
}

/** True if handle is a copy of nccl-lamport other than this one (it exports our own API): such a
 *  library behind a libnccl.so.2 name is no NCCL, whatever it forwards to. */
bool isOtherLamportCopy(void* handle) {
  link_map* map = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0) return false;
  void* api = dlsym(handle, "ncclLamportIsActive");
  Dl_info info{};
  link_map* owner = nullptr;
  return api != nullptr && dladdr1(api, &info, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) != 0 &&
         owner == map;
}

// First definition of `symbol` in the global scope that is not ours (we never export pnccl*, but
// a lookup must never be able to return one of our wrappers).
void* globalSymbol(const char* symbol) {
  for (void* scope : {RTLD_NEXT, RTLD_DEFAULT}) {
    void* fn = dlsym(scope, symbol);
    if (fn != nullptr && !isOwnAddress(fn)) return fn;
  }
  return nullptr;
}

/** handle, or null (closed, WARNed) where it is another copy of nccl-lamport. */
void* rejectOtherCopy(void* handle, const char* name) {
  if (!isOtherLamportCopy(handle)) return handle;
  Dl_info info{};
  void* api = dlsym(handle, "ncclLamportIsActive");
  LAMPORT_WARN("%s is another copy of nccl-lamport (%s), not NCCL: not used; set NCCL_LAMPORT_NCCL_PATH to the real "
               "libnccl.so.2",
               name, dladdr(api, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "?");
  dlclose(handle);
  return nullptr;
}

// dlopen(name, flags), skipping ourselves. The name is ours when the LD_AUDIT module redirected
// it to us: glibc then matches it against our link map before any auditor sees it, so we ask
// again under the prefixed name that only the audit module understands (plugin/loader/audit_protocol.h).
void* openSkippingSelf(const char* name, int flags, bool* sawSelf) {
  void* handle = dlopen(name, flags);
  if (!isOwnHandle(handle)) return rejectOtherCopy(handle, name);
  dlclose(handle);
  *sawSelf = true;
  const std::string unredirected = std::string(NCCL_LAMPORT_REAL_NCCL_PREFIX) + name;
  handle = dlopen(unredirected.c_str(), flags);
  if (!isOwnHandle(handle)) return rejectOtherCopy(handle, name);
  dlclose(handle);
  return nullptr;
}

// NCCL_LAMPORT_NCCL_PATH is the only candidate when set: a user who names a library does not want
// another one picked behind their back (and tests use a missing path to mean "no NCCL").
void* openConfiguredPath(const std::string& path) {
  // dlopen of a FIFO waits for a writer for ever: only a regular file (or a link to one) is tried.
  if (pathIsNotARegularFile(path)) {
    LAMPORT_WARN("NCCL_LAMPORT_NCCL_PATH=%s is not a regular file: not loaded", path.c_str());
    return nullptr;
  }
  void* handle = dlopen(path.c_str(), kOwnLoadFlags);
  if (isOwnHandle(handle) && path.find('/') == std::string::npos) {
    // A bare name (NCCL_LAMPORT_NCCL_PATH=libnccl.so.2) that is ours because the LD_AUDIT module
    // redirected it to us: the loader's search for it, past that redirect, as openSkippingSelf.
    dlclose(handle);
    handle = dlopen((std::string(NCCL_LAMPORT_REAL_NCCL_PREFIX) + path).c_str(), kOwnLoadFlags);
    if (handle == nullptr) handle = dlopen(path.c_str(), kOwnLoadFlags);  // no audit module: ours again
  }
  if (handle == nullptr) {
    LAMPORT_WARN("NCCL_LAMPORT_NCCL_PATH=%s does not load: %s", path.c_str(), dlerror());
  } else if (isOwnHandle(handle)) {
    LAMPORT_WARN("NCCL_LAMPORT_NCCL_PATH=%s is libnccl-lamport.so itself, not NCCL", path.c_str());
    dlclose(handle);
    handle = nullptr;
  }
  return rejectOtherCopy(handle, ("NCCL_LAMPORT_NCCL_PATH=" + path).c_str());
}

RealLibrary findRealLibrary(bool* sawSelf) {
  RealLibrary lib;
  // Every function from the one library that holds pncclAllReduce: resolving each name in the
  // global scope on its own could mix two libraries (another NCCL, another copy of us).
  if (void* allReduce = globalSymbol("pncclAllReduce")) {
    Dl_info info{};
    void* holder = dladdr(allReduce, &info) != 0 && info.dli_fname != nullptr
                       ? dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)
                       : nullptr;
    lib.handle = rejectOtherCopy(holder, info.dli_fname != nullptr ? info.dli_fname : "pncclAllReduce");
    if (lib.handle != nullptr) {
      lib.source = Source::kGlobalScope;
      lib.profilingApi = true;
      return lib;
    }
  }
  for (const char* name : {"libnccl.so.2", "libnccl.so"}) {
    lib.handle = openSkippingSelf(name, RTLD_NOW | RTLD_NOLOAD, sawSelf);
    if (lib.handle != nullptr) {
      lib.source = Source::kAlreadyLoaded;
      break;
    }
  }
  if (lib.handle == nullptr) {
    const std::string& path = globalConfig().ncclPath;
    if (!path.empty()) {
      lib.handle = openConfiguredPath(path);
      lib.source = Source::kConfiguredPath;
    } else {
      lib.handle = openSkippingSelf("libnccl.so.2", kOwnLoadFlags, sawSelf);
      lib.source = Source::kLoaderSearch;
    }
  }
  if (lib.handle == nullptr) return RealLibrary{};
  // Every NCCL has ncclGetVersion (1.3 and later); a library without it is no NCCL, whatever
  // stray nccl* symbols it has: nothing may be forwarded into it.
  if (dlsym(lib.handle, "ncclGetVersion") == nullptr) {
    link_map* map = nullptr;
    const char* path = dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) == 0 && map->l_name != nullptr ? map->l_name : "?";
    LAMPORT_WARN("%s is no NCCL library (it has no ncclGetVersion): not used", path);
    dlclose(lib.handle);
    return RealLibrary{};
  }
  lib.profilingApi = dlsym(lib.handle, "pncclAllReduce") != nullptr;
  return lib;
}

void* lookUp(const RealLibrary& lib, const char* name) {
  if (lib.source == Source::kNone) return nullptr;
  // "p" + name on the stack: a wrapper resolves its NCCL function before it calls it, and an
  // allocation that failed there would keep the call from NCCL (NCCL's names are far shorter).
  char profName[128];
  if (snprintf(profName, sizeof(profName), "p%s", name) >= static_cast<int>(sizeof(profName))) profName[0] = '\0';
  // By handle (in the global scope too: the handle of the library holding pncclAllReduce), the
  // library's own definition comes first in its scope, so the plain name is safe (NCCL < 2.16.2
  // has nothing else; 2.28 has a few exports without an alias, ncclResetDebugInitInternal); the
  // check only guards against a handle that is us.
  void* fn = profName[0] != '\0' ? dlsym(lib.handle, profName) : nullptr;
  if (fn == nullptr) fn = dlsym(lib.handle, name);
  return isOwnAddress(fn) ? nullptr : fn;
}

// "2.28.9" from NCCL_VERSION_CODE (2.9 and later: major*10000 + minor*100 + patch).
std::string versionText(int code) {
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

void logChoice(const RealLibrary& lib, bool sawSelf, const std::string& configuredPath) {
  if (lib.source == Source::kNone) {
    const char* hint =
        !configuredPath.empty() ? "NCCL_LAMPORT_NCCL_PATH did not give one"
        : sawSelf ? "libnccl.so.2 is this library itself (a link to it, or LD_AUDIT without its module); "
                    "set NCCL_LAMPORT_NCCL_PATH to the real libnccl.so.2"
                  : "libnccl.so.2 is not on the loader's search path; set LD_LIBRARY_PATH or NCCL_LAMPORT_NCCL_PATH";
    LAMPORT_WARN("no NCCL library found (%s): every NCCL call fails", hint);
    return;
  }
  const bool info = logEnabled(kLogInfo, kSubsysInit);
  if (!info && lib.profilingApi) return;  // nothing to print: do not even call into NCCL
  const auto getVersion = reinterpret_cast<decltype(&ncclGetVersion)>(lookUp(lib, "ncclGetVersion"));
  int version = 0;
  if (getVersion != nullptr && getVersion(&version) != ncclSuccess) version = 0;
  Dl_info where{};
  const char* path = getVersion != nullptr && dladdr(reinterpret_cast<void*>(getVersion), &where) != 0 &&
                             where.dli_fname != nullptr
                         ? where.dli_fname
                         : "?";
  LAMPORT_INFO(kSubsysInit, "using NCCL %s (%d) from %s (%s)", versionText(version).c_str(), version, path,
               sourceText(lib.source));
  if (!lib.profilingApi) {
    LAMPORT_WARN("NCCL %s from %s has no profiling API (pnccl*, NCCL 2.16.2 and later): the Lamport path is "
                 "off and every call passes through to NCCL",
                 versionText(version).c_str(), path);
  }
}

// Chosen by the first call to finish the search and published without a lock (see ownLinkMap):
// a thread's search may wait for the loader's lock, held by a library constructor whose own
// first call must then search by itself rather than wait. The rare loser of a race keeps the
// winner's choice (an extra reference on a library handle is harmless: NCCL is never unloaded).
const RealLibrary& realLibrary() {
  static std::atomic<const RealLibrary*> published{nullptr};
  if (const RealLibrary* lib = published.load(std::memory_order_acquire)) return *lib;
  bool sawSelf = false;
  const RealLibrary* found = new RealLibrary(findRealLibrary(&sawSelf));
  // Lives as long as the process: a LeakSanitizer build would report it once our object is
  // dlclose'd (the pointer's only holder is gone), so it is marked as intended there.
  if (__lsan_ignore_object != nullptr) __lsan_ignore_object(found);
  const RealLibrary* expected = nullptr;
  if (!published.compare_exchange_strong(expected, found, std::memory_order_acq_rel)) {
    delete found;
    return *expected;
  }
  logChoice(*found, sawSelf, globalConfig().ncclPath);
  return *found;
}

// Tuner activation: the NCCL whose entries are hooked, and the trampolines of those entries.
std::atomic<void*> gHookedHandle{nullptr};
// A hookable name was resolved with no hooks in use (and cached by its caller). Together with
// gHookedHandle a Dekker pair (sequentially consistent): useHookedNccl stores the handle, then
// reads this; resolveRealNccl stores this, then reads the handle. One of them sees the other.
std::atomic<bool> gHookableResolvedUnhooked{false};
constexpr const char* kHookable[] = {NCCL_LAMPORT_WRAPPED_API(NCCL_LAMPORT_WRAPPED_NAME)};
constexpr size_t kHookableCount = sizeof(kHookable) / sizeof(kHookable[0]);
void* gHookedOriginal[kHookableCount] = {};

void* lookUpHooked(void* handle, const char* name) {
  if (void** slot = hookedOriginalSlot(name)) {
    void* trampoline = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (trampoline != nullptr) return trampoline;
  }
  const std::string profName = std::string("p") + name;
  void* fn = dlsym(handle, profName.c_str());
  if (fn == nullptr) fn = dlsym(handle, name);
  return isOwnAddress(fn) ? nullptr : fn;
}

}  // namespace

bool useHookedNccl(void* handle) {
  gHookedHandle.store(handle);
  if (handle == nullptr || !gHookableResolvedUnhooked.load()) return true;
  gHookedHandle.store(nullptr);
  return false;
}

void** hookedOriginalSlot(const char* name) {
  for (size_t i = 0; i < kHookableCount; ++i) {
    if (std::strcmp(kHookable[i], name) == 0) return &gHookedOriginal[i];
  }
  return nullptr;
}

void* resolveRealNccl(const char* name) {
  if (void* hooked = gHookedHandle.load(std::memory_order_acquire)) return lookUpHooked(hooked, name);
  if (hookedOriginalSlot(name) != nullptr) {
    gHookableResolvedUnhooked.store(true);
    if (void* hooked = gHookedHandle.load()) return lookUpHooked(hooked, name);
  }
  const RealLibrary& lib = realLibrary();
  void* fn = lookUp(lib, name);
  if (fn == nullptr && lib.source != Source::kNone) {
    LAMPORT_INFO(kSubsysInit, "the NCCL in use has no %s (nor p%s)", name, name);
  }
  return fn;
}

bool realNcclHasProfilingApi() {
  // The hooked NCCL is 2.28+ (tuner ABI v5), which has the aliases.
  return gHookedHandle.load(std::memory_order_acquire) != nullptr || realLibrary().profilingApi;
}

const char* ncclErrorText(ncclResult_t result) {
  const auto real = REAL_NCCL(ncclGetErrorString);
  return real != nullptr ? real(result) : "unknown NCCL error";
}

char gRealNcclMissing;

bool calledFromNccl(const void* returnAddress) {
  // NCCL's load address, cached in a constant-initialized atomic (kUnknown until the first call),
  // not a static with an initializer: that one's guard would be held across dlsym/dladdr (the
  // loader's lock), a deadlock with a library constructor calling NCCL while another thread's
  // first call resolves (plugin/loader/real_nccl.h, REAL_NCCL). Racing first calls agree.
  static const char kUnknown = 0;
  static std::atomic<const void*> cached{&kUnknown};
  const void* ncclBase = cached.load(std::memory_order_acquire);
  if (ncclBase == &kUnknown) {
    Dl_info found{};
    void* fn = resolveRealNccl("ncclCommGetAsyncError");
    ncclBase = fn != nullptr && dladdr(fn, &found) != 0 ? found.dli_fbase : nullptr;
    cached.store(ncclBase, std::memory_order_release);
  }
  Dl_info info{};
  return ncclBase != nullptr && dladdr(returnAddress, &info) != 0 && info.dli_fbase == ncclBase;
}

}  // namespace nccl_lamport
