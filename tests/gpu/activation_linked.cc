// The linked build of the GPU tests (tests/gpu/activation_mode.h): libnccl-lamport.so is linked
// ahead of libnccl and provides the extension API itself.
#include "tests/gpu/activation_mode.h"

namespace nccl_lamport {
namespace gputest {

Activation activation() { return Activation::kLinked; }

std::string activationProblemAfterInit() { return ""; }

}  // namespace gputest
}  // namespace nccl_lamport
