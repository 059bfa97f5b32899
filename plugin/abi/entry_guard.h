// No C++ exception may cross the C ABI: a throw out of an extern "C" entry
// point is std::terminate for the user's process. Every exported entry is a function-try-block
// ending in `catch (...) { return resultOfException("name"); }`; work of ours that runs after NCCL
// has answered catches for itself, so that a failure of ours never changes NCCL's result.
#pragma once

#include <nccl.h>

#include <exception>
#include <new>
#include <system_error>

#include "common/log.h"

namespace nccl_lamport {

/**
 * Call only inside a catch block. WARNs with `where` and the exception's text and returns NCCL's
 * code for the same cause: ncclSystemError for a failure of the system (std::bad_alloc,
 * std::system_error: memory, threads), ncclInternalError for anything else.
 */
inline ncclResult_t resultOfException(const char* where) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    LAMPORT_WARN("%s: out of host memory in nccl-lamport", where);
    return ncclSystemError;
  } catch (const std::system_error& e) {
    LAMPORT_WARN("%s: system error in nccl-lamport: %s", where, e.what());
    return ncclSystemError;
  } catch (const std::exception& e) {
    LAMPORT_WARN("%s: internal error in nccl-lamport: %s", where, e.what());
    return ncclInternalError;
  } catch (...) {
    LAMPORT_WARN("%s: internal error in nccl-lamport (unknown exception)", where);
    return ncclInternalError;
  }
}

}  // namespace nccl_lamport
