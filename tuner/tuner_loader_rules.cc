#include "tuner/tuner_loader_rules.h"

namespace nccl_lamport {

TunerLoaderRules tunerLoaderRules(int ncclAbiVersion) {
  TunerLoaderRules rules;
  if (ncclAbiVersion >= 5 && ncclAbiVersion <= 7) {
    // The version NCCL called us with, else the newest older one whose init needs nothing that
    // NCCL's v5+ init alone gives. Not v5/v6 under a newer NCCL: their model constants have
    // another layout than v7's.
    rules.structVersions = {ncclAbiVersion, 4, 3, 2};
    return rules;
  }
  if (ncclAbiVersion < 2 || ncclAbiVersion > 4) return rules;
  // 2.21 - 2.27 look for their own struct, then each older one down to v2, and nothing newer: a
  // library with only a newer struct has no tuner for them.
  for (int version = ncclAbiVersion; version >= 2; --version) rules.structVersions.push_back(version);
  rules.confFileVariable = ncclAbiVersion >= 3;
  rules.homeFromPasswd = true;
  rules.stripsCarriageReturn = false;
  rules.noneTurnsPluginsOff = false;
  rules.prefixedNameAlways = true;
  rules.opensNetPluginItself = ncclAbiVersion <= 3;
  rules.lazyBinding = ncclAbiVersion <= 3;
  return rules;
}

}  // namespace nccl_lamport
