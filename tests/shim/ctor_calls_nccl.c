/* A library whose constructor calls NCCL through libnccl-lamport.so, as a library linked against
 * NCCL may do when another thread dlopens it: the constructor runs under the dynamic loader's
 * lock. Used by tests/shim/test_resolve_lock_order.cc, which names in the environment the object
 * to call (LAMPORT_CTOR_SO, already loaded) and the entry (LAMPORT_CTOR_ENTRY). The constructor
 * first waits (LAMPORT_CTOR_DELAY_MS), so that the test's other thread makes its own first call
 * while this one holds the loader's lock; the outcome goes to ctorCallsNcclResult. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 0: not run; 1: the call returned what the stand-in NCCL gives; -1: anything else. */
int ctorCallsNcclResult;

__attribute__((constructor)) static void callNcclUnderTheLoaderLock(void) {
  const char* so = getenv("LAMPORT_CTOR_SO");
  const char* entry = getenv("LAMPORT_CTOR_ENTRY");
  const char* delay = getenv("LAMPORT_CTOR_DELAY_MS");
  if (so == NULL || entry == NULL) return;
  const long ms = delay != NULL ? atol(delay) : 0;
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
  void* handle = dlopen(so, RTLD_NOW | RTLD_NOLOAD);
  void* fn = handle != NULL ? dlsym(handle, entry) : NULL;
  ctorCallsNcclResult = -1;
  if (fn == NULL) return;
  if (strcmp(entry, "ncclGetVersion") == 0) {
    int version = 0;
    if (((int (*)(int*))fn)(&version) == 0 && version == 22800) ctorCallsNcclResult = 1;
  } else if (strcmp(entry, "ncclAllReduce") == 0) {
    /* the stand-in has no ncclAllReduce: the wrapper's ncclSystemError (2) */
    if (((int (*)(const void*, void*, size_t, int, int, void*, void*))fn)(NULL, NULL, 0, 0, 0, NULL, NULL) == 2)
      ctorCallsNcclResult = 1;
  } else if (strcmp(entry, "ncclTeamRail") == 0) {
    /* tests/shim/fake_opaque_nccl.c: 2 * x + y */
    if (((double (*)(double, long))fn)(1.5, 4) == 7.0) ctorCallsNcclResult = 1;
  }
  dlclose(handle);
}
