// NCCL tuner ABI v3, exported as ncclTunerPlugin_v3. Served releases: NCCL 2.22 - 2.23.
//
// Same init/destroy as v2; getCollInfo now receives NCCL's cost table (float[numAlgo][numProto]
// of estimated times in microseconds, -1 = not a candidate) passed as float** but pointing
// straight at the floats. NCCL picks the smallest entry >= 0. *nChannels comes in as 0
// ("NCCL decides"); a non-zero value caps the channel count.
#pragma once

#include <cstddef>

#include "tuner/abi/tuner_common.h"

namespace nccl_lamport {
namespace abi {

struct TunerV3 {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, TunerLogger logger, void** context);
  ncclResult_t (*getCollInfo)(void* context, TunerFunc collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
};

static_assert(sizeof(TunerV3) == 4 * sizeof(void*), "v3: name + 3 function pointers");
static_assert(offsetof(TunerV3, init) == 1 * sizeof(void*), "v3 layout");
static_assert(offsetof(TunerV3, getCollInfo) == 2 * sizeof(void*), "v3 layout");
static_assert(offsetof(TunerV3, destroy) == 3 * sizeof(void*), "v3 layout");

}  // namespace abi
}  // namespace nccl_lamport
