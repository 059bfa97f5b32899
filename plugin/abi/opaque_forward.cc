// The C++ half of the signature-agnostic forwarders (plugin/abi/opaque_forward.S, names in
// plugin/abi/opaque_api_list.h): the slots the trampolines jump through, the resolver their first
// call runs, and the stand-ins for functions the real NCCL lacks.
//
// A stand-in is entered by the trampoline's tail jump with the caller's arguments and return
// address, so it must not depend on them: it takes none and returns a pair of machine words,
// which the x86-64 SysV and AAPCS64 ABIs return in rax:rdx / x0:x1, the registers in which every
// function of the list returns its value (an int, an ncclResult_t, or a 12-byte ncclTeam). A
// caller of an int function reads the low half of the first word, one of an ncclTeam all of it.
#include <atomic>
#include <cstdint>

#include "common/log.h"
#include "plugin/abi/opaque_api_list.h"
#include "plugin/loader/real_nccl.h"

namespace {

struct TwoWords {
  uintptr_t first;
  uintptr_t second;
};

TwoWords returnsSystemError() { return {static_cast<uintptr_t>(ncclSystemError), 0}; }
TwoWords returnsZero() { return {0, 0}; }

struct OpaqueEntry {
  int index;
  const char* name;
  TwoWords (*fallback)();
  const char* fallbackText;
};

#define NCCL_LAMPORT_OPAQUE_ERROR &returnsSystemError, "ncclSystemError"
#define NCCL_LAMPORT_OPAQUE_ZERO &returnsZero, "0"
#define NCCL_LAMPORT_OPAQUE_ENTRY(index, name, fallback) {index, #name, fallback},
constexpr OpaqueEntry kEntries[] = {NCCL_LAMPORT_OPAQUE_API(NCCL_LAMPORT_OPAQUE_ENTRY)};
#undef NCCL_LAMPORT_OPAQUE_ENTRY

constexpr bool indicesInOrder() {
  for (int i = 0; i < NCCL_LAMPORT_OPAQUE_COUNT; ++i) {
    if (kEntries[i].index != i) return false;
  }
  return true;
}
static_assert(sizeof(kEntries) / sizeof(kEntries[0]) == NCCL_LAMPORT_OPAQUE_COUNT,
              "NCCL_LAMPORT_OPAQUE_COUNT must be the length of NCCL_LAMPORT_OPAQUE_API");
static_assert(indicesInOrder(), "NCCL_LAMPORT_OPAQUE_API: the indices must be 0, 1, 2, ... in order");

std::atomic<bool> warned[NCCL_LAMPORT_OPAQUE_COUNT];

}  // namespace

// One slot per function, read by the trampolines with a plain load (null: not resolved yet).
// Written once per function, with release order, by the resolver; a race between two first calls
// writes the same value twice.
extern "C" __attribute__((visibility("hidden"))) void* nccl_lamport_opaque_real[NCCL_LAMPORT_OPAQUE_COUNT];
void* nccl_lamport_opaque_real[NCCL_LAMPORT_OPAQUE_COUNT] = {};

/** Called by a trampoline's slow path with the function's index: the real function, or (after
 *  one WARN) its stand-in. Never null. */
extern "C" __attribute__((visibility("hidden"))) void* nccl_lamport_resolve_opaque(int index) noexcept {
  if (index < 0 || index >= NCCL_LAMPORT_OPAQUE_COUNT) {  // cannot happen: the assembly uses the list
    LAMPORT_WARN("internal error: no forwarded function with index %d", index);
    return reinterpret_cast<void*>(&returnsSystemError);
  }
  const OpaqueEntry& entry = kEntries[index];
  void* fn = nccl_lamport::resolveRealNccl(entry.name);
  if (fn == nullptr) {
    if (!warned[index].exchange(true)) {
      LAMPORT_WARN("%s: the real NCCL has no such function; calls to it return %s", entry.name,
                   entry.fallbackText);
    }
    fn = reinterpret_cast<void*>(entry.fallback);
  }
  __atomic_store_n(&nccl_lamport_opaque_real[index], fn, __ATOMIC_RELEASE);
  return fn;
}
