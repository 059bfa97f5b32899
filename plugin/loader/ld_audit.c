/* libnccl-lamport-audit.so: an LD_AUDIT module (rtld-audit(7)) that makes programs which dlopen
 * NCCL by name (JAX/XLA, CuPy, any dlopen("libnccl.so.2")) load libnccl-lamport.so instead, where
 * LD_PRELOAD does not help because they look every symbol up by handle.
 *
 *   LD_AUDIT=/abs/path/lib/libnccl-lamport-audit.so python3 app.py
 *
 * la_objsearch redirects requests for a file named libnccl.so.2 or libnccl.so (DT_NEEDED entries
 * too) to libnccl-lamport.so beside this module, as they are made (LA_SER_ORIG), except the
 * requests libnccl-lamport.so itself makes for the real NCCL (la_objopen/la_objclose track its
 * link maps) and the prefixed name of plugin/loader/audit_protocol.h.
 *
 * The real NCCL behind our object is the file the loader would have given the program for that
 * request without this module, which our object's own search cannot see: the requester's
 * DT_RPATH / DT_RUNPATH (pip PyTorch's libtorch_cuda.so: $ORIGIN/../../nvidia/nccl/lib). So for a
 * bare name, decideRealNccl looks along the requester's search list and remembers the file; our
 * object then asks for the real NCCL under the prefixed name and gets that path. A request by path
 * is remembered as it is (a missing or foreign file is not redirected: the loader fails on it as
 * it would have). A bare name is redirected even if no NCCL is found: our object then says so
 * (WARN) on its first call. The first program request decides for the process (our object loads
 * one NCCL): another requester with another RUNPATH gets our object with that first NCCL behind
 * it. With NCCL_LAMPORT_NCCL_PATH set at start the plugin uses that file whatever was asked for, so
 * nothing is looked up, and every request is redirected.
 *
 * Redirecting at LA_SER_ORIG, not at the candidate path the loader tries later, matters: glibc
 * names an object after the path it tried, so a later redirect would leave our object named as
 * the NCCL file (dladdr, dl_iterate_phdr, debuggers).
 *
 * Plain C with no dependency but libc: auditors run in their own link-map namespace, before the
 * program, and must not drag a C++ runtime in. Silent unless NCCL_LAMPORT_AUDIT_DEBUG=1 (or true/yes), which
 * prints every decision to stderr. The loader calls the la_* functions with its load lock held,
 * so the state below needs no locking.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bool_knob.h"
#include "plugin/loader/audit_protocol.h"

#define AUDIT_EXPORT __attribute__((visibility("default")))
#define MAX_OWN_MAPS 16 /* link maps of libnccl-lamport.so: one per namespace (dlmopen) */
#define PATH_BYTES 4096

/* A search list from dlinfo(RTLD_DI_SERINFO): room for a few hundred directories. */
typedef union {
  Dl_serinfo info;
  char bytes[32768];
} SearchList;

static char gTarget[PATH_BYTES]; /* libnccl-lamport.so beside this module; "" turns redirects off */
static struct stat gTargetStat;
static ElfW(Ehdr) gTargetHeader; /* its ELF class, byte order and machine: the loader's too */
static struct link_map* gSelfMap; /* this module: its search list ends as every object's does */
static int gConfiguredPath;       /* NCCL_LAMPORT_NCCL_PATH set at start */
static int gDecided;              /* a program's request chose the real NCCL: gRealPath, or "" */
static char gRealPath[PATH_BYTES]; /* "" after a decision: ld.so.cache and the default directories */
static SearchList gRequesterList;
static SearchList gSharedList;
static uintptr_t* gOwnCookies[MAX_OWN_MAPS];
static int gOwnCount;
static int gDebug;
/* Why redirects are off, when they are: told (under NCCL_LAMPORT_AUDIT_DEBUG) at the first request
 * for an NCCL library, not at every exec of a program that never asks for one. */
static const char* gTargetProblem = "";

/* Writes "nccl-lamport-audit: a b c\n" to stderr when NCCL_LAMPORT_AUDIT_DEBUG=1 (no stdio: it
 * would buffer, and this runs before the program sets anything up). */
static void debugLine(const char* a, const char* b, const char* c) {
  if (!gDebug) return;
  const char* parts[] = {"nccl-lamport-audit: ", a, b, c, "\n"};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); ++i) {
    if (parts[i] != NULL && write(STDERR_FILENO, parts[i], strlen(parts[i])) < 0) return;
  }
}

static int readHeader(const char* path, ElfW(Ehdr)* header, struct stat* st) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const int ok = read(fd, header, sizeof(*header)) == (ssize_t)sizeof(*header) && fstat(fd, st) == 0 &&
                 memcmp(header->e_ident, ELFMAG, SELFMAG) == 0;
  close(fd);
  return ok;
}

