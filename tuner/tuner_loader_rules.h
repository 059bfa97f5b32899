// How NCCL's tuner loader finds its tuner, for each tuner ABI version NCCL calls ours through:
// what the search for the tuner ours displaced (tuner/displaced_tuner.h) copies, so that it
// finds the tuner that NCCL would have loaded without ours, and nothing else.
//
// Read from NVIDIA/nccl: src/misc/tuner.cc (2.21 - 2.25), src/plugin/tuner.cc,
// src/plugin/tuner/tuner_v*.cc and src/plugin/plugin_open.cc (2.26 on), src/misc/param.cc
// (nccl.conf). Releases that share one tuner ABI version mostly share these rules; where they do
// not, the rules follow one of them, named at the field: v3's are those of 2.23, v4's those of
// 2.26 - 2.27.3.
#pragma once

#include <vector>

namespace nccl_lamport {

struct TunerLoaderRules {
  /** The ncclTunerPlugin_vN structs NCCL accepts from a library, in the order it looks for
   *  them (older ones through NCCL's own adapters). */
  std::vector<int> structVersions;
  /** NCCL_CONF_FILE, when set and not empty, replaces ~/.nccl.conf (2.23 on; 2.22 ignores it,
   *  and the v3 rules follow 2.23). */
  bool confFileVariable = true;
  /** ~/.nccl.conf is in the passwd entry's home directory (getpwuid), not in $HOME (NCCL before
   *  2.30). */
  bool homeFromPasswd = false;
  /** A '\r' ending an nccl.conf line is not part of the value (2.30 on). */
  bool stripsCarriageReturn = true;
  /** NCCL_TUNER_PLUGIN=none (any case) means no tuner at all, the net plugin's included, and
   *  NCCL_NET_PLUGIN=none no net plugin (2.28 on; before, "none" is a library name like any
   *  other). */
  bool noneTurnsPluginsOff = true;
  /** lib<prefix>-<value>.so is tried after the value even when the value is a path or a
   *  "lib...so" name (before 2.27.5; the v4 rules follow 2.24 - 2.27.3). */
  bool prefixedNameAlways = false;
  /** The tuner loader opens the net plugin's library names itself (2.21 - 2.25), so it finds a
   *  net plugin that NCCL's net loader closed again; from 2.26 on it only looks in the library
   *  the net loader holds. The v4 rules follow 2.26 - 2.27. */
  bool opensNetPluginItself = false;
  /** dlopen with RTLD_LAZY (2.21 - 2.25) instead of RTLD_NOW; the v4 rules follow 2.26 - 2.27. */
  bool lazyBinding = false;
};

/**
 * The rules of an NCCL that calls ours through tuner ABI ncclAbiVersion: v2 (2.21), v3 (2.22 -
 * 2.23), v4 (2.24 - 2.27); v5..v7 (2.28 on) get the rules the search has always followed, those
 * of 2.30 on (2.28 - 2.29 still read ~/.nccl.conf from the passwd entry and keep a '\r', which
 * the search does not model yet). Another version: no struct versions at all.
 */
TunerLoaderRules tunerLoaderRules(int ncclAbiVersion);

}  // namespace nccl_lamport
