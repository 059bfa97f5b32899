// The replaceable global allocation functions of the fault scenarios (tests/shim/alloc_faults.h).
// Defined in the executable, they are found before libstdc++'s by every shared object's lookup.
#include "tests/shim/alloc_faults.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

thread_local int tCountdown = 0;  // > 0: allocations left until the one that throws
std::atomic<int> gFired{0};
std::atomic<int> gOurNewRan{0};

void* allocate(std::size_t size) {
  gOurNewRan.store(1, std::memory_order_relaxed);
  if (tCountdown > 0 && --tCountdown == 0) {
    gFired.store(1);
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

}  // namespace

extern "C" void allocFaultArm(int n) {
  gFired.store(0);
  tCountdown = n > 0 ? n : 0;
}

extern "C" int allocFaultFired(void) { return gFired.load(); }

extern "C" int allocFaultsAvailable(void) {
  gOurNewRan.store(0);
  ::operator delete(::operator new(1));  // a call, not a new-expression: never elided
  return gOurNewRan.load();
}

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
