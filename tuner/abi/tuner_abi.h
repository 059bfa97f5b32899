// The NCCL tuner ABI as this object exports it: every version we serve, the newest as the
// default names, and the exported structs (defined in tuner/tuner_plugin.cc).
//
// NCCL looks the symbols up with dlsym, newest first, and takes the first one found, so one
// object serves every release from 2.21 on. v1 (2.19 - 2.20) is not exported: it had no
// per-communicator context, and 2.21+ no longer loads it.
#pragma once

#include "tuner/abi/tuner_common.h"
#include "tuner/abi/tuner_v2.h"
#include "tuner/abi/tuner_v3.h"
#include "tuner/abi/tuner_v4.h"
#include "tuner/abi/tuner_v5.h"
#include "tuner/abi/tuner_v6.h"
#include "tuner/abi/tuner_v7.h"

namespace nccl_lamport {
namespace abi {

using Tuner = TunerV7;
using NvlDomainInfo = NvlDomainInfoV7;
using TunerConstants = TunerConstantsV7;

/** The version NCCL 2.32 looks for first. */
constexpr const char* kNewestTunerSymbol = "ncclTunerPlugin_v7";

}  // namespace abi
}  // namespace nccl_lamport

/** Marks the symbols NCCL looks up with dlsym; everything else in the object stays hidden. */
#define LAMPORT_TUNER_EXPORT __attribute__((visibility("default")))

// The exported structs, one per ABI version (tuner/tuner_plugin.cc).
extern "C" {
extern LAMPORT_TUNER_EXPORT const nccl_lamport::abi::TunerV2 ncclTunerPlugin_v2;
extern LAMPORT_TUNER_EXPORT const nccl_lamport::abi::TunerV3 ncclTunerPlugin_v3;
extern LAMPORT_TUNER_EXPORT const nccl_lamport::abi::TunerV4 ncclTunerPlugin_v4;
extern LAMPORT_TUNER_EXPORT const nccl_lamport::abi::TunerV5 ncclTunerPlugin_v5;
extern LAMPORT_TUNER_EXPORT const nccl_lamport::abi::TunerV6 ncclTunerPlugin_v6;
extern LAMPORT_TUNER_EXPORT const nccl_lamport::abi::TunerV7 ncclTunerPlugin_v7;
}
