// NCCL tuner ABI v4, exported as ncclTunerPlugin_v4. Served releases: NCCL 2.24 - 2.27.
//
// v3 plus regBuff in getCollInfo (1 if the user buffers are registered with NCCL), placed
// just before nChannels.
#pragma once

#include <cstddef>

#include "tuner/abi/tuner_common.h"

namespace nccl_lamport {
namespace abi {

struct TunerV4 {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, TunerLogger logger, void** context);
  ncclResult_t (*getCollInfo)(void* context, TunerFunc collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
};

static_assert(sizeof(TunerV4) == 4 * sizeof(void*), "v4: name + 3 function pointers");
static_assert(offsetof(TunerV4, init) == 1 * sizeof(void*), "v4 layout");
static_assert(offsetof(TunerV4, getCollInfo) == 2 * sizeof(void*), "v4 layout");
static_assert(offsetof(TunerV4, destroy) == 3 * sizeof(void*), "v4 layout");

}  // namespace abi
}  // namespace nccl_lamport
