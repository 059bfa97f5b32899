// The exported NCCL tuner structs, one per ABI version (v2..v7), each a thin adapter over tuner_impl.
//
// NCCL dlsym()s "ncclTunerPlugin_vN" newest first and takes the first it finds, so every
// release from 2.21 on finds a version it speaks. This file is compiled into the shared object
// itself (and, for tests, into lamport_tuner_exports); every function here is hidden, only the
// structs are exported.
#include <string>

#include "tuner/abi/tuner_abi.h"
#include "tuner/displaced_tuner.h"
#include "tuner/load_mode.h"
#include "tuner/tuner_impl.h"

#include <exception>

namespace nccl_lamport {
namespace {

constexpr const char* kTunerName = "lamport";

/** Inside a catch block: no exception may reach NCCL through the C ABI. WARNs
 *  and returns `result`: an init fails (NCCL then runs without this tuner), a getCollInfo or a
 *  finalize succeeds having changed nothing (NCCL's own choice stands). */
ncclResult_t tunerException(const char* entry, ncclResult_t result) noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    LAMPORT_WARN("tuner %s: %s", entry, e.what());
  } catch (...) {
    LAMPORT_WARN("tuner %s: unknown exception", entry);
  }
  return result;
}

TunerCommInfo commInfoWithoutId(int abiVersion, size_t nRanks, size_t nNodes) {
  TunerCommInfo comm;
  comm.abiVersion = abiVersion;
  comm.nRanks = nRanks;
  comm.nNodes = nNodes;
  return comm;
}

TunerCommInfo commInfoWithId(int abiVersion, uint64_t commId, size_t nRanks, size_t nNodes,
                             const abi::NvlDomainInfoV5* nvl) {
  TunerCommInfo comm = commInfoWithoutId(abiVersion, nRanks, nNodes);
  comm.hasCommId = true;
  comm.commId = commId;
  if (nvl != nullptr) {
    comm.hasNvlDomains = true;
    comm.nvlDomains.nDomains = nvl->nNvlDomains;
    comm.nvlDomains.minRanksPerDomain = nvl->minRanksPerNvlDomain;
    comm.nvlDomains.maxRanksPerDomain = nvl->maxRanksPerNvlDomain;
  }
  return comm;
}

// True on a thread while a displaced tuner's init runs: one that chains to a tuner of its own,
// which is ours again, calls our init from inside its own, and that init must chain nothing (an
// endless recursion before).
thread_local bool tChaining = false;

// Chains the tuner ours displaced (tuner/displaced_tuner.h) into this communicator's context.
// One of NCCL's version gets exactly NCCL's arguments (callInit); an older one (v2..v4) gets what
// its init takes. Its getCollInfo and finalize/destroy run after ours (tuner_impl.cc, through
// tuner/chained_tuner.h). A failing init leaves it out for this communicator.
template <typename Table, typename CallInit>
void chainDisplaced(int version, void** context, size_t nRanks, size_t nNodes, abi::TunerLogger logger,
                    CallInit callInit) {
  if (context == nullptr || *context == nullptr) return;
  if (tChaining) return;
  DisplacedTuner found;
  try {
    found = displacedTuner(version, ownObjectPath());
  } catch (...) {
    return;  // nothing may cross the C ABI
  }
  if (!chainableTuner(found.abiVersion, found.table)) return;
  void* inner = nullptr;
  tChaining = true;
  ncclResult_t result = ncclInternalError;
  try {
    result = found.abiVersion == version
                 ? callInit(static_cast<const Table*>(found.table), &inner)
                 : initOlderTuner(found.abiVersion, found.table, nRanks, nNodes, logger, &inner);
  } catch (...) {
    tChaining = false;
    throw;
  }
  tChaining = false;
  if (result != ncclSuccess) {
    LAMPORT_INFO(kSubsysTuning, "tuner: the tuner ours displaced (%s) failed its init: NCCL tunes this "
                 "communicator alone", found.source.c_str());
    return;
  }
  auto* ctx = static_cast<TunerContext*>(*context);
  ctx->chained.abiVersion = found.abiVersion;
  ctx->chained.table = found.table;
  ctx->chained.context = inner;
  const char* name = chainedTunerName(found.table);
  LAMPORT_INFO(kSubsysTuning, "tuner: %s (%s, tuner ABI v%d%s) keeps answering behind ours",
               name != nullptr ? name : "a tuner", found.source.c_str(), found.abiVersion,
               found.abiVersion == version ? "" : ", called through its own ABI");
}

