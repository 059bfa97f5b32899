// NCCL tuner ABI v7, exported as ncclTunerPlugin_v7. Served releases: NCCL 2.32 and later.
//
// v6 with one change: the model constants' per-architecture bandwidth tables have a fifth
// compute-capability row (NCCL's NCCL_NUM_COMPCAPS_V7 = 5). init, getCollInfo, finalize and the
// optional getChunkSize keep v6's signatures; the NVL domain info is v5's. Layout from NVIDIA/nccl
// src/include/plugin/tuner/tuner_v7.h (read, not copied).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tuner/abi/tuner_common.h"
#include "tuner/abi/tuner_v5.h"

namespace nccl_lamport {
namespace abi {

using NvlDomainInfoV7 = NvlDomainInfoV5;

constexpr int kV7CompCaps = 5;  // one more architecture row than v5/v6

/** NCCL's latency/bandwidth model inputs (ncclTunerConstants_v7_t), all doubles. */
struct TunerConstantsV7 {
  double baseLatencies[kCostAlgorithms][kCostProtocols];
  double hwLatencies[kV5HwLinks][kCostAlgorithms][kCostProtocols];
  double llMaxBws[kV7CompCaps][kV5TuningScales];
  double perChMaxRingLL128Bws[kV7CompCaps][kV5TuningScales];
  double perChMaxTreeLL128Bws[kV7CompCaps][kV5TuningScales];
  double perChMaxTreeBws[kV7CompCaps][kV5TuningScales];
  double perChMaxNVLSTreeBws[kV7CompCaps][kV5TuningScales];
};

// 21 + 63 + 5 * 15 = 159 doubles, no padding.
static_assert(sizeof(TunerConstantsV7) == 1272, "v7 constants: 159 doubles");
static_assert(offsetof(TunerConstantsV7, hwLatencies) == 168, "v7 constants layout");
static_assert(offsetof(TunerConstantsV7, llMaxBws) == 672, "v7 constants layout");
static_assert(offsetof(TunerConstantsV7, perChMaxRingLL128Bws) == 792, "v7 constants layout");
static_assert(offsetof(TunerConstantsV7, perChMaxTreeLL128Bws) == 912, "v7 constants layout");
static_assert(offsetof(TunerConstantsV7, perChMaxTreeBws) == 1032, "v7 constants layout");
static_assert(offsetof(TunerConstantsV7, perChMaxNVLSTreeBws) == 1152, "v7 constants layout");

struct TunerV7 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       TunerLogger logger, NvlDomainInfoV7* nvlDomainInfo,
                       TunerConstantsV7* constants);
  ncclResult_t (*getCollInfo)(void* context, TunerFunc collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
  /** Optional (may be null). *chunkSize is in-out; NCCL clamps what we return. */
  ncclResult_t (*getChunkSize)(void* context, TunerFunc collType, size_t nBytes, int algorithm,
                               int protocol, int nChannels, size_t* chunkSize);
};

static_assert(sizeof(TunerV7) == 5 * sizeof(void*), "v7: name + 4 function pointers");
static_assert(offsetof(TunerV7, init) == 1 * sizeof(void*), "v7 layout");
static_assert(offsetof(TunerV7, getCollInfo) == 2 * sizeof(void*), "v7 layout");
static_assert(offsetof(TunerV7, finalize) == 3 * sizeof(void*), "v7 layout");
static_assert(offsetof(TunerV7, getChunkSize) == 4 * sizeof(void*), "v7 layout");

}  // namespace abi
}  // namespace nccl_lamport