/* Finds libnccl-lamport.so in this module's own directory. */
static void findTarget(void) {
  Dl_info info;
  memset(&info, 0, sizeof(info));
  if (dladdr1((void*)&findTarget, &info, (void**)&gSelfMap, RTLD_DL_LINKMAP) == 0 || info.dli_fname == NULL) return;
  const char* slash = strrchr(info.dli_fname, '/');
  const size_t dirLength = slash == NULL ? 0 : (size_t)(slash - info.dli_fname) + 1;
  /* A relative LD_AUDIT (./lib/...) is made absolute now: the program may change its working
   * directory before it asks for NCCL, and a relative redirect would then name no file. */
  char cwd[sizeof(gTarget)];
  size_t cwdLength = 0;
  if (dirLength != 0 && info.dli_fname[0] != '/') {
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
      gTargetProblem = "cannot tell the working directory the relative LD_AUDIT path starts from";
      return;
    }
    cwdLength = strlen(cwd);
    cwd[cwdLength++] = '/';
  }
  if (dirLength == 0 || cwdLength + dirLength + sizeof(NCCL_LAMPORT_OBJECT_NAME) > sizeof(gTarget)) {
    gTargetProblem = "cannot tell the directory of the audit module (give LD_AUDIT an absolute path)";
    return;
  }
  char candidate[sizeof(gTarget)];
  memcpy(candidate, cwd, cwdLength);
  memcpy(candidate + cwdLength, info.dli_fname, dirLength);
  memcpy(candidate + cwdLength + dirLength, NCCL_LAMPORT_OBJECT_NAME, sizeof(NCCL_LAMPORT_OBJECT_NAME));
  if (!readHeader(candidate, &gTargetHeader, &gTargetStat)) {
    gTargetProblem = "libnccl-lamport.so beside the audit module is missing or not ELF";
    return;
  }
  memcpy(gTarget, candidate, sizeof(candidate));
}

static int isTargetFile(const struct stat* st) {
  return st->st_dev == gTargetStat.st_dev && st->st_ino == gTargetStat.st_ino;
}

enum FileKind { kNotLoadable, kOurObject, kNccl };

/* What the loader would make of `path`: it passes over what it cannot open and ELF files of
 * another class or machine; a link to libnccl-lamport.so is no real NCCL. */
static enum FileKind fileKind(const char* path) {
  ElfW(Ehdr) header;
  struct stat st;
  if (!readHeader(path, &header, &st) || header.e_ident[EI_CLASS] != gTargetHeader.e_ident[EI_CLASS] ||
      header.e_ident[EI_DATA] != gTargetHeader.e_ident[EI_DATA] || header.e_machine != gTargetHeader.e_machine) {
    return kNotLoadable;
  }
  return isTargetFile(&st) ? kOurObject : kNccl;
}

static void rememberRealNccl(const char* path) {
  if (strlen(path) >= sizeof(gRealPath)) return;
  strcpy(gRealPath, path);
  gDecided = 1;
  debugLine("real NCCL (kept for the process): ", path, "");
}

/* The directories the loader searches for a bare name asked for by `map`, in its order, with
 * $ORIGIN and the like expanded; NULL if they do not fit or cannot be read. */
