// Types shared by every NCCL tuner ABI version (v2..v7), declared by us with NCCL's layout.
//
// NCCL passes these by value or pointer across the plugin boundary, so only their size and
// numeric values matter; names are ours. Read from NVIDIA/nccl src/include/nccl_common.h and
// src/include/plugin/nccl_tuner.h (2.21 .. 2.30).
#pragma once

#include <cstddef>
#include <cstdint>

#include <nccl.h>

#include "common/log.h"

namespace nccl_lamport {
namespace abi {

/**
 * The collective a getCollInfo call is about (NCCL's ncclFunc_t, a plain C enum: int-sized).
 * Only the values up to kFuncRecv are stable across 2.21..2.30; newer releases append more.
 */
enum TunerFunc : int {
  kFuncBroadcast = 0,
  kFuncReduce = 1,
  kFuncAllGather = 2,
  kFuncReduceScatter = 3,
  kFuncAllReduce = 4,
  kFuncSendRecv = 5,
  kFuncSend = 6,
  kFuncRecv = 7,
};
static_assert(sizeof(TunerFunc) == sizeof(int), "ncclFunc_t is passed as an int");

/** NCCL's logger as handed to init (ncclDebugLogger_t; its level enum is passed as an int). */
using TunerLogger = NcclDebugLogger;

/** Dimensions of the cost table NCCL hands to getCollInfo (v3+): float[algorithms][protocols]. */
constexpr int kCostAlgorithms = 7;  // tree, ring, collnet direct, collnet chain, NVLS, NVLS tree, PAT
constexpr int kCostProtocols = 3;   // LL, LL128, simple

/** Algorithm rows of the cost table (NCCL_ALGO_*). */
enum CostAlgorithm : int {
  kAlgoTree = 0,
  kAlgoRing = 1,
  kAlgoCollNetDirect = 2,
  kAlgoCollNetChain = 3,
  kAlgoNvls = 4,
  kAlgoNvlsTree = 5,
  kAlgoPat = 6,
};

/** Protocol columns of the cost table (NCCL_PROTO_*). */
enum CostProtocol : int {
  kProtoLL = 0,
  kProtoLL128 = 1,
  kProtoSimple = 2,
};

/** A cost entry NCCL marks as "not a candidate" (unsupported or disabled by NCCL_ALGO/PROTO). */
constexpr float kCostIgnored = -1.0f;

}  // namespace abi
}  // namespace nccl_lamport
