/* Under LD_AUDIT, a program whose only reachable libnccl.so.2 is the one its own DT_RUNPATH or
 * DT_RPATH names (pip PyTorch: libtorch_cuda.so, RPATH $ORIGIN/../../nvidia/nccl/lib) must get
 * libnccl-lamport.so, with that very file behind it: not the NCCL our object would find through
 * its own search path (ld.so.cache, /usr/local/cuda/lib, LD_LIBRARY_PATH for an RPATH).
 *
 *   runpath_check audit FAKE   under LD_AUDIT: libnccl.so.2 is our object, ncclGetVersion through
 *                              it reports 2.99.99, and the real NCCL behind it is the file FAKE
 *   runpath_check stock FAKE   without LD_AUDIT: libnccl.so.2 is FAKE itself (it is reachable)
 *
 * Built with RUNPATH_LINKED: linked against FAKE (DT_NEEDED libnccl.so.2, found at start-up, and
 * ncclGetVersion bound then); without: dlopen("libnccl.so.2") by name, which the loader searches
 * with this program's RUNPATH / RPATH. FAKE is tests/shim/runpath_fake_nccl.c. Prints
 * "runpath_check: PASS" and exits 0 on success. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "plugin/loader/audit_protocol.h"
#include "runpath_fake_nccl.h"
#include "shim_check.h"

typedef int (*GetVersionFn)(int*);

#ifdef RUNPATH_LINKED
extern int ncclGetVersion(int* version);
#endif

static int isOurs(void* handle) { return dlsym(handle, "ncclLamportIsActive") != NULL; }

/* The file behind a handle: same device and inode as `path`. */
static int isFile(void* handle, const char* path) {
  struct link_map* map = NULL;
  struct stat loaded;
  struct stat wanted;
  return handle != NULL && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map->l_name != NULL &&
         stat(map->l_name, &loaded) == 0 && stat(path, &wanted) == 0 && loaded.st_dev == wanted.st_dev &&
         loaded.st_ino == wanted.st_ino;
}

int main(int argc, char** argv) {
  const char* mode = argc > 2 ? argv[1] : "";
  const char* fake = argc > 2 ? argv[2] : "";
  const int audit = strcmp(mode, "audit") == 0;
  if (!audit && strcmp(mode, "stock") != 0) {
    fprintf(stderr, "usage: %s audit|stock FAKE_LIBNCCL\n", argv[0]);
    return 2;
  }
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (nccl == NULL) {
    fprintf(stderr, "FAIL: dlopen(\"libnccl.so.2\"): %s\n", dlerror());
    return 1;
  }
  CHECK(isOurs(nccl) == audit, "libnccl.so.2 %s libnccl-lamport.so", audit ? "is not" : "is");

  int version = 0;
  GetVersionFn getVersion = (GetVersionFn)dlsym(nccl, "ncclGetVersion");
  CHECK(getVersion != NULL && getVersion(&version) == 0, "ncclGetVersion by handle failed");
  CHECK(version == RUNPATH_FAKE_NCCL_VERSION, "ncclGetVersion by handle: %d, not the %d of %s", version,
        RUNPATH_FAKE_NCCL_VERSION, fake);
#ifdef RUNPATH_LINKED
  version = 0;
  CHECK(ncclGetVersion(&version) == 0 && version == RUNPATH_FAKE_NCCL_VERSION,
        "ncclGetVersion bound at start-up: %d, not the %d of %s", version, RUNPATH_FAKE_NCCL_VERSION, fake);
#endif
  printf("ncclGetVersion: %d (%s)\n", version, audit ? "through libnccl-lamport.so" : "stock");

  if (audit) {
    /* The NCCL our object loaded, under the name only the audit module answers (with the file it
     * remembered for the program's request). */
    void* real = dlopen(NCCL_LAMPORT_REAL_NCCL_PREFIX "libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    CHECK(real != NULL && !isOurs(real) && isFile(real, fake), "the real NCCL behind our object is not %s", fake);
  } else {
    CHECK(isFile(nccl, fake), "libnccl.so.2 without LD_AUDIT is not %s", fake);
  }
  return shimCheckResult("runpath_check");
}
