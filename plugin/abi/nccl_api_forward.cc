// Thin forwarders for the part of the NCCL API we do not wrap (plugin/abi/nccl_api_list.h), so that
// libnccl-lamport.so can stand in for libnccl.so.2 in programs that dlopen it and look every
// symbol up by handle (vLLM/SGLang pynccl, ctypes, JAX/XLA and CuPy under the LD_AUDIT module).
//
// Each forwarder resolves the real function on its first call and caches it; later calls cost one
// pointer load and a tail jump. If the real NCCL lacks the function, the first call WARNs and
// every call returns ncclSystemError, like the wrappers (a const char* function returns a fixed
// explanation, a void one does nothing): a missing entry point never crashes the caller.
#include <atomic>

#include "plugin/abi/export.h"
#include "common/log.h"
#include "plugin/abi/nccl_api_list.h"
#include "plugin/loader/real_nccl.h"

namespace nccl_lamport {
namespace {

/** The result of a forwarded call whose real function does not exist, by return type. */
template <typename R>
R missingResult();

template <>
ncclResult_t missingResult<ncclResult_t>() {
  return ncclSystemError;
}

template <>
const char* missingResult<const char*>() {
  return "nccl-lamport: no real NCCL function to call (run with NCCL_DEBUG=WARN for details)";
}

template <>
void missingResult<void>() {}

/** The real `name`, or `missing` (after one WARN, the first time `warned` is set) when the real
 *  NCCL does not have it. */
template <typename Fn>
Fn resolveForwarded(const char* name, Fn missing, std::atomic<bool>* warned) {
  void* fn = resolveRealNccl(name);
  if (fn != nullptr) return reinterpret_cast<Fn>(fn);
  if (!warned->exchange(true)) LAMPORT_WARN("%s: the real NCCL has no such function; calls to it fail", name);
  return missing;
}

}  // namespace
}  // namespace nccl_lamport

// Per function: the cached pointer (null until the first call), a stand-in with the same
// signature for a function the real NCCL lacks, the cold resolver (WARNs once through the
// flag) and the exported forwarder. The forwarder's fast path is one load, a test and a tail
// jump: the resolver call sits out of line so no register is saved on the way. No lock (nor a
// function-local static's guard) is held across the resolution, which takes the loader's lock:
// racing first calls store the same pointer (tests/shim/test_resolve_lock_order.cc).
#define NCCL_LAMPORT_DEFINE_FORWARDER(ret, name, params, args)                                     \
  namespace {                                                                                      \
  std::atomic<decltype(&::name)> name##Real{nullptr};                                              \
  std::atomic<bool> name##Warned{false};                                                           \
  ret name##Missing params { return ::nccl_lamport::missingResult<ret>(); }                        \
  __attribute__((noinline, cold)) decltype(&::name) name##Resolve() {                              \
    const auto fn = ::nccl_lamport::resolveForwarded<decltype(&::name)>(#name, &name##Missing,     \
                                                                         &name##Warned);           \
    name##Real.store(fn, std::memory_order_release);                                               \
    return fn;                                                                                     \
  }                                                                                                \
  }                                                                                                \
  NCCL_LAMPORT_EXPORT ret name params {                                                            \
    auto real = name##Real.load(std::memory_order_acquire);                                        \
    if (__builtin_expect(real == nullptr, 0)) real = name##Resolve();                              \
    return real args;                                                                              \
  }

NCCL_LAMPORT_FORWARDED_API(NCCL_LAMPORT_DEFINE_FORWARDER)
