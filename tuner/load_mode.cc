#include "tuner/load_mode.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <mutex>

#include "common/config.h"
#include "common/log.h"
#include "tuner/tuner_impl.h"

namespace nccl_lamport {

namespace detail {
// Plain atomics, constant-initialised and trivially destructible: a dlclose/reload by NCCL
// simply starts them afresh, and nothing registers a destructor or a thread.
std::atomic<bool> gInterposerActive{false};
}  // namespace detail

namespace {

std::atomic<bool> gTunerOnlyNoticeShown{false};
std::atomic<bool> gTunerOnlyPathOff{false};
// Held while the first tuner init decides the mode (and installs the hooks): NCCL calls the
// tuner's init outside its own tuner lock, so other communicators' inits (ncclCommInitAll's
// per-rank threads, a thread per GPU) run meanwhile and must wait for the decision before they
// ask whether the hooks are in (tunerActivationCommInit). Constexpr-constructed and trivially
// destructible, like the atomics.
std::mutex gTunerOnlyDecision;

constexpr uint64_t kTunerLogSubsys = kSubsysTuning | kSubsysInit;

// Keeps the object at path loaded until the process exits. NCCL dlcloses its tuner when the
// last communicator dies and dlopens it again for the next one; that reload would start
// gTunerOnlyNoticeShown afresh and repeat the notice for every generation of communicators.
// Only used in tuner-only mode (a preloaded object is never unloaded anyway). Everything else
// here works unpinned: contexts live from init to finalize, the flags are plain atomics.
void pinObject(const std::string& path) {
  if (path.empty()) return;
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  if (handle != nullptr) dlclose(handle);  // the NODELETE mark stays
}

// The file of another nccl-lamport whose wrappers already interpose NCCL in this process (one
// preloaded under another name than this tuner's file: a site-wide NCCL_TUNER_PLUGIN beside a
// user's LD_PRELOAD), else "". Its extension API is in the global scope, which comes before this
// object's own in the search.
std::string otherLamportInterposer() {
  void* fn = dlsym(RTLD_DEFAULT, "ncclLamportGetCommInfo");
  Dl_info theirs{};
  Dl_info ours{};
  if (fn == nullptr || dladdr(fn, &theirs) == 0 ||
      dladdr(reinterpret_cast<void*>(&otherLamportInterposer), &ours) == 0 || theirs.dli_fbase == ours.dli_fbase) {
    return "";
  }
  return theirs.dli_fname != nullptr ? theirs.dli_fname : "?";
}

// The first tuner init's decision: hooks in, or the tuner-only notice and the path off.
void decideTunerOnlyMode(const TunerCommInfo& comm, const void* callerInNccl) {
  const std::string path = ownObjectPath();
  // Preloaded but no wrapper ran (NCCL_LAMPORT_ENABLE=0, or communicators made through entry
  // points we do not wrap): the advice to preload would be wrong, and the interposer says why.
  if (preloadListNames(getenv("LD_PRELOAD"), path.c_str())) return;
  pinObject(path);
  // Another copy interposes: hooking NCCL too would put a second layer of wrappers, and a second
  // workspace set-up, under its calls.
  const std::string other = otherLamportInterposer();
  if (!other.empty()) {
    LAMPORT_INFO(kTunerLogSubsys, "another nccl-lamport (%s) already wraps NCCL in this process: this copy (%s) "
                 "is NCCL's tuner only and patches nothing", other.c_str(), path.c_str());
    return;
  }
  // Tuner activation: with NCCL_LAMPORT_ENABLE=0 (or the hooks not asked for) no byte of NCCL
  // is touched.
  const Config& config = globalConfig();
  const bool hooksWanted = config.enable && config.tunerHooks;
  std::string hooksWhy;
  if (hooksWanted && comm.abiVersion >= 5 && callerInNccl != nullptr && activateFromTuner != nullptr) {
    if (activateFromTuner(comm, callerInNccl, &hooksWhy)) return;
  }
  gTunerOnlyPathOff.store(true, std::memory_order_release);
  // Name the file itself, not the libnccl-tuner-lamport.so link NCCL may have opened.
  char canonical[PATH_MAX];
  const bool resolved = !path.empty() && realpath(path.c_str(), canonical) != nullptr;
  const std::string notice = tunerOnlyNotice(resolved ? std::string(canonical) : path);
  const std::string reason = tunerOnlyReason(comm.abiVersion, config.enable, hooksWanted, hooksWhy);
  if (!config.enable) {
    // The A/B switch: nothing to advise, LD_PRELOAD would not change it.
    LAMPORT_INFO(kTunerLogSubsys, "Lamport path is off (%s): NCCL's code is not patched, every call goes to "
                 "NCCL", reason.c_str());
    return;
  }
  LAMPORT_INFO(kTunerLogSubsys, "%s (%s)", notice.c_str(), reason.c_str());
}

bool isPreloadSeparator(char c) { return c == ' ' || c == ':' || c == '\t' || c == '\n'; }

// The file name part of a path ("a/b/libx.so" -> "libx.so").
const char* fileName(const char* path, size_t length, size_t* nameLength) {
  size_t start = length;
  while (start > 0 && path[start - 1] != '/') --start;
  *nameLength = length - start;
  return path + start;
}

}  // namespace

void decideLoadModeOnce(const TunerCommInfo& comm, const void* callerInNccl) {
  if (interposerActive()) return;
  if (gTunerOnlyNoticeShown.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(gTunerOnlyDecision);
  if (gTunerOnlyNoticeShown.load(std::memory_order_acquire)) return;  // decided while we waited
  struct Decided {
    ~Decided() { gTunerOnlyNoticeShown.store(true, std::memory_order_release); }
  } decided;  // on every way out, exceptions included: no one decides twice
  decideTunerOnlyMode(comm, callerInNccl);
}

std::string ownObjectPath() {
  Dl_info info;
  std::memset(&info, 0, sizeof(info));
  if (dladdr(reinterpret_cast<void*>(&ownObjectPath), &info) == 0 || info.dli_fname == nullptr ||
      info.dli_fname[0] == '\0') {
    return std::string();
  }
  if (info.dli_fname[0] == '/') return std::string(info.dli_fname);
  // Loaded through a relative path (LD_PRELOAD=./libnccl-lamport.so): make it absolute.
  char resolved[PATH_MAX];
  if (realpath(info.dli_fname, resolved) == nullptr) return std::string();
  return std::string(resolved);
}

std::string tunerOnlyNotice(const std::string& objectPath) {
  const std::string path = objectPath.empty() ? std::string("/abs/path/to/libnccl-lamport.so") : objectPath;
  return "Lamport path is off: this process loaded libnccl-lamport.so only as NCCL's tuner "
         "(NCCL_TUNER_PLUGIN); start it with LD_PRELOAD=" +
         path + " to run small allreduces on Lamport kernels";
}

std::string tunerOnlyReason(int abiVersion, bool enabled, bool hooksWanted, const std::string& hooksWhy) {
  if (!enabled) return "NCCL_LAMPORT_ENABLE=0";
  if (abiVersion < 5) {
    return "NCCL_TUNER_PLUGIN alone turns the path on with NCCL 2.28 or later (tuner ABI v5+); this NCCL "
           "speaks tuner ABI v" + std::to_string(abiVersion) + ": use LD_PRELOAD";
  }
  if (!hooksWanted) return "tuner activation's entry hooks are off: NCCL_LAMPORT_TUNER_HOOKS=1 turns them on";
  if (!hooksWhy.empty()) return "entry hooks not capable: " + hooksWhy;
  return "entry hooks unavailable in this build";
}

bool tunerOnlyPathOff() { return gTunerOnlyPathOff.load(std::memory_order_acquire); }

bool shouldSelfRegisterAsTuner(const char* ldPreload, const char* tunerPluginEnv,
                               const char* ourPath) {
  // A user's NCCL_TUNER_PLUGIN (another tuner, "none", or us by name) always wins.
  if (tunerPluginEnv != nullptr && tunerPluginEnv[0] != '\0') return false;
  return preloadListNames(ldPreload, ourPath);
}

bool preloadListNames(const char* ldPreload, const char* ourPath) {
  if (ldPreload == nullptr || ourPath == nullptr || ourPath[0] != '/') return false;
  const size_t ourLength = std::strlen(ourPath);
  size_t ourNameLength = 0;
  const char* ourName = fileName(ourPath, ourLength, &ourNameLength);
  if (ourNameLength == 0) return false;

  const char* entry = ldPreload;
  while (*entry != '\0') {
    while (*entry != '\0' && isPreloadSeparator(*entry)) ++entry;
    const char* end = entry;
    while (*end != '\0' && !isPreloadSeparator(*end)) ++end;
    const size_t length = static_cast<size_t>(end - entry);
    if (length > 0) {
      if (length == ourLength && std::strncmp(entry, ourPath, length) == 0) return true;
      size_t nameLength = 0;
      const char* name = fileName(entry, length, &nameLength);
      if (nameLength == ourNameLength && std::strncmp(name, ourName, nameLength) == 0) return true;
    }
    entry = end;
  }
  return false;
}

void resetTunerProcessStateForTest() {
  detail::gInterposerActive.store(false, std::memory_order_release);
  gTunerOnlyNoticeShown.store(false, std::memory_order_release);
  gTunerOnlyPathOff.store(false, std::memory_order_release);
}

}  // namespace nccl_lamport
