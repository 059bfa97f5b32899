// NCCL tuner ABI v6, exported as ncclTunerPlugin_v6. Served releases: NCCL 2.30 - 2.31 (2.32
// looks for v7 first, and still loads v6 through its own adapter).
//
// v5 plus an optional getChunkSize callback at the end; a null pointer keeps NCCL's own chunk
// size. The NVL domain info and the model constants are v5's, unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tuner/abi/tuner_common.h"
#include "tuner/abi/tuner_v5.h"

namespace nccl_lamport {
namespace abi {

using NvlDomainInfoV6 = NvlDomainInfoV5;
using TunerConstantsV6 = TunerConstantsV5;

struct TunerV6 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       TunerLogger logger, NvlDomainInfoV6* nvlDomainInfo,
                       TunerConstantsV6* constants);
  ncclResult_t (*getCollInfo)(void* context, TunerFunc collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
  /** Optional (may be null). *chunkSize is in-out; NCCL clamps what we return. */
  ncclResult_t (*getChunkSize)(void* context, TunerFunc collType, size_t nBytes, int algorithm,
                               int protocol, int nChannels, size_t* chunkSize);
};

static_assert(sizeof(TunerV6) == 5 * sizeof(void*), "v6: name + 4 function pointers");
static_assert(offsetof(TunerV6, init) == 1 * sizeof(void*), "v6 layout");
static_assert(offsetof(TunerV6, getCollInfo) == 2 * sizeof(void*), "v6 layout");
static_assert(offsetof(TunerV6, finalize) == 3 * sizeof(void*), "v6 layout");
static_assert(offsetof(TunerV6, getChunkSize) == 4 * sizeof(void*), "v6 layout");

}  // namespace abi
}  // namespace nccl_lamport
