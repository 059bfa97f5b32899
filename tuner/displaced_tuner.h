// The tuner that loading ours displaced, so it keeps answering for everything we leave to NCCL
// (README, "Clients": the tuner it displaced keeps answering behind it).
//
// NCCL loads one tuner: the one NCCL_TUNER_PLUGIN names, else libnccl-tuner.so, else the one the
// net plugin ships (aws-ofi-nccl's). Naming ours therefore displaces (a) a tuner named in
// nccl.conf that the environment overrode, or libnccl-tuner.so when nccl.conf names none, and
// (b) when that library does not open (or is ours), the net plugin's tuner. "none" (where that
// NCCL knows it), or a library that opens without a tuner struct that NCCL accepts, means no
// tuner, as in NCCL. We chain to what the NCCL that called ours would have loaded, following its
// loader's rules (tuner/tuner_loader_rules.h): which nccl.conf it reads and how, the names it
// tries, whether it opens the net plugin itself, and the struct versions it accepts, newest
// first. Under v5..v7 the struct of NCCL's own version gets exactly NCCL's init arguments; an
// older one (v4, v3, v2) is called through its own ABI (tuner/chained_tuner.h), as NCCL itself
// would have called it. Our own object, or another copy of nccl-lamport, is never a candidate.
#pragma once

#include <string>
#include <vector>

namespace nccl_lamport {

/** What the search found: the exported struct (null when none), its ABI version, and where it
 *  came from (for the log). */
struct DisplacedTuner {
  const void* table = nullptr;  // ncclTunerPlugin_v<abiVersion>
  int abiVersion = 0;
  std::string source;
};

/** The displaced tuner for communicators NCCL sets up through tuner ABI ncclAbiVersion (v2..v7;
 *  other versions find none). Searched once per process and version; thread-safe. ourPath:
 *  this object's path (skipped). */
DisplacedTuner displacedTuner(int ncclAbiVersion, const std::string& ourPath);

/** True when an nccl.conf text assigns NCCL_TUNER_PLUGIN, as NCCL reads it (src/misc/param.cc):
 *  "KEY=VALUE" lines, KEY exactly what precedes '=', '#' in column 0 a comment, the first
 *  assignment wins; a line's final '\r' is dropped only with stripCarriageReturn (NCCL 2.30 on).
 *  *value: what it assigns (possibly ""). */
bool tunerPluginInConf(const std::string& confText, std::string* value, bool stripCarriageReturn = true);

/** The library names NCCL tries for a plugin value, in order (src/plugin/plugin_open.cc): the
 *  value, then lib<prefix>-<value>.so unless it has a '/' or starts with "lib" and ends ".so";
 *  with alwaysPrefixed (NCCL before 2.27.5) that second name in every case. */
std::vector<std::string> pluginLibraryNames(const std::string& value, const char* prefix,
                                            bool alwaysPrefixed = false);

}  // namespace nccl_lamport
