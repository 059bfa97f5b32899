/* Loads NCCL the way programs that do it themselves do (dlopen, then dlsym on the handle: vLLM's
 * pynccl, JAX/XLA, CuPy) and checks which library answered. No GPU needed: ncclGetVersion,
 * ncclGetErrorString and ncclGetUniqueId work without one.
 *
 *   dlopen_nccl path SO                 dlopen(SO): our object, which finds the real NCCL itself
 *   dlopen_nccl name-audit SO           dlopen("libnccl.so.2") under LD_AUDIT: must be our object
 *   dlopen_nccl path-then-name-audit SO dlopen(SO), then dlopen("libnccl.so.2") under LD_AUDIT
 *   dlopen_nccl abs-path-audit SO NCCL  dlopen(NCCL, a path to a real libnccl.so.2) under LD_AUDIT:
 *                                       our object, with that very NCCL behind it
 *   dlopen_nccl chdir-name-audit SO     as name-audit, after chdir("/") (LD_AUDIT given relative to
 *                                       the starting directory)
 *   dlopen_nccl name-real               dlopen("libnccl.so.2") without LD_AUDIT: the real NCCL
 *   dlopen_nccl self SO                 NCCL_LAMPORT_NCCL_PATH names our object: calls fail cleanly
 *
 * The glibc behaviour behind "name-audit" (seen with glibc 2.36): a library loaded through an
 * la_objsearch redirect keeps the requested name ("libnccl.so.2", or the path asked for) among
 * its names, and dlopen compares names with loaded objects before asking the auditor, so our
 * object's own dlopen("libnccl.so.2") returns itself; the plugin works around it
 * (plugin/loader/audit_protocol.h), and this test fails if it does not. When our object was loaded by
 * its own path first ("path-then-name-audit"), the name stays free and the audit module lets our
 * object's request through. Prints "dlopen_nccl: PASS" and exits 0 on success.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/loader/audit_protocol.h"
#include "shim_check.h"

typedef ncclResult_t (*GetVersionFn)(int*);
typedef const char* (*ErrorStringFn)(ncclResult_t);
typedef ncclResult_t (*UniqueIdFn)(ncclUniqueId*);

static void* mustOpen(const char* name, int flags) {
  void* handle = dlopen(name, flags);
  if (handle == NULL) {
    fprintf(stderr, "FAIL: dlopen(%s): %s\n", name, dlerror());
    exit(1);
  }
  return handle;
}

static int isOurs(void* handle) { return dlsym(handle, "ncclLamportIsActive") != NULL; }

static ElfW(Addr) loadBias(void* handle) {
  struct link_map* map = NULL;
  return dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 ? map->l_addr : 0;
}

struct FindOther {
  ElfW(Addr) skipBias;
  char path[4096];
};
static struct FindOther gRealFound; /* the last loadedRealNccl() result */

static int findOtherNccl(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct FindOther* find = (struct FindOther*)data;
  const char* slash = strrchr(info->dlpi_name, '/');
  const char* base = slash == NULL ? info->dlpi_name : slash + 1;
  if (strcmp(base, "libnccl.so.2") != 0 || info->dlpi_addr == find->skipBias) return 0;
  snprintf(find->path, sizeof(find->path), "%s", info->dlpi_name);
  return 1;
}

/* The real libnccl.so.2 that is loaded in this process besides `ours`, or NULL. Opened by its
 * full path: a path matches the loaded object's name before any auditor runs, unless our object
 * carries that name too (the program asked for that path and got us): then through the audit
 * module's protocol, which answers with that path and the loader finds the loaded file. */
