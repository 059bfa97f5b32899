// Calling the tuner ours displaced (tuner/displaced_tuner.h) through its own tuner ABI version.
//
// NCCL calls us through v2..v7. The displaced tuner may export only an older struct than NCCL's
// (v4, v3, v2: aws-ofi-nccl's tuners have shipped v2/v3), which NCCL itself would have loaded
// through its own adapters. We do what those adapters do, so it answers behind ours as it would
// have alone:
//   v4      getCollInfo has v5's signature; init takes nRanks, nNodes and the logger only.
//   v3      as v4 without regBuff.
//   v2      no cost table: it returns one algorithm/protocol choice (or none). Mapped
//           conservatively: its choice becomes the cheapest entry of NCCL's table (cost 0), and
//           only if NCCL offers that entry (not -1); everything else stays as it was. Under NCCL
//           2.21, which speaks v2 itself, it gets NCCL's own arguments instead
//           (chainedGetCollInfoV2).
// A struct of NCCL's own version keeps NCCL's arguments (tuner/tuner_plugin.cc calls its init).
#pragma once

#include <cstddef>

#include <nccl.h>

#include "tuner/abi/tuner_common.h"

namespace nccl_lamport {

/** The displaced tuner's per-communicator state: its exported struct, that struct's ABI version
 *  and its context. abiVersion 0: none is chained. */
struct ChainedTuner {
  int abiVersion = 0;
  const void* table = nullptr;  // ncclTunerPlugin_v<abiVersion>
  void* context = nullptr;
};

/** True when table (ncclTunerPlugin_v<abiVersion>, v2..v7) has init, getCollInfo and
 *  finalize/destroy; false for a null table or another version. */
bool chainableTuner(int abiVersion, const void* table);

/** The name a tuner struct of any version carries first (null when it has none). */
const char* chainedTunerName(const void* table);

/** init of a v2..v4 struct, which takes no commId, NVLink-domain summary or model constants.
 *  Returns its result (ncclInvalidArgument for another version). */
ncclResult_t initOlderTuner(int abiVersion, const void* table, size_t nRanks, size_t nNodes,
                            abi::TunerLogger logger, void** context);

/**
 * One getCollInfo query for the chained tuner, in its own ABI. costTable: NCCL's
 * float[numAlgo][numProto] (microseconds, -1 = not a candidate), non-null; nChannels as NCCL
 * passed it. Its result is ignored: NCCL alone would fail the collective on an error, ours never
 * does; whatever it wrote before failing stays.
 */
void chainedGetCollInfo(const ChainedTuner& chained, int collType, size_t nBytes, int numPipeOps,
                        float* costTable, int numAlgo, int numProto, int regBuff, int* nChannels);

/**
 * One query of NCCL 2.21 (tuner ABI v2: no cost table) for a chained v2 tuner, the only struct
 * 2.21 loads: it gets NCCL's arguments and NCCL's algorithm/protocol/nChannels pointers as they
 * are, so its choice is what NCCL runs. Its result is ignored as in chainedGetCollInfo. No-op
 * when no v2 tuner is chained.
 */
void chainedGetCollInfoV2(const ChainedTuner& chained, int collType, size_t nBytes, int collNetSupport,
                          int nvlsSupport, int numPipeOps, int* algorithm, int* protocol, int* nChannels);

/** The chained tuner's finalize (v2..v4: destroy). No-op when none is chained. */
void chainedFinalize(const ChainedTuner& chained);

}  // namespace nccl_lamport
