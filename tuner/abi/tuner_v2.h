// NCCL tuner ABI v2, exported as ncclTunerPlugin_v2. Served releases: NCCL 2.21.
//
// Per communicator: init(nRanks, nNodes, logger, &ctx) -> getCollInfo(ctx, ...) per collective
// -> destroy(ctx). getCollInfo returns an algorithm/protocol choice through out-parameters (no
// cost table); NCCL pre-sets them to "undefined" and leaves anything we do not write alone.
#pragma once

#include <cstddef>

#include "tuner/abi/tuner_common.h"

namespace nccl_lamport {
namespace abi {

struct TunerV2 {
  /** Plugin name, printed by NCCL ("TUNER/Plugin: Using <name> (v2)"). */
  const char* name;
  /** Called once per communicator; *context receives our per-communicator state. */
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, TunerLogger logger, void** context);
  /** algorithm/protocol/nChannels are in-out: untouched means "NCCL decides". */
  ncclResult_t (*getCollInfo)(void* context, TunerFunc collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);
  /** Called when the communicator is torn down. */
  ncclResult_t (*destroy)(void* context);
};

static_assert(sizeof(TunerV2) == 4 * sizeof(void*), "v2: name + 3 function pointers");
static_assert(offsetof(TunerV2, init) == 1 * sizeof(void*), "v2 layout");
static_assert(offsetof(TunerV2, getCollInfo) == 2 * sizeof(void*), "v2 layout");
static_assert(offsetof(TunerV2, destroy) == 3 * sizeof(void*), "v2 layout");

}  // namespace abi
}  // namespace nccl_lamport
