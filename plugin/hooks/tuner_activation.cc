#include "plugin/hooks/tuner_activation.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "plugin/comm/tuner_setup.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/abi/wrapped_api_list.h"
#include "plugin/hooks/entry_hooks.h"
#include "common/log.h"
#include "plugin/loader/real_nccl.h"
#include "plugin/comm/workspace_setup.h"
#include "tuner/load_mode.h"
#include "tuner/tuner_impl.h"

namespace nccl_lamport {

namespace {

// The wrappers the hooks lead to: the functions plugin/interpose/interpose_*.cc export.
constexpr const char* kHookedFunctions[] = {NCCL_LAMPORT_WRAPPED_API(NCCL_LAMPORT_WRAPPED_NAME)};

std::mutex gMutex;
TunerHooksState gState = TunerHooksState::kNotTried;
std::string gWhy;
std::atomic<bool> gInstalled{false};
// The load address of the NCCL whose entries are hooked (dladdr's dli_fbase): a tuner init from
// another NCCL in the same process (its calls never reach a wrapper) sets nothing up.
std::atomic<const void*> gHookedNcclBase{nullptr};
// Never destroyed: the hooks stay for the life of the process (the object is pinned). An atomic,
// so the compiler keeps the store of a pointer nothing reads: through it the patch records stay
// reachable, and LeakSanitizer does not report them as leaked.
std::atomic<hooks::EntryHookSet*> gHooks{nullptr};

// This object, by handle, opened RTLD_NODELETE so it stays loaded while a hook points into it.
void* pinOwnObject(std::string* why) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&activateTunerHooks), &info) == 0 || info.dli_fname == nullptr) {
    *why = "cannot name this object (dladdr)";
    return nullptr;
  }
  void* self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  if (self == nullptr) *why = std::string("cannot pin this object: ") + dlerror();
  return self;
}

// The NCCL that called the tuner's init: the object holding the return address.
void* callingNccl(const void* callerInNccl, std::string* path, std::string* why) {
  Dl_info info{};
  if (callerInNccl == nullptr || dladdr(callerInNccl, &info) == 0 || info.dli_fname == nullptr) {
    *why = "cannot find the NCCL that loaded the tuner (dladdr)";
    return nullptr;
  }
  *path = info.dli_fname[0] != '\0' ? info.dli_fname : "the main program";
  gHookedNcclBase.store(info.dli_fbase, std::memory_order_release);
  // The main program (a statically linked NCCL) opens as dlopen(NULL): its symbols are then
  // looked up in the global scope, where they may be hidden; the lookups below say so.
  void* handle = dlopen(info.dli_fname[0] != '\0' ? info.dli_fname : nullptr, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) *why = "cannot open the NCCL that loaded the tuner (" + *path + ")";
  return handle;
}

TunerHooksState install(const void* callerInNccl, std::string* why) {
  void* self = pinOwnObject(why);
  if (self == nullptr) return TunerHooksState::kNotCapable;
  std::string ncclPath;
  void* nccl = callingNccl(callerInNccl, &ncclPath, why);
  if (nccl == nullptr) return TunerHooksState::kNotCapable;

  std::vector<hooks::EntryHook> entries;
  for (const char* name : kHookedFunctions) {
    void* entry = dlsym(nccl, name);
    if (entry == nullptr) continue;  // not in this release (Shrink, Revoke): nothing to hook
    void* wrapper = dlsym(self, name);
    if (wrapper == nullptr || wrapper == entry) {
      *why = std::string("no wrapper for ") + name;
      return TunerHooksState::kNotCapable;
    }
    hooks::EntryHook h;
    h.name = name;
    h.entry = entry;
    h.replacement = wrapper;
    h.publishOriginal = hookedOriginalSlot(name);
    entries.push_back(h);
  }
  if (entries.empty() || dlsym(nccl, "ncclAllReduce") == nullptr) {
    *why = ncclPath + " exports no ncclAllReduce";
    return TunerHooksState::kNotCapable;
  }
  // Every NCCL call of ours goes to this NCCL from now on, hooked names to their trampolines.
  if (!useHookedNccl(nccl)) {
    *why = "this process already calls NCCL through libnccl-lamport.so loaded as the NCCL library (by path "
           "or under LD_AUDIT), whose calls must reach NCCL's entries unhooked";
    return TunerHooksState::kNotCapable;
  }
  auto* set = new hooks::EntryHookSet();
  // gInstalled goes true before the first entry byte changes: a thread that reaches a wrapper
  // through a hook while the install is still writing (its 50 ms grace) must already see the
  // tuner-activation mode, not take the interposer's own set-up points.
  if (!set->install(entries, why, &gInstalled)) {
    useHookedNccl(nullptr);
    delete set;
    return TunerHooksState::kNotCapable;
  }
  gHooks.store(set, std::memory_order_release);
  LAMPORT_INFO(kSubsysInit, "tuner activation: %zu entry points of %s hooked", entries.size(), ncclPath.c_str());
  return TunerHooksState::kInstalled;
}

}  // namespace

