// The tuner that loading ours displaced, so it keeps answering for everything we leave to NCCL
// (issue 9 point 4; SPEC 2: "keeps the tuner it displaced working behind it").
//
// NCCL loads one tuner: the one NCCL_TUNER_PLUGIN names, else libnccl-tuner.so, else the one the
// net plugin ships (aws-ofi-nccl's). Naming ours therefore displaces (a) a tuner named in
// nccl.conf (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf) that the environment overrode, and
// (b) the net plugin's tuner. We look for (a), then (b) in the net plugin NCCL already loaded
// (NCCL_NET_PLUGIN, else libnccl-net.so; never loaded by us), and chain to the first one found.
// In that library we take the tuner ABI version NCCL called us with (v5..v7: its init gets
// exactly NCCL's arguments), else the newest of v4, v3, v2 it exports, called through its own
// ABI (tuner/chained_tuner.h), as NCCL would have called it. Our own object is never a candidate.
#pragma once

#include <string>

namespace nccl_lamport {

/** What the search found: the exported struct (null when none), its ABI version, and where it
 *  came from (for the log). */
struct DisplacedTuner {
  const void* table = nullptr;  // ncclTunerPlugin_v<abiVersion>
  int abiVersion = 0;
  std::string source;
};

/** The displaced tuner for communicators NCCL sets up through tuner ABI ncclAbiVersion (v5..v7;
 *  other versions find none). Searched once per process and version; thread-safe. ourPath:
 *  this object's path (skipped). */
DisplacedTuner displacedTuner(int ncclAbiVersion, const std::string& ourPath);

/** The NCCL_TUNER_PLUGIN value an nccl.conf text sets ("" if none): "KEY=VALUE" lines, '#'
 *  comments, the last assignment wins. */
std::string tunerPluginFromConf(const std::string& confText);

}  // namespace nccl_lamport
