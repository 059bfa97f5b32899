/* libnccl-lamport-audit.so: an LD_AUDIT module (rtld-audit(7)) that makes programs which dlopen
 * NCCL by name (JAX/XLA, CuPy, any dlopen("libnccl.so.2")) load libnccl-lamport.so instead, where
 * LD_PRELOAD does not help because they look every symbol up by handle.
 *
 *   LD_AUDIT=/abs/path/lib/libnccl-lamport-audit.so python3 app.py
 *
 * la_objsearch redirects every search for a file named libnccl.so.2 or libnccl.so (any
 * directory; DT_NEEDED entries too) to libnccl-lamport.so beside this module, except the searches
 * libnccl-lamport.so itself makes for the real NCCL (la_objopen/la_objclose track its link maps) and
 * the prefixed name of plugin/audit_protocol.h, which is mapped back to the plain name. Either
 * becomes the path of the first redirected request that named an existing file by path, if any:
 * a program that asks for /opt/nccl/lib/libnccl.so.2 gets that NCCL behind libnccl-lamport.so.
 *
 * Plain C with no dependency but libc: auditors run in their own link-map namespace, before the
 * program, and must not drag a C++ runtime in. Silent unless NCCL_LAMPORT_AUDIT_DEBUG=1, which
 * prints every decision to stderr. The loader calls the la_* functions with its load lock held,
 * so the state below needs no locking.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/audit_protocol.h"

#define AUDIT_EXPORT __attribute__((visibility("default")))
#define MAX_OWN_MAPS 16 /* link maps of libnccl-lamport.so: one per namespace (dlmopen) */

static char gTarget[4096]; /* libnccl-lamport.so beside this module; "" turns redirects off */
static struct stat gTargetStat;
static char gRequestedPath[4096]; /* first redirected request by path to an existing file */
static uintptr_t* gOwnCookies[MAX_OWN_MAPS];
static int gOwnCount;
static int gDebug;

/* Writes "nccl-lamport-audit: a b c\n" to stderr when NCCL_LAMPORT_AUDIT_DEBUG=1 (no stdio: it
 * would buffer, and this runs before the program sets anything up). */
static void debugLine(const char* a, const char* b, const char* c) {
  if (!gDebug) return;
  const char* parts[] = {"nccl-lamport-audit: ", a, b, c, "\n"};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); ++i) {
    if (parts[i] != NULL && write(STDERR_FILENO, parts[i], strlen(parts[i])) < 0) return;
  }
}

/* Finds libnccl-lamport.so in this module's own directory. */
static void findTarget(void) {
  Dl_info info;
  memset(&info, 0, sizeof(info));
  if (dladdr((void*)&findTarget, &info) == 0 || info.dli_fname == NULL) return;
  const char* slash = strrchr(info.dli_fname, '/');
  const size_t dirLength = slash == NULL ? 0 : (size_t)(slash - info.dli_fname) + 1;
  if (dirLength == 0 || dirLength + sizeof(NCCL_LAMPORT_OBJECT_NAME) > sizeof(gTarget)) {
    debugLine("cannot tell the directory of ", info.dli_fname, " (give LD_AUDIT an absolute path): redirects off");
    return;
  }
  char candidate[sizeof(gTarget)];
  memcpy(candidate, info.dli_fname, dirLength);
  memcpy(candidate + dirLength, NCCL_LAMPORT_OBJECT_NAME, sizeof(NCCL_LAMPORT_OBJECT_NAME));
  if (stat(candidate, &gTargetStat) != 0) {
    debugLine("missing ", candidate, ": redirects off");
    return;
  }
  memcpy(gTarget, candidate, sizeof(candidate));
  debugLine("redirecting libnccl.so.2 and libnccl.so to ", gTarget, "");
}

static int isOwnObject(const uintptr_t* cookie) {
  for (int i = 0; i < gOwnCount; ++i) {
    if (gOwnCookies[i] == cookie) return 1;
  }
  return 0;
}

static int isNcclName(const char* name) {
  const char* slash = strrchr(name, '/');
  const char* base = slash == NULL ? name : slash + 1;
  return strcmp(base, "libnccl.so.2") == 0 || strcmp(base, "libnccl.so") == 0;
}

AUDIT_EXPORT unsigned int la_version(unsigned int version) {
  const char* debug = getenv("NCCL_LAMPORT_AUDIT_DEBUG");
  gDebug = debug != NULL && strcmp(debug, "1") == 0;
  findTarget();
  /* 0 would unload us; a loader older than our headers gets its own version (we use nothing
   * newer than version 1: la_objsearch and la_objopen). */
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

/* Remembers libnccl-lamport.so under whatever name it was opened (a redirect, its own path, the
 * libnccl-tuner-lamport.so link): same file, same device and inode. */
AUDIT_EXPORT unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t* cookie) {
  (void)lmid;
  struct stat st;
  if (gTarget[0] != '\0' && gOwnCount < MAX_OWN_MAPS && map->l_name != NULL && map->l_name[0] != '\0' &&
      stat(map->l_name, &st) == 0 && st.st_dev == gTargetStat.st_dev && st.st_ino == gTargetStat.st_ino) {
    gOwnCookies[gOwnCount++] = cookie;
    debugLine("opened ", map->l_name, "");
  }
  return 0; /* no symbol-binding audit: no la_symbind, no PLT cost */
}

/* Forgets an unloaded libnccl-lamport.so: its cookie's memory may serve another object later. */
AUDIT_EXPORT unsigned int la_objclose(uintptr_t* cookie) {
  for (int i = 0; i < gOwnCount; ++i) {
    if (gOwnCookies[i] == cookie) gOwnCookies[i--] = gOwnCookies[--gOwnCount];
  }
  return 0;
}

AUDIT_EXPORT char* la_objsearch(const char* name, uintptr_t* cookie, unsigned int flag) {
  /* Only the name as requested (LA_SER_ORIG), before the loader expands it into directories. */
  if (flag != LA_SER_ORIG || gTarget[0] == '\0') return (char*)name;
  const size_t prefixLength = sizeof(NCCL_LAMPORT_REAL_NCCL_PREFIX) - 1;
  if (strncmp(name, NCCL_LAMPORT_REAL_NCCL_PREFIX, prefixLength) == 0) {
    const char* real = gRequestedPath[0] != '\0' ? gRequestedPath : name + prefixLength;
    debugLine("real NCCL requested: ", real, "");
    return (char*)real;
  }
  if (!isNcclName(name)) return (char*)name;
  if (isOwnObject(cookie)) {
    /* Its search by name for the real NCCL: the file the program asked for, if it named one. */
    const char* real = strchr(name, '/') == NULL && gRequestedPath[0] != '\0' ? gRequestedPath : name;
    debugLine(name, " requested by libnccl-lamport.so itself: not redirected: ", real);
    return (char*)real;
  }
  if (strchr(name, '/') != NULL && gRequestedPath[0] == '\0' && strlen(name) < sizeof(gRequestedPath) &&
      access(name, R_OK) == 0) {
    strcpy(gRequestedPath, name);
  }
  debugLine("redirect ", name, " -> libnccl-lamport.so");
  return gTarget;
}
