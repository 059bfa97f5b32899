#include "tuner/chained_tuner.h"

#include "tuner/abi/tuner_abi.h"
#include "tuner/tuner_impl.h"

namespace nccl_lamport {

namespace {

// v2's algorithm/protocol out-parameters start as "undefined" (NCCL's NCCL_ALGO_UNDEF /
// NCCL_PROTO_UNDEF, both -1); a tuner that leaves them alone leaves the choice to NCCL.
constexpr int kUndefined = -1;

// What v2's getCollInfo asked of NCCL besides the size: whether NVLink SHARP (NVLS or NVLS tree)
// and CollNet could run this call. From tuner ABI v3 on NCCL tells that only through the cost table (an entry
// that is not -1), so we read it there, as NCCL's own v2 adapter does.
bool offered(const CostTable& table, int algo) { return table.isCandidate(algo, abi::kProtoSimple); }

void getCollInfoV2(const abi::TunerV2& t, void* context, int collType, size_t nBytes, int numPipeOps,
                   float* costTable, int numAlgo, int numProto, int* nChannels) {
  CostTable table(costTable, numAlgo, numProto);
  const int nvlsSupport = offered(table, abi::kAlgoNvls) || offered(table, abi::kAlgoNvlsTree) ? 1 : 0;
  const int collNetSupport = offered(table, abi::kAlgoCollNetChain) ? 1 : 0;
  int algorithm = kUndefined;
  int protocol = kUndefined;
  if (t.getCollInfo(context, static_cast<abi::TunerFunc>(collType), nBytes, collNetSupport, nvlsSupport, numPipeOps,
                    &algorithm, &protocol, nChannels) != ncclSuccess) {
    return;
  }
  // Its one choice, as the cheapest entry: NCCL takes the smallest cost >= 0, so 0 makes it win
  // (a tie with another 0 goes to NCCL's scan order, as in NCCL's own v2 adapter). An entry NCCL
  // does not offer (-1), a half choice or an out-of-range one changes nothing (setCost refuses).
  table.setCost(algorithm, protocol, 0.0f);
}

// The struct has every entry point we call: init, getCollInfo and `last` (destroy before v5,
// finalize from v5 on).
template <typename Table>
bool complete(const Table* t, ncclResult_t (*Table::*last)(void*)) {
  return t->init != nullptr && t->getCollInfo != nullptr && t->*last != nullptr;
}

}  // namespace

bool chainableTuner(int abiVersion, const void* table) {
  if (table == nullptr) return false;
  switch (abiVersion) {
    case 2: return complete(static_cast<const abi::TunerV2*>(table), &abi::TunerV2::destroy);
    case 3: return complete(static_cast<const abi::TunerV3*>(table), &abi::TunerV3::destroy);
    case 4: return complete(static_cast<const abi::TunerV4*>(table), &abi::TunerV4::destroy);
    case 5: return complete(static_cast<const abi::TunerV5*>(table), &abi::TunerV5::finalize);
    case 6: return complete(static_cast<const abi::TunerV6*>(table), &abi::TunerV6::finalize);
    case 7: return complete(static_cast<const abi::TunerV7*>(table), &abi::TunerV7::finalize);
    default: return false;
  }
}

const char* chainedTunerName(const void* table) {
  // Every version's struct starts with the name.
  return table != nullptr ? static_cast<const abi::TunerV2*>(table)->name : nullptr;
}

ncclResult_t initOlderTuner(int abiVersion, const void* table, size_t nRanks, size_t nNodes,
                            abi::TunerLogger logger, void** context) {
  switch (abiVersion) {
    case 2:
      return static_cast<const abi::TunerV2*>(table)->init(nRanks, nNodes, logger, context);
    case 3:
      return static_cast<const abi::TunerV3*>(table)->init(nRanks, nNodes, logger, context);
    case 4:
      return static_cast<const abi::TunerV4*>(table)->init(nRanks, nNodes, logger, context);
    default:
      return ncclInvalidArgument;
  }
}

void chainedGetCollInfo(const ChainedTuner& chained, int collType, size_t nBytes, int numPipeOps,
                        float* costTable, int numAlgo, int numProto, int regBuff, int* nChannels) {
  if (chained.table == nullptr || costTable == nullptr) return;
  const auto coll = static_cast<abi::TunerFunc>(collType);
  // NCCL hands the table as float** that points straight at the floats; so do we.
  auto** asNccl = reinterpret_cast<float**>(costTable);
  const void* t = chained.table;
  decltype(abi::TunerV4::getCollInfo) withCosts = nullptr;  // one signature from v4 to v7
  switch (chained.abiVersion) {
    case 2:
      getCollInfoV2(*static_cast<const abi::TunerV2*>(t), chained.context, collType, nBytes, numPipeOps, costTable,
                    numAlgo, numProto, nChannels);
      return;
    case 3:  // v4 without regBuff
      static_cast<const abi::TunerV3*>(t)->getCollInfo(chained.context, coll, nBytes, numPipeOps, asNccl, numAlgo,
                                                       numProto, nChannels);
      return;
    case 4: withCosts = static_cast<const abi::TunerV4*>(t)->getCollInfo; break;
    case 5: withCosts = static_cast<const abi::TunerV5*>(t)->getCollInfo; break;
    case 6: withCosts = static_cast<const abi::TunerV6*>(t)->getCollInfo; break;
    case 7: withCosts = static_cast<const abi::TunerV7*>(t)->getCollInfo; break;
    default: return;
  }
  withCosts(chained.context, coll, nBytes, numPipeOps, asNccl, numAlgo, numProto, regBuff, nChannels);
}

void chainedGetCollInfoV2(const ChainedTuner& chained, int collType, size_t nBytes, int collNetSupport,
                          int nvlsSupport, int numPipeOps, int* algorithm, int* protocol, int* nChannels) {
  if (chained.abiVersion != 2 || chained.table == nullptr) return;
  static_cast<const abi::TunerV2*>(chained.table)
      ->getCollInfo(chained.context, static_cast<abi::TunerFunc>(collType), nBytes, collNetSupport, nvlsSupport,
                    numPipeOps, algorithm, protocol, nChannels);
}

void chainedFinalize(const ChainedTuner& chained) {
  if (!chainableTuner(chained.abiVersion, chained.table)) return;
  const void* t = chained.table;
  switch (chained.abiVersion) {
    case 2: static_cast<const abi::TunerV2*>(t)->destroy(chained.context); break;
    case 3: static_cast<const abi::TunerV3*>(t)->destroy(chained.context); break;
    case 4: static_cast<const abi::TunerV4*>(t)->destroy(chained.context); break;
    case 5: static_cast<const abi::TunerV5*>(t)->finalize(chained.context); break;
    case 6: static_cast<const abi::TunerV6*>(t)->finalize(chained.context); break;
    default: static_cast<const abi::TunerV7*>(t)->finalize(chained.context); break;  // 7: nothing else passes
  }
}

}  // namespace nccl_lamport
