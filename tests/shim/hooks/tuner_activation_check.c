/* Tuner activation against the stand-in NCCL (tuner_standin_nccl.c), which loads
 * libnccl-lamport.so as its tuner from NCCL_TUNER_PLUGIN (no LD_PRELOAD). One scenario per run:
 *   reach     ncclLamportGetCommInfo describes the communicator before its first call; a pointer
 *             to ncclAllReduce taken before the first init, the PLT and dlsym on the
 *             stand-in's handle all reach our wrapper after the first init (the per-communicator
 *             info counts the calls), and NCCL's function still runs behind it
 *   cycles N  N create/allreduce/destroy cycles (the stand-in unloads and reloads the tuner each
 *             time); every cycle's call reaches the wrapper
 *   threads   8 threads call ncclAllReduce in a loop while the first init installs the hooks
 *   lognames  the INFO lines of two ranks name each communicator by its handle or commId
 *   concurrent two threads initialise the two ranks of one communicator at once, the first
 *             init installing the hooks: both ranks take part in the set-up
 *   window    a communicator whose init reaches the wrapper while the install is still writing
 *             is set up in the tuner's init like any other
 *   twocopies a second NCCL in the process, not hooked: its communicators are not set up or
 *             described as ours
 *   untouched the hooks must not be installed (NCCL_LAMPORT_ENABLE=0, or mprotect refused by
 *             STANDIN_DENY_WX=1): every entry byte is unchanged, nothing reaches a wrapper and
 *             ncclLamportIsActive() is 0
 *   preloadedcopy another nccl-lamport is preloaded under another file name: the tuner copy
 *             hooks nothing (every entry byte unchanged)
 * Exit 0 and "PASS" on success. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nccl.h>

#include "include/nccl_lamport.h"

extern atomic_long standinAllReduceCalls;
extern atomic_int standinTunerLoads;

/* Exported (ENABLE_EXPORTS), so libnccl-lamport.so's mprotect binds here: STANDIN_DENY_WX=1
 * refuses writable+executable mappings, as SELinux execmod does. */
int mprotect(void* addr, size_t len, int prot) {
  const char* deny = getenv("STANDIN_DENY_WX");
  if (deny != NULL && deny[0] == '1' && (prot & PROT_WRITE) && (prot & PROT_EXEC)) {
    errno = EACCES;
    return -1;
  }
  return (int)syscall(SYS_mprotect, addr, len, prot);
}

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                       \
      fprintf(stderr, "\n");                              \
      exit(1);                                            \
    }                                                     \
  } while (0)

typedef ncclResult_t (*AllReduceFn)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);

static const char* kHooked[] = {"ncclAllReduce", "ncclCommInitRank", "ncclCommDestroy", "ncclCommAbort",
                                "ncclCommFinalize", "ncclCommGetAsyncError", "ncclGroupStart", "ncclGroupEnd"};
enum { kHookedCount = sizeof(kHooked) / sizeof(kHooked[0]) };

static void* standin(void) {
  void* h = dlopen(STANDIN_NCCL, RTLD_NOW | RTLD_NOLOAD);
  CHECK(h != NULL, "stand-in NCCL not loaded");
  return h;
}

static void* ours(void) { return dlopen(getenv("NCCL_TUNER_PLUGIN"), RTLD_NOW | RTLD_NOLOAD); }

static ncclLamportCommInfo_t infoOf(ncclComm_t comm) {
  ncclLamportCommInfo_t info;
  memset(&info, 0, sizeof(info));
  void* self = ours();
  CHECK(self != NULL, "libnccl-lamport.so is not loaded");
  ncclResult_t (*get)(ncclComm_t, ncclLamportCommInfo_t*) = dlsym(self, "ncclLamportGetCommInfo");
  CHECK(get != NULL && get(comm, &info) == ncclSuccess, "ncclLamportGetCommInfo");
  return info;
}

static ncclComm_t createRanked(int tag, int nRanks, int rank) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, &tag, sizeof(tag));
  ncclComm_t comm = NULL;
  CHECK(ncclCommInitRank(&comm, nRanks, id, rank) == ncclSuccess && comm != NULL, "ncclCommInitRank");
  return comm;
}

static ncclComm_t create(int tag) { return createRanked(tag, 1, 0); }

