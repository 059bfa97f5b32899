// How a GPU test executable reaches nccl-lamport, and what that changes for the suite.
//
// Two builds of the forked tests exist (tests/gpu/gpu_tests.cmake):
//  - linked (build/tests/test_gpu_*): libnccl-lamport.so is linked ahead of libnccl, as
//    LD_PRELOAD would put it; the extension API comes from the link, and pncclAllReduce (NCCL's
//    profiling alias, which the interposer does not wrap) is NCCL's own allreduce.
//  - tuner activation (build/tests/tuner/test_gpu_*, SPEC 4a): the executable knows nothing of
//    nccl-lamport; only NCCL_TUNER_PLUGIN makes NCCL load it, RTLD_LOCAL, and its tuner init
//    hooks NCCL's entry points. pncclAllReduce is then the same (hooked) function as
//    ncclAllReduce, so NCCL's own result needs other collectives (ncclOwnAllReduce), and the
//    extension API is looked up in the object NCCL loaded (activation_tuner.cc).
// Which one a process is is fixed at link time: it has activation_linked.cc or activation_tuner.cc.
#pragma once

#include <string>

namespace nccl_lamport {
namespace gputest {

enum class Activation { kLinked, kTuner };

/** This executable's build (see above). */
Activation activation();

inline bool tunerActivation() { return activation() == Activation::kTuner; }

/** "" when the environment gives tuner activation and nothing else: NCCL_TUNER_PLUGIN (tunerPlugin)
 *  names an absolute path (the extension API is found through it with dlopen RTLD_NOLOAD, which
 *  matches the name NCCL opened), and neither LD_PRELOAD nor LD_AUDIT names an nccl-lamport object
 *  (that would interpose before the tuner's init and test the other mode). Otherwise what is wrong,
 *  for a test failure. Pure (arguments are the variables' values, nullptr when unset). */
std::string tunerActivationEnvProblem(const char* tunerPlugin, const char* ldPreload, const char* ldAudit);

/** The same for this process's NCCL_TUNER_PLUGIN, LD_PRELOAD and LD_AUDIT. */
std::string tunerActivationEnvProblem();

/** Checked in every forked rank right after its first communicator exists: "" in the linked
 *  build; in the tuner build, "" when NCCL has loaded the object NCCL_TUNER_PLUGIN names, else
 *  why not (then nothing of nccl-lamport runs and every test would be meaningless). */
std::string activationProblemAfterInit();

}  // namespace gputest
}  // namespace nccl_lamport
