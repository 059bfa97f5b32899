#include "tuner/routing.h"

#include <algorithm>
#include <cstdint>

#include "kernels/lamport_allreduce.h"

namespace nccl_lamport {

size_t defaultOneShotMaxBytes(int nRanks, int smArch) {
  // 2 x H200 (sm_90): measured, see docs/crossover-h200.md.
  // nRanks 4 and 8: not measured yet (no 4- or 8-GPU machine so far); TensorRT-LLM's legacy
  // selector (one-shot < 1 MB at N <= 4, < 500 KB at N > 4) and vLLM's (N <= 4 < 512 KB, N = 8
  // < 256 KB) bracket them, so take the lower of each pair until a measurement replaces it.
  (void)smArch;
  if (nRanks <= 1) return 0;
  if (nRanks == 2) return size_t{16} << 20;
  if (nRanks <= 4) return size_t{512} << 10;
  if (nRanks <= 8) return size_t{256} << 10;
  return size_t{64} << 10;
}

RoutingTable makeRoutingTable(int nRanks, int smArch, size_t overrideOneShotMaxBytes,
                              size_t maxBytesByWorkspace) {
  RoutingTable table;
  table.oneShotMaxBytes =
      overrideOneShotMaxBytes != 0 ? overrideOneShotMaxBytes : defaultOneShotMaxBytes(nRanks, smArch);
  table.oneShotMaxBytes = std::min(table.oneShotMaxBytes, maxBytesByWorkspace);
  return table;
}

size_t defaultTwoShotMaxBytes(int nRanks, int smArch) {
  (void)smArch;
  (void)nRanks;
  return 0;  // not measured on a multi-GPU machine yet: off unless NCCL_LAMPORT_TWOSHOT_MAX_BYTES
}

size_t twoShotCapacityBytes(int nRanks, size_t slotBytes) {
  return lamportTwoShotMaxVectors(nRanks, slotBytes) * kLamportVectorBytes;  // what the launcher takes
}

size_t agreedTwoShotMaxBytes(int nRanks, int smArch, size_t overrideTwoShotMaxBytes, size_t oneShotMaxBytes,
                             size_t slotBytes) {
  if (nRanks < kTwoShotMinRanks) return 0;
  size_t bytes = overrideTwoShotMaxBytes != 0 ? overrideTwoShotMaxBytes : defaultTwoShotMaxBytes(nRanks, smArch);
  bytes = std::min(bytes, twoShotCapacityBytes(nRanks, slotBytes));
  return bytes > oneShotMaxBytes ? bytes : 0;
}

bool lamportDataTypeOf(ncclDataType_t datatype, LamportDataType* out) {
  switch (datatype) {
    case ncclFloat32: *out = LamportDataType::kFloat32; return true;
    case ncclFloat16: *out = LamportDataType::kFloat16; return true;
    case ncclBfloat16: *out = LamportDataType::kBFloat16; return true;
    default: return false;
  }
}

size_t lamportElementSize(ncclDataType_t datatype) {
  LamportDataType type;
  return lamportDataTypeOf(datatype, &type) ? lamportElementBytes(type) : 0;
}

bool lamportSupportsOp(ncclRedOp_t op) { return op == ncclSum || op == ncclAvg; }

AllReducePath routeAllReduce(const RoutingTable& table, bool commEligible, int nRanks,
                             ncclDataType_t datatype, ncclRedOp_t op, size_t count) {
  if (!commEligible || nRanks < 2 || count == 0) return AllReducePath::kNccl;
  const size_t elementSize = lamportElementSize(datatype);
  if (elementSize == 0 || !lamportSupportsOp(op)) return AllReducePath::kNccl;
  if (count <= table.oneShotMaxBytes / elementSize) return AllReducePath::kLamportOneShot;
  if (nRanks >= kTwoShotMinRanks && count <= table.twoShotMaxBytes / elementSize) return AllReducePath::kLamportTwoShot;
  return AllReducePath::kNccl;
}

}  // namespace nccl_lamport
