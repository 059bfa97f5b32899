// Every NCCL_LAMPORT_* knob, in one table, parsed once per process.
//
// The table itself is common/knobs.h. The parser takes the environment as a function so tests never
// call setenv. A bad value is a WARN naming the variable and the value, and the default is kept: a
// typo never crashes a job. The exception is the A/B switch NCCL_LAMPORT_ENABLE: a value it does
// not know turns the Lamport path off (a switch must never fail open) and is printed even when
// NCCL_DEBUG is unset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/byte_size.h"  // parseByteSize: the Bytes kind
#include "common/knobs.h"

namespace nccl_lamport {

/** How a knob's text is parsed (the `kind` column of common/knobs.h). */
enum class KnobKind { Switch, Bool, Bytes, Ms, Path };

template <KnobKind kind>
struct KnobValue;
template <> struct KnobValue<KnobKind::Switch> { using type = bool; };
template <> struct KnobValue<KnobKind::Bool> { using type = bool; };
template <> struct KnobValue<KnobKind::Bytes> { using type = size_t; };
template <> struct KnobValue<KnobKind::Ms> { using type = uint64_t; };
template <> struct KnobValue<KnobKind::Path> { using type = std::string; };

/** The parsed knobs, one member per line of common/knobs.h (name, default and meaning there).
 *  Units are in the member names: bytes, milliseconds. */
struct Config {
#define NCCL_LAMPORT_CONFIG_MEMBER(field, kind, variable, defaultValue, ...) \
  KnobValue<KnobKind::kind>::type field = defaultValue;
  NCCL_LAMPORT_KNOBS(NCCL_LAMPORT_CONFIG_MEMBER)
#undef NCCL_LAMPORT_CONFIG_MEMBER
};

/** One knob's line of common/knobs.h, for the README check and listings. */
struct KnobInfo {
  const char* variable;     // full environment variable name
  KnobKind kind;
  const char* defaultText;  // default as the README's default cell starts
  const char* unit;         // as the README's unit cell starts: "bool", "bytes", "ms", "path"
  uint64_t minimum;         // Bytes, Ms: smallest accepted value
  uint64_t maximum;         // Bytes, Ms: larger values are clamped to it (kNoKnobMaximum: none)
  const char* doc;          // one line
};

/** The knobs this build understands: exactly the lines of common/knobs.h, in order. */
const std::vector<KnobInfo>& knobTable();

using EnvLookup = std::function<const char*(const char*)>;

/** Parses the knobs from env (a getenv-like function), asking it for exactly the variables of
 *  knobTable(). Never throws; bad values WARN (see the top of this file). */
Config parseConfig(const EnvLookup& env);

/** Parses a boolean knob: 1/true/yes/on or 0/false/no/off, any case (common/bool_knob.h, shared
 *  with the LD_AUDIT module). False, *out untouched, on anything else. */
bool parseBool(const char* text, bool* out);

/** NCCL_LAMPORT_ENABLE's rule, for code that reads the switch before the configuration exists
 *  (the preload constructor): true only for a recognised "on" spelling or when unset. */
bool switchIsOn(const char* text);

/** Parses an unsigned decimal integer. False on anything else or overflow. */
bool parseUnsigned(const char* text, uint64_t* out);

/** The process-wide configuration, read from the real environment on first use. */
const Config& globalConfig();

}  // namespace nccl_lamport
