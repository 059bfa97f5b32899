// The real NCCL functions, found at run time (docs/loading.md): we never link libnccl, so the NCCL that
// runs is the one the application loaded, or, when it loaded none (it dlopens us in NCCL's
// place: vLLM/SGLang pynccl, ctypes, the LD_AUDIT module), one we load.
//
// The library is chosen once per process, on the first call that needs it, in this order:
//   1. an NCCL in the global scope: dlsym(RTLD_NEXT, "pncclAllReduce"), then RTLD_DEFAULT
//      (the application linked NCCL or dlopened it RTLD_GLOBAL); functions are then looked up
//      per name the same way ("pncclX", then "ncclX" for the few exports that have no alias,
//      never one of ours);
//   2. an NCCL already loaded in a local scope: dlopen("libnccl.so.2" / "libnccl.so",
//      RTLD_NOLOAD) (PyTorch loads NCCL RTLD_LOCAL; only this finds it);
//   3. no NCCL loaded at all: NCCL_LAMPORT_NCCL_PATH if set (then it is the only candidate: if it
//      does not load, there is no NCCL), else dlopen("libnccl.so.2") through the loader's search
//      path. What we load is loaded RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND, so NCCL's calls to its
//      own API bind to itself and never to our exported wrappers.
// In 2 and 3 a handle that turns out to be our own object (the LD_AUDIT module redirected the
// name to us, or someone made libnccl.so.2 a link to us) is skipped; under the audit module the
// real library is then asked for under the name of plugin/loader/audit_protocol.h.
// A library without the profiling aliases (NCCL < 2.16.2) is used through its plain "ncclX"
// names, looked up by its handle only (never in the global scope, where they are ours), and the
// Lamport path is off for it (WARN once). The choice is logged once at INFO (subsystem INIT).
#pragma once

#include <nccl.h>

#include <atomic>

namespace nccl_lamport {

/** Returns the address of the real NCCL function `name` (plain name, e.g. "ncclAllReduce"), or
 *  null if there is no NCCL or it does not have that function. Never returns one of our own
 *  functions. Thread-safe; the first call may dlopen NCCL. */
void* resolveRealNccl(const char* name);

/** True when the real NCCL has the profiling aliases (pncclAllReduce resolves, NCCL >= 2.16.2).
 *  False without them and when there is no NCCL; the interposer then only passes calls through.
 *  The first call may dlopen NCCL. */
bool realNcclHasProfilingApi();

/**
 * Tuner activation (plugin/hooks/tuner_activation.h): from now on every name resolves in the
 * library of `handle` (the NCCL that loaded the tuner), and a hooked name to its trampoline as
 * published in hookedOriginalSlot(name). Call with null to undo (when installing failed).
 * Returns false, and changes nothing, when a hookable function was already resolved without the
 * hooks (this object served as NCCL itself: opened by path, or under LD_AUDIT): its callers keep
 * the entry's address (REAL_NCCL caches it), so hooking that entry would send them back into
 * their own wrapper for ever. The entries must then stay unhooked.
 */
bool useHookedNccl(void* handle);

/** The slot where the trampoline of `name` is published before its entry is hooked, or null
 *  when `name` is not one of the hookable functions (nccl_api hook list of tuner_activation). */
void** hookedOriginalSlot(const char* name);

/** NCCL's text for a result code, through the real ncclGetErrorString when there is one. */
const char* ncclErrorText(ncclResult_t result);

/** True when returnAddress lies in the real NCCL library: NCCL calls its own
 *  ncclCommGetAsyncError internally (ncclCommEnsureReady) and, since it is not linked
 *  -Bsymbolic, through our exported wrapper. Those calls must get NCCL's own answer. */
bool calledFromNccl(const void* returnAddress);

}  // namespace nccl_lamport

namespace nccl_lamport {
/** What REAL_NCCL caches for a function the real NCCL does not have (its address, not its value). */
extern char gRealNcclMissing;
}  // namespace nccl_lamport

// Resolves once per call site, then costs one load. The cache is a constant-initialized atomic,
// not a static with an initializer: that one's guard would be held across the resolution's
// dlsym/dladdr (the loader's lock), a deadlock with a library constructor calling NCCL. Racing
// first calls resolve the same address.
#define REAL_NCCL(fname)                                                                      \
  ([]() -> decltype(&::fname) {                                                               \
    static std::atomic<void*> cached{nullptr};                                                \
    void* fn = cached.load(std::memory_order_acquire);                                        \
    if (__builtin_expect(fn == nullptr, 0)) {                                                 \
      fn = ::nccl_lamport::resolveRealNccl(#fname);                                           \
      if (fn == nullptr) fn = &::nccl_lamport::gRealNcclMissing;                              \
      cached.store(fn, std::memory_order_release);                                            \
    }                                                                                         \
    return fn == &::nccl_lamport::gRealNcclMissing ? nullptr                                  \
                                                   : reinterpret_cast<decltype(&::fname)>(fn); \
  }())