static const Dl_serinfo* searchList(struct link_map* map, SearchList* list) {
  Dl_serinfo size;
  if (map == NULL || dlinfo(map, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size > sizeof(*list)) return NULL;
  list->info.dls_size = size.dls_size;
  list->info.dls_cnt = size.dls_cnt;
  return dlinfo(map, RTLD_DI_SERINFO, &list->info) == 0 ? &list->info : NULL;
}

/* The file the loader would load for a bare `name` asked for by `requester`. It tries the
 * requester's DT_RPATH chain and the executable's, LD_LIBRARY_PATH, the requester's DT_RUNPATH,
 * ld.so.cache, then the default directories; RTLD_DI_SERINFO lists all but the cache (and the
 * glibc-hwcaps subdirectories tried first in each, where NCCL is not installed). Only the
 * part of that list that is the requester's own is looked at here: the tail it shares with this
 * module's list (the default directories, and LD_LIBRARY_PATH for a requester without RUNPATH)
 * is what our object's own search goes through anyway, cache included, once it leaves out its own
 * RUNPATH (la_objsearch does that after a decision with no file). */
static void decideRealNccl(struct link_map* requester, const char* name) {
  const Dl_serinfo* list = searchList(requester, &gRequesterList);
  const Dl_serinfo* shared = searchList(gSelfMap, &gSharedList);
  if (list == NULL || shared == NULL) {
    debugLine("no search list for this request of ", name, ": libnccl-lamport.so searches the real NCCL itself");
    return;
  }
  unsigned int own = list->dls_cnt;
  for (unsigned int common = shared->dls_cnt; own > 0 && common > 0; --own, --common) {
    if (strcmp(list->dls_serpath[own - 1].dls_name, shared->dls_serpath[common - 1].dls_name) != 0) break;
  }
  char path[PATH_BYTES];
  for (unsigned int i = 0; i < own; ++i) {
    const char* dir = list->dls_serpath[i].dls_name;
    const size_t dirLength = strlen(dir);
    if (dirLength + 1 + strlen(name) >= sizeof(path)) continue;
    memcpy(path, dir, dirLength);
    path[dirLength] = '/';
    strcpy(path + dirLength + 1, name);
    const enum FileKind kind = fileKind(path);
    if (kind == kNccl) {
      rememberRealNccl(path);
      return;
    }
    if (kind == kOurObject) {
      debugLine(path, " is libnccl-lamport.so itself: libnccl-lamport.so searches the real NCCL itself", "");
      return;
    }
  }
  gDecided = 1;
  debugLine("no ", name, " on the requester's own search path: the real NCCL is what ld.so.cache or the default "
            "directories give");
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

/* True if `name` holds a dynamic string token the loader expands after la_objsearch ($ORIGIN,
 * $LIB, $PLATFORM, or in braces; unbraced, one ends at '/' or the end). Any other '$' is an
 * ordinary character of the path: the loader opens such a path as written, and so do we. */
static int hasDynamicToken(const char* name) {
  static const char* const kTokens[] = {"ORIGIN", "LIB", "PLATFORM"};
  for (const char* dollar = strchr(name, '$'); dollar != NULL; dollar = strchr(dollar + 1, '$')) {
    const int braced = dollar[1] == '{';
    const char* token = dollar + 1 + braced;
    for (size_t i = 0; i < sizeof(kTokens) / sizeof(kTokens[0]); ++i) {
      const size_t length = strlen(kTokens[i]);
      if (strncmp(token, kTokens[i], length) != 0) continue;
      const char next = token[length];
      if (braced ? next == '}' : next == '\0' || next == '/') return 1; /* glibc's is_dst */
    }
  }
  return 0;
}

AUDIT_EXPORT unsigned int la_version(unsigned int version) {
  const char* debug = getenv("NCCL_LAMPORT_AUDIT_DEBUG");
  /* The plugin's own boolean parser (header only, libc only): unknown values leave it off. */
  int on = 0;
  gDebug = lamportParseBool(debug, &on) && on;
  const char* configured = getenv("NCCL_LAMPORT_NCCL_PATH");
  gConfiguredPath = configured != NULL && configured[0] != '\0';
  findTarget();
  /* 0 would unload us; a loader older than our headers gets its own version (we use nothing
   * newer than version 1: la_objsearch and la_objopen). */
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

/* Keeps every object's link map in its cookie (a requester's search list comes from it), and
 * remembers libnccl-lamport.so under whatever name it was opened (a redirect, its own path, the
 * libnccl-tuner-lamport.so link): same file, same device and inode. */
AUDIT_EXPORT unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t* cookie) {
  (void)lmid;
  *cookie = (uintptr_t)map;
  struct stat st;
  if (gTarget[0] != '\0' && gOwnCount < MAX_OWN_MAPS && map->l_name != NULL && map->l_name[0] != '\0' &&
      stat(map->l_name, &st) == 0 && isTargetFile(&st)) {
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
  if (gTarget[0] == '\0') {
    if (flag == LA_SER_ORIG && isNcclName(name)) {
      debugLine(name, " not redirected: ", gTargetProblem);
    }
    return (char*)name;
  }
  if (flag != LA_SER_ORIG) {
    /* The program's search ended in ld.so.cache or the default directories: our object's own
     * search for the real NCCL goes there too, past its RUNPATH (no part of the program's). */
    if (flag == LA_SER_RUNPATH && gDecided && gRealPath[0] == '\0' && isNcclName(name) && isOwnObject(cookie)) {
      debugLine("skipping ", name, " on the RUNPATH of libnccl-lamport.so");
      return NULL;
    }
    return (char*)name;
  }
  const size_t prefixLength = sizeof(NCCL_LAMPORT_REAL_NCCL_PREFIX) - 1;
  if (strncmp(name, NCCL_LAMPORT_REAL_NCCL_PREFIX, prefixLength) == 0) {
    const char* real = gRealPath[0] != '\0' ? gRealPath : name + prefixLength;
    debugLine("real NCCL requested: ", real, "");
    return (char*)real;
  }
  if (!isNcclName(name)) return (char*)name;
  const int byPath = strchr(name, '/') != NULL;
  if (isOwnObject(cookie)) {
    /* Its search by name for the real NCCL: the file the program's request would have loaded. */
    const char* real = !byPath && gRealPath[0] != '\0' ? gRealPath : name;
    debugLine(name, " requested by libnccl-lamport.so itself: not redirected: ", real);
    return (char*)real;
  }
  /* A path with $ORIGIN or the like is expanded only after this call: taken as it comes. */
  if (byPath && !hasDynamicToken(name)) {
    const enum FileKind kind = fileKind(name);
    if (kind == kNotLoadable && !gConfiguredPath) {
      debugLine(name, " is no loadable file: not redirected", "");
      return (char*)name;
    }
    if (kind == kNccl && !gDecided && !gConfiguredPath) rememberRealNccl(name);
  } else if (!byPath && !gDecided && !gConfiguredPath) {
    decideRealNccl((struct link_map*)*cookie, name);
  }
  debugLine("redirect ", name, " -> libnccl-lamport.so");
  return gTarget;
}