// NCCL passes float[numAlgo][numProto] as float**; the pointer is the first float.
float* costEntries(float** collCostTable) { return reinterpret_cast<float*>(collCostTable); }

// ---- v2 (NCCL 2.21), v3 (2.22 - 2.23), v4 (2.24 - 2.27): the same init, each version with its
// own struct. The displaced tuner is one these releases would have loaded: that version's
// struct or an older one, never a newer one (tuner/tuner_loader_rules.h).
template <int kVersion, typename Table>
ncclResult_t initWithoutCommId(size_t nRanks, size_t nNodes, abi::TunerLogger logger, void** context) try {
  tunerInit(commInfoWithoutId(kVersion, nRanks, nNodes), logger, context);
  chainDisplaced<Table>(kVersion, context, nRanks, nNodes, logger, [&](const Table* t, void** inner) {
    return t->init(nRanks, nNodes, logger, inner);
  });
  return ncclSuccess;
} catch (...) {
  static const std::string entry = "initV" + std::to_string(kVersion);
  return tunerException(entry.c_str(), ncclSuccess);
}

constexpr auto initV2 = initWithoutCommId<2, abi::TunerV2>;
constexpr auto initV3 = initWithoutCommId<3, abi::TunerV3>;
constexpr auto initV4 = initWithoutCommId<4, abi::TunerV4>;

// ---- v2 -------------------------------------------------------------------------------------
ncclResult_t getCollInfoV2(void* context, abi::TunerFunc collType, size_t nBytes, int collNetSupport,
                           int nvlsSupport, int numPipeOps, int* algorithm, int* protocol, int* nChannels) try {
  // No cost table: ours leaves NCCL's choice; a chained v2 tuner gets NCCL's pointers.
  return tunerGetCollInfoV2(context, collType, nBytes, collNetSupport, nvlsSupport, numPipeOps, algorithm, protocol,
                            nChannels);
} catch (...) {
  return tunerException("getCollInfoV2", ncclSuccess);
}

// ---- v3 -------------------------------------------------------------------------------------
ncclResult_t getCollInfoV3(void* context, abi::TunerFunc collType, size_t nBytes, int numPipeOps,
                           float** collCostTable, int numAlgo, int numProto, int* nChannels) try {
  return tunerGetCollInfo(context, collType, nBytes, numPipeOps, costEntries(collCostTable),
                          numAlgo, numProto, 0, nChannels);
} catch (...) {
  return tunerException("getCollInfoV3", ncclSuccess);
}

// ---- v4, v5, v6 and v7 share getCollInfo's signature --------------------------------------
ncclResult_t getCollInfoV4(void* context, abi::TunerFunc collType, size_t nBytes, int numPipeOps,
                           float** collCostTable, int numAlgo, int numProto, int regBuff,
                           int* nChannels) try {
  return tunerGetCollInfo(context, collType, nBytes, numPipeOps, costEntries(collCostTable),
                          numAlgo, numProto, regBuff, nChannels);
} catch (...) {
  return tunerException("getCollInfoV4", ncclSuccess);
}