static void* loadedRealNccl(void* ours) {
  memset(&gRealFound, 0, sizeof(gRealFound));
  gRealFound.skipBias = loadBias(ours);
  if (!dl_iterate_phdr(findOtherNccl, &gRealFound)) return NULL;
  printf("real NCCL loaded by the plugin: %s\n", gRealFound.path);
  void* real = dlopen(gRealFound.path, RTLD_NOW | RTLD_NOLOAD);
  if (real != NULL && isOurs(real)) real = dlopen(NCCL_LAMPORT_REAL_NCCL_PREFIX "libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  return real;
}

/* Calls through `ours` and compares with the real library `real`. */
static void checkForwarding(void* ours, void* real) {
  CHECK(isOurs(ours), "the handle is not libnccl-lamport.so (no ncclLamportIsActive)");
  CHECK(real != NULL && !isOurs(real), "no real NCCL besides our object");
  if (real == NULL) return;
  GetVersionFn version = (GetVersionFn)dlsym(ours, "ncclGetVersion");
  GetVersionFn realVersion = (GetVersionFn)dlsym(real, "ncclGetVersion");
  int ourCode = 0;
  int realCode = -1;
  CHECK(version != NULL && version(&ourCode) == ncclSuccess, "ncclGetVersion through our object failed");
  CHECK(realVersion != NULL && realVersion(&realCode) == ncclSuccess, "real ncclGetVersion failed");
  CHECK(ourCode == realCode, "ncclGetVersion: ours %d, real %d", ourCode, realCode);
  printf("ncclGetVersion: %d (header %d)\n", ourCode, NCCL_VERSION_CODE);

  ErrorStringFn text = (ErrorStringFn)dlsym(ours, "ncclGetErrorString");
  ErrorStringFn realText = (ErrorStringFn)dlsym(real, "ncclGetErrorString");
  CHECK(text != NULL && realText != NULL, "ncclGetErrorString missing");
  if (text != NULL && realText != NULL) {
    CHECK(strcmp(text(ncclInvalidUsage), realText(ncclInvalidUsage)) == 0, "ncclGetErrorString: \"%s\" vs \"%s\"",
          text(ncclInvalidUsage), realText(ncclInvalidUsage));
    printf("ncclGetErrorString(ncclInvalidUsage): %s\n", text(ncclInvalidUsage));
  }

  UniqueIdFn uniqueId = (UniqueIdFn)dlsym(ours, "ncclGetUniqueId");
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  static const ncclUniqueId kZero;
  CHECK(uniqueId != NULL && uniqueId(&id) == ncclSuccess, "ncclGetUniqueId through our object failed");
  CHECK(memcmp(&id, &kZero, sizeof(id)) != 0, "ncclGetUniqueId left the id all zero");
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const char* so = argc > 2 ? argv[2] : NULL;
  const int flags = RTLD_NOW | RTLD_LOCAL;
  if (strcmp(mode, "path") == 0 && so != NULL) {
    void* ours = mustOpen(so, flags);
    /* The first forwarded call makes the plugin load libnccl.so.2 by name (nothing loaded it). */
    int code = 0;
    ((GetVersionFn)dlsym(ours, "ncclGetVersion"))(&code);
    checkForwarding(ours, loadedRealNccl(ours));
  } else if ((strcmp(mode, "name-audit") == 0 || strcmp(mode, "path-then-name-audit") == 0 ||
              strcmp(mode, "chdir-name-audit") == 0) &&
             so != NULL) {
    char absolute[4096];
    if (strcmp(mode, "chdir-name-audit") == 0) {
      /* The program moves away from the directory a relative LD_AUDIT was given from. */
      CHECK(realpath(so, absolute) != NULL, "realpath(%s)", so);
      so = absolute;
      CHECK(chdir("/") == 0, "chdir(\"/\")");
    }
    void* byPath = strcmp(mode, "path-then-name-audit") == 0 ? mustOpen(so, flags) : NULL;
    void* ours = mustOpen("libnccl.so.2", flags);
    CHECK(isOurs(ours), "dlopen(\"libnccl.so.2\") under LD_AUDIT did not give libnccl-lamport.so");
    CHECK(byPath == NULL || byPath == ours, "the redirect gave a second copy of our object");
    CHECK(loadBias(ours) == loadBias(mustOpen(so, flags | RTLD_NOLOAD)), "not the object at %s", so);
    int code = 0;
    ((GetVersionFn)dlsym(ours, "ncclGetVersion"))(&code);
    checkForwarding(ours, loadedRealNccl(ours));
  } else if (strcmp(mode, "abs-path-audit") == 0 && so != NULL && argc > 3) {
    void* ours = mustOpen(argv[3], flags);
    CHECK(isOurs(ours), "dlopen(%s) under LD_AUDIT did not give libnccl-lamport.so", argv[3]);
    int code = 0;
    ((GetVersionFn)dlsym(ours, "ncclGetVersion"))(&code);
    checkForwarding(ours, loadedRealNccl(ours));
    CHECK(strcmp(gRealFound.path, argv[3]) == 0, "the real NCCL is %s, not the %s the program asked for",
          gRealFound.path, argv[3]);
  } else if (strcmp(mode, "name-real") == 0) {
    void* real = mustOpen("libnccl.so.2", flags);
    CHECK(!isOurs(real), "dlopen(\"libnccl.so.2\") without LD_AUDIT gave our object");
    int code = 0;
    CHECK(((GetVersionFn)dlsym(real, "ncclGetVersion"))(&code) == ncclSuccess && code > 0, "real ncclGetVersion");
    printf("real ncclGetVersion: %d\n", code);
  } else if (strcmp(mode, "self") == 0 && so != NULL) {
    void* ours = mustOpen(so, flags);
    int code = 0;
    CHECK(((GetVersionFn)dlsym(ours, "ncclGetVersion"))(&code) == ncclSystemError,
          "ncclGetVersion with only ourselves as NCCL must fail with ncclSystemError");
    const char* text = ((ErrorStringFn)dlsym(ours, "ncclGetErrorString"))(ncclSuccess);
    CHECK(strncmp(text, "nccl-lamport:", 13) == 0, "ncclGetErrorString without NCCL: \"%s\"", text);
    ncclUniqueId id;
    CHECK(((UniqueIdFn)dlsym(ours, "ncclGetUniqueId"))(&id) == ncclSystemError, "ncclGetUniqueId must fail");
    CHECK(loadedRealNccl(ours) == NULL, "a real NCCL got loaded although NCCL_LAMPORT_NCCL_PATH named us");
  } else {
    fprintf(stderr, "usage: %s path|name-audit|path-then-name-audit|chdir-name-audit|self SO | abs-path-audit SO NCCL | name-real\n",
            argv[0]);
    return 2;
  }
  return shimCheckResult("dlopen_nccl");
}
