// NCCL tuner ABI v5, exported as ncclTunerPlugin_v5. Served releases: NCCL 2.28 - 2.29.
//
// init gains the communicator id (NCCL's commHash: same on every rank, new for each split),
// the NVLink-domain summary and NCCL's model constants (in-out: edits feed NCCL's own cost
// model, which runs right after init). getCollInfo is v4's. destroy is renamed finalize.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tuner/abi/tuner_common.h"

namespace nccl_lamport {
namespace abi {

/** NVLink domains of the communicator (NCCL's ncclNvlDomainInfo_v5_t). With MNNVL a whole
 *  clique counts as one domain, so nNvlDomains == 1 means every rank is NVLink-reachable. */
struct NvlDomainInfoV5 {
  int nNvlDomains;           // NCCL fills it with comm->nNodes
  int minRanksPerNvlDomain;  // fewest ranks in any domain
  int maxRanksPerNvlDomain;  // most ranks in any domain
};

static_assert(sizeof(NvlDomainInfoV5) == 3 * sizeof(int), "v5 NVL domain info: three ints");
static_assert(offsetof(NvlDomainInfoV5, minRanksPerNvlDomain) == 4, "v5 NVL domain info layout");
static_assert(offsetof(NvlDomainInfoV5, maxRanksPerNvlDomain) == 8, "v5 NVL domain info layout");

/** Table sizes of the v5 model constants. */
constexpr int kV5HwLinks = 3;       // NVLink, PCI, network
constexpr int kV5CompCaps = 4;      // Volta, Ampere, Hopper, Blackwell
constexpr int kV5TuningScales = 3;  // 1 node, 2 nodes, 4+ nodes

/** NCCL's latency/bandwidth model inputs (ncclTunerConstants_v5_t), all doubles. */
struct TunerConstantsV5 {
  double baseLatencies[kCostAlgorithms][kCostProtocols];
  double hwLatencies[kV5HwLinks][kCostAlgorithms][kCostProtocols];
  double llMaxBws[kV5CompCaps][kV5TuningScales];
  double perChMaxRingLL128Bws[kV5CompCaps][kV5TuningScales];
  double perChMaxTreeLL128Bws[kV5CompCaps][kV5TuningScales];
  double perChMaxTreeBws[kV5CompCaps][kV5TuningScales];
  double perChMaxNVLSTreeBws[kV5CompCaps][kV5TuningScales];
};

// 21 + 63 + 5 * 12 = 144 doubles, no padding.
static_assert(sizeof(TunerConstantsV5) == 1152, "v5 constants: 144 doubles");
static_assert(offsetof(TunerConstantsV5, hwLatencies) == 168, "v5 constants layout");
static_assert(offsetof(TunerConstantsV5, llMaxBws) == 672, "v5 constants layout");
static_assert(offsetof(TunerConstantsV5, perChMaxRingLL128Bws) == 768, "v5 constants layout");
static_assert(offsetof(TunerConstantsV5, perChMaxTreeLL128Bws) == 864, "v5 constants layout");
static_assert(offsetof(TunerConstantsV5, perChMaxTreeBws) == 960, "v5 constants layout");
static_assert(offsetof(TunerConstantsV5, perChMaxNVLSTreeBws) == 1056, "v5 constants layout");

struct TunerV5 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       TunerLogger logger, NvlDomainInfoV5* nvlDomainInfo,
                       TunerConstantsV5* constants);
  ncclResult_t (*getCollInfo)(void* context, TunerFunc collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
};

static_assert(sizeof(TunerV5) == 4 * sizeof(void*), "v5: name + 3 function pointers");
static_assert(offsetof(TunerV5, init) == 1 * sizeof(void*), "v5 layout");
static_assert(offsetof(TunerV5, getCollInfo) == 2 * sizeof(void*), "v5 layout");
static_assert(offsetof(TunerV5, finalize) == 3 * sizeof(void*), "v5 layout");

}  // namespace abi
}  // namespace nccl_lamport