// ---- v5 (NCCL 2.28 - 2.29), v6 (2.30+), v7 (2.32+: v6 with a fifth compute-capability row in
// the constants): the same init, each version with its own structs. NCCL calls the instantiation
// itself, so __builtin_return_address(0) is NCCL's call site (tuner activation finds the calling
// NCCL by it).
template <int kVersion, typename Table, typename NvlDomainInfo, typename Constants>
ncclResult_t initWithCommId(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                            abi::TunerLogger logger, NvlDomainInfo* nvlDomainInfo,
                            Constants* constants /* ours leaves it as NCCL set it */) try {
  tunerInitFromNccl(commInfoWithId(kVersion, commId, nRanks, nNodes, nvlDomainInfo), logger, context,
                    __builtin_return_address(0));
  chainDisplaced<Table>(kVersion, context, nRanks, nNodes, logger, [&](const Table* t, void** inner) {
    return t->init(inner, commId, nRanks, nNodes, logger, nvlDomainInfo, constants);
  });
  return ncclSuccess;
} catch (...) {
  static const std::string entry = "initV" + std::to_string(kVersion);
  return tunerException(entry.c_str(), ncclSuccess);
}

constexpr auto initV5 = initWithCommId<5, abi::TunerV5, abi::NvlDomainInfoV5, abi::TunerConstantsV5>;
constexpr auto initV6 = initWithCommId<6, abi::TunerV6, abi::NvlDomainInfoV6, abi::TunerConstantsV6>;
constexpr auto initV7 = initWithCommId<7, abi::TunerV7, abi::NvlDomainInfoV7, abi::TunerConstantsV7>;

ncclResult_t finalize(void* context) try {
  return tunerFinalize(context);
} catch (...) {
  return tunerException("finalize", ncclSuccess);
}

}  // namespace
}  // namespace nccl_lamport

namespace lamport_abi = nccl_lamport::abi;

/** NCCL 2.21. */
extern "C" LAMPORT_TUNER_EXPORT const lamport_abi::TunerV2 ncclTunerPlugin_v2 = {
    /*name=*/nccl_lamport::kTunerName,
    /*init=*/nccl_lamport::initV2,
    /*getCollInfo=*/nccl_lamport::getCollInfoV2,
    /*destroy=*/nccl_lamport::finalize,
};

/** NCCL 2.22 - 2.23. */
extern "C" LAMPORT_TUNER_EXPORT const lamport_abi::TunerV3 ncclTunerPlugin_v3 = {
    /*name=*/nccl_lamport::kTunerName,
    /*init=*/nccl_lamport::initV3,
    /*getCollInfo=*/nccl_lamport::getCollInfoV3,
    /*destroy=*/nccl_lamport::finalize,
};

/** NCCL 2.24 - 2.27. */
extern "C" LAMPORT_TUNER_EXPORT const lamport_abi::TunerV4 ncclTunerPlugin_v4 = {
    /*name=*/nccl_lamport::kTunerName,
    /*init=*/nccl_lamport::initV4,
    /*getCollInfo=*/nccl_lamport::getCollInfoV4,
    /*destroy=*/nccl_lamport::finalize,
};

/** NCCL 2.28 - 2.29. */
extern "C" LAMPORT_TUNER_EXPORT const lamport_abi::TunerV5 ncclTunerPlugin_v5 = {
    /*name=*/nccl_lamport::kTunerName,
    /*init=*/nccl_lamport::initV5,
    /*getCollInfo=*/nccl_lamport::getCollInfoV4,
    /*finalize=*/nccl_lamport::finalize,
};

/** NCCL 2.30 - 2.31 (2.32 takes v7 first). */
extern "C" LAMPORT_TUNER_EXPORT const lamport_abi::TunerV6 ncclTunerPlugin_v6 = {
    /*name=*/nccl_lamport::kTunerName,
    /*init=*/nccl_lamport::initV6,
    /*getCollInfo=*/nccl_lamport::getCollInfoV4,
    /*finalize=*/nccl_lamport::finalize,
    // Optional in v6: null keeps NCCL's own chunk size.
    /*getChunkSize=*/nullptr,
};


/** NCCL 2.32 and later. */
extern "C" LAMPORT_TUNER_EXPORT const lamport_abi::TunerV7 ncclTunerPlugin_v7 = {
    /*name=*/nccl_lamport::kTunerName,
    /*init=*/nccl_lamport::initV7,
    /*getCollInfo=*/nccl_lamport::getCollInfoV4,
    /*finalize=*/nccl_lamport::finalize,
    /*getChunkSize=*/nullptr,
};