TunerHooksState activateTunerHooks(const TunerCommInfo& comm, const void* callerInNccl, std::string* why) {
  (void)comm;
  try {
    std::lock_guard<std::mutex> lock(gMutex);
    if (gState == TunerHooksState::kNotTried) {
      gState = install(callerInNccl, &gWhy);
      gInstalled.store(gState == TunerHooksState::kInstalled, std::memory_order_release);
      if (gState != TunerHooksState::kInstalled) {
        LAMPORT_INFO(kSubsysInit, "tuner activation: not capable (%s): every communicator stays on NCCL",
                     gWhy.c_str());
      }
    }
    *why = gWhy;
    return gState;
  } catch (...) {
    *why = "out of memory";
    return TunerHooksState::kNotCapable;
  }
}

bool tunerHooksInstalled() { return gInstalled.load(std::memory_order_acquire); }

void bindHookedComm(ncclComm_t comm) {
  if (!tunerHooksInstalled() || comm == nullptr) return;
  if (CommRegistry::instance().find(comm) != nullptr) return;
  // A non-blocking communicator whose init NCCL has not finished may not have reached the tuner's
  // init yet: binding it now would find no set-up and leave it on NCCL for good. NCCL answers
  // calls on it until it is ready; the first call after that binds it.
  ncclResult_t state = ncclSuccess;
  if (REAL_NCCL(ncclCommGetAsyncError)(comm, &state) == ncclSuccess && state == ncclInProgress) return;
  bindCommToTunerSetUp(comm, /*registerIfNone=*/true);
}

void bindQueriedComm(ncclComm_t comm) {
  if (!tunerHooksInstalled() || comm == nullptr) return;
  if (CommRegistry::instance().find(comm) != nullptr) return;
  // Only a handle with a set-up recorded above it: anything else (a destroyed handle, a handle of
  // a communicator made before the hooks) is answered "unknown" without touching its memory.
  if (tunerSetUpRecordedFor(comm)) bindCommToTunerSetUp(comm, /*registerIfNone=*/false);
}

}  // namespace nccl_lamport

// The tuner's entry into this file (tuner/tuner_impl.h declares it weak).
bool nccl_lamport::activateFromTuner(const TunerCommInfo& comm, const void* callerInNccl, std::string* why) {
  return activateTunerHooks(comm, callerInNccl, why) == TunerHooksState::kInstalled;
}

void nccl_lamport::tunerActivationCommInit(const TunerCommInfo& comm, const void* ncclSlot,
                                           const void* callerInNccl) {
  if (!tunerHooksInstalled()) return;
  Dl_info info{};
  if (callerInNccl == nullptr || dladdr(callerInNccl, &info) == 0 ||
      info.dli_fbase != gHookedNcclBase.load(std::memory_order_acquire)) {
    LAMPORT_INFO(kSubsysInit, "tuner activation: commId 0x%016llx belongs to %s, not to the hooked NCCL: left to it",
                 static_cast<unsigned long long>(comm.commId),
                 info.dli_fname != nullptr && info.dli_fname[0] != '\0' ? info.dli_fname : "another object");
    return;
  }
  setUpAtTunerInit(comm, ncclSlot);
}

void nccl_lamport::tunerActivationCommFinalize(const void* ncclSlot) { forgetTunerSetUp(ncclSlot); }
