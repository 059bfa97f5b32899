/* A tuner that ours displaces (a net plugin's, or nccl.conf's). Built once per tuner ABI it
 * exports: FAKE_TUNER_ABI unset: v5, v6 and v7 (one init shape for all three; v7's constants
 * pointer is passed through untouched); FAKE_TUNER_ABI=4, 3 or 2: that older struct only, as
 * tuners built for NCCL 2.21 - 2.27 ship. Its getCollInfo forces ring/simple where NCCL offers it
 * (v3+: cost entry [1][2] = 0; v2: it answers algorithm 1, protocol 2), and counts every call in
 * fakeDisplacedCalls (init, getCollInfo, finalize), so a test sees it still answers. A call that
 * does not look like its own ABI's (wrong context, *nChannels not NCCL's 0, v2's choice not
 * starting as undefined) is not counted. v2 also keeps the collNet and NVLS support it was last
 * told in fakeDisplacedSupport. With FAKE_CHAIN_TO set (v5..v7 build), its init also chains to
 * the tuner of that library, as a tuner that keeps one of its own behind it does: naming ours
 * there makes a loop that ours must break. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int ncclResult_t;
typedef void (*Logger)(int, unsigned long, const char*, int, const char*, ...);

#define EXPORT __attribute__((visibility("default")))

EXPORT int fakeDisplacedCalls[3];
EXPORT int fakeDisplacedSupport[2] = {-1, -1};

static int marker;

static ncclResult_t finalize(void* ctx) {
  if (ctx == &marker) ++fakeDisplacedCalls[2];
  return 0;
}

static void forceRingSimple(float** table, int numAlgo, int numProto) {
  float* t = (float*)table;
  if (numAlgo > 1 && numProto > 2 && t[1 * numProto + 2] >= 0.0f) t[1 * numProto + 2] = 0.0f;
}

#ifndef FAKE_TUNER_ABI

typedef ncclResult_t (*InitFn)(void**, uint64_t, size_t, size_t, Logger, void*, void*);
typedef ncclResult_t (*FinalizeFn)(void*);
struct Tuner { const char* name; void* init; void* getCollInfo; void* finalize; void* getChunkSize; };

static ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger log, void* nvl,
                         void* constants) {
  *ctx = &marker;
  ++fakeDisplacedCalls[0];
  const char* chainTo = getenv("FAKE_CHAIN_TO");
  if (chainTo != NULL) {
    void* lib = dlopen(chainTo, RTLD_NOW | RTLD_LOCAL);
    const struct Tuner* inner = lib != NULL ? (const struct Tuner*)dlsym(lib, "ncclTunerPlugin_v6") : NULL;
    void* innerCtx = NULL;
    if (inner != NULL && ((InitFn)inner->init)(&innerCtx, commId, nRanks, nNodes, log, nvl, constants) == 0) {
      ((FinalizeFn)inner->finalize)(innerCtx);
    }
  }
  return 0;
}

static ncclResult_t getCollInfo(void* ctx, int coll, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                                int numProto, int regBuff, int* nChannels) {
  (void)coll; (void)nBytes; (void)numPipeOps; (void)regBuff; (void)nChannels;
  if (ctx != &marker) return 3;
  forceRingSimple(table, numAlgo, numProto);
  ++fakeDisplacedCalls[1];
  return 0;
}

EXPORT const struct Tuner ncclTunerPlugin_v5 = {"displaced", (void*)init, (void*)getCollInfo, (void*)finalize, 0};
EXPORT const struct Tuner ncclTunerPlugin_v6 = {"displaced", (void*)init, (void*)getCollInfo, (void*)finalize, 0};
EXPORT const struct Tuner ncclTunerPlugin_v7 = {"displaced", (void*)init, (void*)getCollInfo, (void*)finalize, 0};

#else  /* v2..v4: init(nRanks, nNodes, logger, &ctx), destroy */

static ncclResult_t initOld(size_t nRanks, size_t nNodes, Logger log, void** ctx) {
  (void)log;
  if (nRanks != 2 || nNodes != 1) return 3;  /* the arguments ours got from NCCL, in v2's order */
  *ctx = &marker;
  ++fakeDisplacedCalls[0];
  return 0;
}

#if FAKE_TUNER_ABI == 4
static ncclResult_t getCollInfo(void* ctx, int coll, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                                int numProto, int regBuff, int* nChannels) {
  (void)coll; (void)nBytes; (void)numPipeOps; (void)regBuff;
  if (ctx != &marker || nChannels == NULL || *nChannels != 0) return 3;
  forceRingSimple(table, numAlgo, numProto);
  ++fakeDisplacedCalls[1];
  return 0;
}
#elif FAKE_TUNER_ABI == 3
static ncclResult_t getCollInfo(void* ctx, int coll, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                                int numProto, int* nChannels) {
  (void)coll; (void)nBytes; (void)numPipeOps;
  if (ctx != &marker || nChannels == NULL || *nChannels != 0) return 3;  /* v3's own argument order */
  forceRingSimple(table, numAlgo, numProto);
  ++fakeDisplacedCalls[1];
  return 0;
}
#elif FAKE_TUNER_ABI == 2
static ncclResult_t getCollInfo(void* ctx, int coll, size_t nBytes, int collNetSupport, int nvlsSupport,
                                int numPipeOps, int* algorithm, int* protocol, int* nChannels) {
  (void)coll; (void)nBytes; (void)numPipeOps;
  if (ctx != &marker || *algorithm != -1 || *protocol != -1 || nChannels == NULL || *nChannels != 0) return 3;
  fakeDisplacedSupport[0] = collNetSupport;
  fakeDisplacedSupport[1] = nvlsSupport;
  *algorithm = 1;  /* ring */
  *protocol = 2;   /* simple */
  ++fakeDisplacedCalls[1];
  return 0;
}
#else
#error "FAKE_TUNER_ABI: 2, 3 or 4"
#endif

#define SYMBOL_(v) ncclTunerPlugin_v##v
#define SYMBOL(v) SYMBOL_(v)
struct OldTuner { const char* name; void* init; void* getCollInfo; void* destroy; };
EXPORT const struct OldTuner SYMBOL(FAKE_TUNER_ABI) = {"displaced-old", (void*)initOld, (void*)getCollInfo,
                                                       (void*)finalize};

#endif
