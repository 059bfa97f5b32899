/* A library whose constructor, run under the dynamic loader's lock by the thread that dlopens it,
 * calls back into the process that loads it: the function whose address is in
 * LAMPORT_CTOR_CALLBACK (hexadecimal, set by the test in the same process). Used by
 * tests/unit/test_loader_lock_order.cc to call plugin code from a constructor. */
#include <stdint.h>
#include <stdlib.h>

__attribute__((constructor)) static void runCallbackUnderTheLoaderLock(void) {
  const char* text = getenv("LAMPORT_CTOR_CALLBACK");
  if (text == NULL) return;
  const uintptr_t address = (uintptr_t)strtoull(text, NULL, 16);
  if (address != 0) ((void (*)(void))address)();
}