static void reach(void) {
  AllReduceFn cached = ncclAllReduce;  /* taken before the tuner loads */
  ncclComm_t comm = create(1);
  CHECK(standinTunerLoads == 1, "the stand-in did not load the tuner");
  AllReduceFn looked = (AllReduceFn)dlsym(standin(), "ncclAllReduce");
  AllReduceFn alias = (AllReduceFn)dlsym(standin(), "pncclAllReduce");
  /* Before any call: the extension API already describes it by its set-up (issue 9 point 5). */
  const ncclLamportCommInfo_t early = infoOf(comm);
  CHECK(early.known == 1 && strstr(early.reason, "single-rank communicator") != NULL,
        "before its first call the communicator is described as known=%d (%s)", early.known, early.reason);
  float x = 0;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "PLT call");
  CHECK(cached(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "cached pointer");
  CHECK(looked(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "dlsym");
  CHECK(alias(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "pncclAllReduce");
  const ncclLamportCommInfo_t info = infoOf(comm);
  CHECK(info.known == 1, "the communicator never reached a wrapper");
  CHECK(info.ncclCalls == 4, "wrapper saw %llu of 4 calls", (unsigned long long)info.ncclCalls);
  /* The set-up made in the tuner's init, found above the handle (not a fallback registration). */
  CHECK(strstr(info.reason, "single-rank communicator") != NULL, "not bound to its set-up: %s", info.reason);
  CHECK(standinAllReduceCalls == 4, "NCCL ran %ld of 4 calls", (long)standinAllReduceCalls);
  int (*isActive)(void) = dlsym(ours(), "ncclLamportIsActive");
  CHECK(isActive != NULL && isActive() == 1, "ncclLamportIsActive() != 1 with the hooks in");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  CHECK(infoOf(comm).known == 0, "destroy did not reach the wrapper (still registered)");
}

static void cycles(int n) {
  for (int i = 0; i < n; ++i) {
    ncclComm_t comm = create(i);
    float x = 0;
    CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce %d", i);
    const ncclLamportCommInfo_t info = infoOf(comm);
    CHECK(info.known == 1 && info.ncclCalls == 1, "cycle %d: the call did not reach the wrapper", i);
    CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy %d", i);
  }
  CHECK(standinTunerLoads == n, "the stand-in loaded the tuner %d times, not %d", (int)standinTunerLoads, n);
  CHECK(standinAllReduceCalls == n, "NCCL ran %ld of %d calls", (long)standinAllReduceCalls, n);
}

static atomic_int stop;
static atomic_long threadCalls, threadErrors;
static void* caller(void* arg) {
  ncclComm_t comm = arg;
  float x = 0;
  while (!atomic_load(&stop)) {
    if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess) atomic_fetch_add(&threadErrors, 1);
    atomic_fetch_add(&threadCalls, 1);
  }
  return NULL;
}

static void threads(void) {
  /* A communicator made without the tuner (NCCL_TUNER_PLUGIN hidden for a moment) to call on. */
  char* plugin = strdup(getenv("NCCL_TUNER_PLUGIN"));
  unsetenv("NCCL_TUNER_PLUGIN");
  ncclComm_t busy = create(7);
  setenv("NCCL_TUNER_PLUGIN", plugin, 1);
  pthread_t t[8];
  for (int i = 0; i < 8; ++i) pthread_create(&t[i], NULL, caller, busy);
  usleep(20000);
  ncclComm_t comm = create(8);  /* loads the tuner: hooks go in while the threads call */
  usleep(50000);
  atomic_store(&stop, 1);
  for (int i = 0; i < 8; ++i) pthread_join(t[i], NULL);
  CHECK(threadErrors == 0, "%ld calls failed", (long)threadErrors);
  CHECK(standinAllReduceCalls == threadCalls, "NCCL ran %ld of %ld calls", (long)standinAllReduceCalls,
        (long)threadCalls);
  const ncclLamportCommInfo_t info = infoOf(busy);
  CHECK(info.known == 1 && info.ncclCalls > 0, "no threaded call reached the wrapper after the hooks went in");
  printf("%ld calls, %llu through the wrapper\n", (long)threadCalls, (unsigned long long)info.ncclCalls);
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  free(plugin);
}

/* Creates communicator `tag` (the stand-in loads the tuner) and checks that no entry of the
 * stand-in was hooked meanwhile. */
static ncclComm_t createUnhooked(int tag) {
  unsigned char before[kHookedCount][16];
  for (int i = 0; i < kHookedCount; ++i) memcpy(before[i], dlsym(standin(), kHooked[i]), 16);
  ncclComm_t comm = create(tag);
  CHECK(standinTunerLoads == 1, "the stand-in did not load the tuner");
  for (int i = 0; i < kHookedCount; ++i) {
    CHECK(memcmp(before[i], dlsym(standin(), kHooked[i]), 16) == 0, "%s changed", kHooked[i]);
  }
  return comm;
}

static void untouched(void) {
  ncclComm_t comm = createUnhooked(3);
  float x = 0;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
  CHECK(infoOf(comm).known == 0, "a wrapper ran without hooks");
  int (*isActive)(void) = dlsym(ours(), "ncclLamportIsActive");
  CHECK(isActive != NULL && isActive() == 0, "ncclLamportIsActive() != 0 without hooks");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
}

/* Another copy of nccl-lamport is preloaded (under another file name than the tuner NCCL loads):
 * the tuner copy must not hook NCCL under the preloaded copy's wrappers. */
static void preloadedcopy(void) {
  ncclComm_t comm = createUnhooked(31);
  float x = 0;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
}

/* One allreduce on comm (it binds a set-up made in the tuner's init to the handle), then what the
 * extension API says of the communicator, as "known|eligible|reason", in out. */
static void verdictAfterOneCall(ncclComm_t comm, char* out, size_t size) {
  float x = 0;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
  const ncclLamportCommInfo_t info = infoOf(comm);
  snprintf(out, size, "%d|%d|%s", info.known, info.eligible, info.reason);
}

/* The body of a forked rank of the 2-rank communicator `tag`: its verdict after one call, one
 * line on fd; then it destroys the communicator and exits. */
static void rankWritesVerdict(int tag, int rank, int fd) {
  ncclComm_t comm = createRanked(tag, 2, rank);
  char line[256];
  verdictAfterOneCall(comm, line, sizeof(line) - 1);
  strcat(line, "\n");
  const size_t n = strlen(line);
  CHECK(write(fd, line, n) == (ssize_t)n, "write");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  _exit(0);
}

/* Two forked ranks of one 2-rank communicator (the same unique id): the set-up inside the tuner's
 * init meets over the host rendezvous; without a GPU both ranks must come out not accelerated
 * with the same reason, found through the handle. "alone": one rank of two: the rendezvous
 * times out (NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS) and the reason says so. */
static void pair(int ranks) {
  const int tag = (int)getpid();
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  for (int r = 0; r < ranks; ++r) {
    if (fork() == 0) {
      close(fds[0]);
      rankWritesVerdict(tag, r, fds[1]);
    }
  }
  close(fds[1]);
  char buf[1024] = {0};
  size_t got = 0;
  ssize_t n;
  while ((n = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0) got += (size_t)n;
  int status = 0;
  for (int r = 0; r < ranks; ++r) {
    wait(&status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a rank failed");
  }
  printf("%s", buf);
  char* second = strchr(buf, '\n');
  CHECK(second != NULL, "no result");
  *second++ = '\0';
  CHECK(strncmp(buf, "1|0|", 4) == 0, "rank result: %s", buf);
  if (ranks == 2) {
    CHECK(strncmp(buf, second, strlen(buf)) == 0, "the ranks disagree: '%s' vs '%s'", buf, second);
    /* The set-up's own verdict (no GPU here), not a fallback for a handle without one. */
    CHECK(strstr(buf, "tuner activation's entry hooks, but") == NULL && strstr(buf, "rendezvous") == NULL,
          "reason: %s", buf);
  } else {
    CHECK(strstr(buf, "1 of 2 ranks joined") != NULL, "reason: %s", buf);
  }
}

/* Whether the line of log that holds position at also holds text. */
static int lineHas(const char* log, const char* at, const char* text) {
  const char* start = at;
  while (start > log && start[-1] != '\n') --start;
  const char* end = strchr(at, '\n');
  const char* found = strstr(start, text);
  return found != NULL && (end == NULL || found < end);
}

/* Issue 9: with NCCL_DEBUG=INFO, each of two forked ranks captures its own log (stdout) from
 * before its init until after its first call, and checks that no line names "(nil)" as the
 * communicator, that the verdict line ("Lamport OFF" here, no GPU; "Lamport one-shot ON" on a
 * GPU) names the handle ncclCommInitRank gave it, and that the set-up line inside the tuner's
 * init names the communicator by NCCL's commId (the stand-in's commHash is the unique id's first
 * 8 bytes: the tag), never as if it were a handle ("comm 0x<commId>"). A second communicator,
 * destroyed before any call (so never bound to its handle), must have its destroy line name it by
 * its commId (it said "comm (nil) rank -1" before session 14). */
static void lognames(void) {
  const int tag = (int)getpid();
  for (int r = 0; r < 2; ++r) {
    if (fork() == 0) {
      FILE* capture = tmpfile();
      CHECK(capture != NULL, "tmpfile");
      fflush(stdout);
      const int saved = dup(1);
      CHECK(saved >= 0 && dup2(fileno(capture), 1) == 1, "redirecting stdout");
      ncclComm_t comm = createRanked(tag, 2, r);
      float x = 0;
      CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
      ncclComm_t idle = createRanked(tag + 1, 2, r);
      CHECK(ncclCommDestroy(idle) == ncclSuccess, "destroy of the communicator never called");
      fflush(stdout);
      CHECK(dup2(saved, 1) == 1, "restoring stdout");
      static char log[65536];
      rewind(capture);
      const size_t n = fread(log, 1, sizeof(log) - 1, capture);
      log[n] = '\0';
      fprintf(stderr, "rank %d's log:\n%s", r, log);
      CHECK(strstr(log, "(nil)") == NULL, "rank %d: a log line names a null communicator", r);
      char handle[64], commId[64];
      snprintf(handle, sizeof(handle), "comm %p ", (void*)comm);
      snprintf(commId, sizeof(commId), "commId 0x%016llx", (unsigned long long)(unsigned)tag);
      const char* verdict = strstr(log, "Lamport OFF");
      if (verdict == NULL) verdict = strstr(log, "Lamport one-shot ON");
      CHECK(verdict != NULL, "rank %d: no verdict line", r);
      const char* lineStart = verdict;
      while (lineStart > log && lineStart[-1] != '\n') --lineStart;
      const char* named = strstr(lineStart, handle);
      CHECK(named != NULL && named < verdict, "rank %d: the verdict line does not name '%s'", r, handle);
      CHECK(strstr(log, commId) != NULL, "rank %d: no set-up line naming '%s'", r, commId);
      char commIdAsHandle[64];  /* the commId is not a handle: no line may print it as one */
      snprintf(commIdAsHandle, sizeof(commIdAsHandle), "comm 0x%016llx", (unsigned long long)(unsigned)tag);
      CHECK(strstr(log, commIdAsHandle) == NULL, "rank %d: a line names the commId as '%s'", r, commIdAsHandle);
      char idleId[64];
      snprintf(idleId, sizeof(idleId), "commId 0x%016llx", (unsigned long long)(unsigned)(tag + 1));
      const char* idleLine = strstr(log, idleId);
      while (idleLine != NULL && !lineHas(log, idleLine, "allreduce calls ran on Lamport kernels")) idleLine = strstr(idleLine + 1, idleId);
      CHECK(idleLine != NULL, "rank %d: no destroy line names the communicator never called by '%s'", r, idleId);
      CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
      _exit(0);
    }
  }
  int status = 0;
  for (int r = 0; r < 2; ++r) {
    wait(&status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a rank failed");
  }
}

/* Issue 9 point 5 (found on one H200: CommKinds.SplitOneColorReversedRanks in tuner mode): the
 * rendezvous orders the ranks by host and pid, so a communicator whose NCCL ranks run against
 * that order gets Lamport slots that differ from its NCCL ranks. The per-communicator info must
 * still report NCCL's rank. The first child forked (the lower pid) takes NCCL rank 1. */
static void reversed(void) {
  const int tag = (int)getpid();
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  for (int child = 0; child < 2; ++child) {
    if (fork() == 0) {
      close(fds[0]);
      const int rank = 1 - child;
      ncclComm_t comm = createRanked(tag, 2, rank);
      float x = 0;
      CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
      const ncclLamportCommInfo_t info = infoOf(comm);
      CHECK(info.known == 1, "rank %d: not known", rank);
      CHECK(info.rank == rank, "NCCL rank %d: the info says rank %d", rank, info.rank);
      CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
      _exit(0);
    }
  }
  close(fds[1]);
  int status = 0;
  for (int r = 0; r < 2; ++r) {
    wait(&status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a rank failed");
  }
}

/* Both ranks of a 2-rank communicator initialised by two threads of one process at once (one
 * thread per GPU, or ncclCommInitAll, whose group runs every rank's init on its own thread: NCCL
 * calls the tuner's init outside its tuner lock). The first of them installs the hooks; the
 * other's init runs meanwhile and must still take part in the set-up, so both come out with the
 * set-up's own verdict, not a rendezvous timeout or "no set-up". */
static pthread_barrier_t concurrentStart;
static int concurrentTag;
static char concurrentReason[2][256];
static void* concurrentRank(void* arg) {
  const int rank = (int)(intptr_t)arg;
  pthread_barrier_wait(&concurrentStart);
  ncclComm_t comm = createRanked(concurrentTag, 2, rank);
  verdictAfterOneCall(comm, concurrentReason[rank], sizeof(concurrentReason[rank]));
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  return NULL;
}

static void concurrent(void) {
  concurrentTag = (int)getpid();
  pthread_barrier_init(&concurrentStart, NULL, 2);
  pthread_t t[2];
  for (int r = 0; r < 2; ++r) pthread_create(&t[r], NULL, concurrentRank, (void*)(intptr_t)r);
  for (int r = 0; r < 2; ++r) pthread_join(t[r], NULL);
  printf("rank 0: %s\nrank 1: %s\n", concurrentReason[0], concurrentReason[1]);
  for (int r = 0; r < 2; ++r) {
    CHECK(strncmp(concurrentReason[r], "1|0|", 4) == 0, "rank %d result: %s", r, concurrentReason[r]);
    CHECK(strstr(concurrentReason[r], "tuner activation's entry hooks, but") == NULL &&
              strstr(concurrentReason[r], "rendezvous") == NULL,
          "rank %d did not take part in the set-up: %s", r, concurrentReason[r]);
  }
  CHECK(strcmp(concurrentReason[0], concurrentReason[1]) == 0, "the ranks disagree");
}

/* Rank 0 of a 2-rank communicator whose init reaches our wrapper through a hook while the
 * install is still writing (the int3 is on the entries, the 50 ms grace runs), rank 1 a forked
 * process: rank 0's init must be treated as tuner activation's (set up inside the tuner's init,
 * over the rendezvous, bound at its first call), not as the interposer's, whose set-up points
 * are skipped in this mode. Both ranks then carry the same verdict from the one set-up. */
static atomic_int windowSeen;
static int windowTag;
static ncclComm_t windowComm;
static void* initInTheWindow(void* arg) {
  (void)arg;
  const volatile unsigned char* entry = dlsym(standin(), "ncclCommInitRank");
  const size_t site = entry[0] == 0xF3 ? 4 : 0; /* after endbr64 */
  while (entry[site] != 0xCC) sched_yield();
  atomic_store(&windowSeen, 1);
  windowComm = createRanked(windowTag, 2, 0);
  return NULL;
}

static void window(void) {
  windowTag = (int)getpid();
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  if (fork() == 0) {
    close(fds[0]);
    rankWritesVerdict(windowTag, 1, fds[1]);
  }
  close(fds[1]);
  pthread_t t;
  pthread_create(&t, NULL, initInTheWindow, NULL);
  ncclComm_t first = create(windowTag + 1); /* installs the hooks in this process */
  pthread_join(t, NULL);
  CHECK(windowSeen == 1, "the install was never seen in progress");
  char mine[256], peer[256] = {0};
  verdictAfterOneCall(windowComm, mine, sizeof(mine));
  size_t got = 0;
  ssize_t n;
  while ((n = read(fds[0], peer + got, sizeof(peer) - 1 - got)) > 0) got += (size_t)n;
  peer[strcspn(peer, "\n")] = '\0';
  int status = 0;
  wait(&status);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank 1 failed");
  printf("rank 0 (init during the install): %s\nrank 1: %s\n", mine, peer);
  CHECK(strncmp(mine, "1|0|", 4) == 0, "rank 0: %s", mine);
  CHECK(strcmp(mine, peer) == 0 && strstr(mine, "rendezvous") == NULL,
        "rank 0, whose init ran during the install, was not set up with rank 1 in the tuner's init");
  CHECK(ncclCommDestroy(windowComm) == ncclSuccess && ncclCommDestroy(first) == ncclSuccess, "destroy");
}

/* Two NCCLs in one process (two copies of the stand-in, at two paths), both loading the tuner
 * from NCCL_TUNER_PLUGIN: the first communicator, of the linked copy, hooks that copy. The other
 * copy's entries stay as they were, so its calls never reach a wrapper: its communicators must
 * not be set up in the tuner's init (a workspace and a rendezvous for nothing) nor described by
 * the extension API as ours. */
static void twocopies(void) {
  ncclComm_t first = create(21); /* hooks the linked copy */
  /* Bound first, so that the binding knows where a handle's own set-up lies: before any bind it
   * takes the nearest set-up above a handle (checked for NCCL's magics in between), and which one
   * is nearest depends on where the allocator put the two copies' communicators (an ASan build
   * put the other copy's just below this one, and described it as OFF). */
  CHECK(infoOf(first).known == 1, "the hooked copy's communicator is not described");
  void* copy = dlopen(STANDIN_NCCL_COPY, RTLD_NOW | RTLD_LOCAL);
  CHECK(copy != NULL, "second NCCL: %s", dlerror());
  ncclResult_t (*initRank)(ncclComm_t*, int, ncclUniqueId, int) = dlsym(copy, "ncclCommInitRank");
  AllReduceFn allReduce = (AllReduceFn)dlsym(copy, "ncclAllReduce");
  ncclResult_t (*destroy)(ncclComm_t) = dlsym(copy, "ncclCommDestroy");
  CHECK(initRank != NULL && allReduce != NULL && destroy != NULL, "second NCCL's symbols");
  unsigned char before[16];
  memcpy(before, (const void*)allReduce, sizeof(before));
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  id.internal[0] = 22;
  ncclComm_t other = NULL;
  CHECK(initRank(&other, 1, id, 0) == ncclSuccess && other != NULL, "second NCCL's init");
  CHECK(memcmp(before, (const void*)allReduce, sizeof(before)) == 0, "the second NCCL's ncclAllReduce was patched");
  float x = 0;
  CHECK(allReduce(&x, &x, 1, ncclFloat32, ncclSum, other, NULL) == ncclSuccess, "second NCCL's call");
  const ncclLamportCommInfo_t info = infoOf(other);
  printf("communicator of the second NCCL: known %d, %s\n", info.known, info.reason);
  CHECK(info.known == 0, "a communicator whose calls never reach a wrapper is described as ours (%s)", info.reason);
  CHECK(destroy(other) == ncclSuccess && ncclCommDestroy(first) == ncclSuccess, "destroy");
}

int main(int argc, char** argv) {
  CHECK(argc >= 2, "usage: %s reach|cycles N|threads|untouched", argv[0]);
  CHECK(getenv("NCCL_TUNER_PLUGIN") != NULL, "NCCL_TUNER_PLUGIN unset");
  if (strcmp(argv[1], "reach") == 0) reach();
  else if (strcmp(argv[1], "cycles") == 0) cycles(argc > 2 ? atoi(argv[2]) : 1000);
  else if (strcmp(argv[1], "threads") == 0) threads();
  else if (strcmp(argv[1], "untouched") == 0) untouched();
  else if (strcmp(argv[1], "pair") == 0) pair(2);
  else if (strcmp(argv[1], "alone") == 0) pair(1);
  else if (strcmp(argv[1], "lognames") == 0) lognames();
  else if (strcmp(argv[1], "reversed") == 0) reversed();
  else if (strcmp(argv[1], "concurrent") == 0) concurrent();
  else if (strcmp(argv[1], "window") == 0) window();
  else if (strcmp(argv[1], "twocopies") == 0) twocopies();
  else if (strcmp(argv[1], "preloadedcopy") == 0) preloadedcopy();
  else CHECK(0, "unknown scenario %s", argv[1]);
  printf("PASS %s\n", argv[1]);
  return 0;
}
