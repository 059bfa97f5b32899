/* A tuner that ours displaces (a net plugin's, or nccl.conf's), tuner ABI v5/v6/v7 (one init shape
 * for all three; v7's constants pointer is passed through untouched). Its getCollInfo forces
 * ring/simple (cost entry [1][2] = 0) where NCCL offers it, and counts every call in
 * fakeDisplacedCalls (init, getCollInfo, finalize), so a test sees it still answers. */
#include <stddef.h>
#include <stdint.h>

typedef int ncclResult_t;
typedef void (*Logger)(int, unsigned long, const char*, int, const char*, ...);

__attribute__((visibility("default"))) int fakeDisplacedCalls[3];

static int marker;

static ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger log, void* nvl,
                         void* constants) {
  (void)commId; (void)nRanks; (void)nNodes; (void)log; (void)nvl; (void)constants;
  *ctx = &marker;
  ++fakeDisplacedCalls[0];
  return 0;
}

static ncclResult_t getCollInfo(void* ctx, int coll, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                                int numProto, int regBuff, int* nChannels) {
  (void)coll; (void)nBytes; (void)numPipeOps; (void)regBuff; (void)nChannels;
  if (ctx != &marker) return 3;
  float* t = (float*)table;
  if (numAlgo > 1 && numProto > 2 && t[1 * numProto + 2] >= 0.0f) t[1 * numProto + 2] = 0.0f;
  ++fakeDisplacedCalls[1];
  return 0;
}

static ncclResult_t finalize(void* ctx) {
  if (ctx == &marker) ++fakeDisplacedCalls[2];
  return 0;
}

struct Tuner { const char* name; void* init; void* getCollInfo; void* finalize; void* getChunkSize; };
__attribute__((visibility("default"))) const struct Tuner ncclTunerPlugin_v5 = {"displaced", (void*)init, (void*)getCollInfo, (void*)finalize, 0};
__attribute__((visibility("default"))) const struct Tuner ncclTunerPlugin_v6 = {"displaced", (void*)init, (void*)getCollInfo, (void*)finalize, 0};
__attribute__((visibility("default"))) const struct Tuner ncclTunerPlugin_v7 = {"displaced", (void*)init, (void*)getCollInfo, (void*)finalize, 0};
