// The replaceable global allocation functions of the fault scenarios (tests/shim/alloc_faults.h).
// Defined in the executable, they are found before libstdc++'s by every shared object's lookup.
#include "tests/shim/alloc_faults.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

thread_local int tCountdown = 0;  // > 0: allocations left until the one that throws
thread_local bool tAllocated = false;  // this thread has made a C++ allocation (TLS: zero at start)
std::atomic<int> gFired{0};
std::atomic<int> gOurNewRan{0};
std::atomic<int> gNextThreadArm{0};   // > 0: the countdown the next thread to allocate takes
std::atomic<int> gThreadsStarted{0};  // first allocations of threads since allocFaultArmNextThread

void* allocate(std::size_t size) {
  gOurNewRan.store(1, std::memory_order_relaxed);
  if (!tAllocated) {  // this thread's first allocation: it may take the next-thread arm
    tAllocated = true;
    gThreadsStarted.fetch_add(1);
    const int n = gNextThreadArm.exchange(0);
    if (n > 0) tCountdown = n;
  }
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

extern "C" void allocFaultArmNextThread(int n) {
  gNextThreadArm.store(0);
  gFired.store(0);
  gThreadsStarted.store(0);
  gNextThreadArm.store(n > 0 ? n : 0);
}

extern "C" int allocFaultThreadsStarted(void) { return gThreadsStarted.load(); }

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
