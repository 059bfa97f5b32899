// Byte counts as people type them, one syntax for the NCCL_LAMPORT_* knobs and the benchmark's
// options: "65536", "64K", "64KiB", "64KB", "8M", "1G", "100B". Units are binary (1K = 1024),
// as NCCL's own size variables are; the letters are case-insensitive.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nccl_lamport {

/**
 * Parses a byte count: decimal digits, then optionally K, M or G (x 2^10, 2^20, 2^30), then
 * optionally "B" or (after a unit letter) "iB", any case. Nothing else: no sign, no spaces, no
 * fraction, no hex. False, *out untouched, on anything else or when the value overflows size_t.
 */
bool parseByteSize(std::string_view text, size_t* out);

/** Overload for C strings (getenv): nullptr is rejected. */
bool parseByteSize(const char* text, size_t* out);

/** Short label that parseByteSize reads back to the same value: "8", "2K", "16M", "1G"; a count
 *  that is no whole number of K/M/G stays in bytes ("3000"). */
std::string formatByteSize(size_t bytes);

}  // namespace nccl_lamport
