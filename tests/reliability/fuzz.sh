#!/usr/bin/env bash
# Bounded libFuzzer runs (issue 10, evidence), with clang (Debian's clang-14 and its libFuzzer):
#   fuzz_knobs        the knob parsers (common/config.h) and NCCL_DEBUG parsing (common/log.h)
#   fuzz_fd_exchange  receiveFd (plugin/transport/fd_exchange.h) against any message a peer socket sends
# each built with -fsanitize=fuzzer,address,undefined and run for SECONDS (default 120) from a
# small seed corpus. Prints libFuzzer's last status line per target; exits 1 on any finding
# (the crashing input is kept under OUT_DIR, default /tmp/nccl-lamport-fuzz: make it a test).
# Usage: tests/reliability/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-120}"
out="${OUT_DIR:-/tmp/nccl-lamport-fuzz}"
cxx="${CLANGXX:-$(command -v clang++-14 || command -v clang++)}"
mkdir -p "$out"
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I. -pthread)
"$cxx" "${flags[@]}" tests/reliability/fuzz_knobs.cc common/config.cc common/log.cc -o "$out/fuzz_knobs"
"$cxx" "${flags[@]}" tests/reliability/fuzz_fd_exchange.cc plugin/transport/fd_exchange.cc common/log.cc -o "$out/fuzz_fd_exchange"

seed() {  # dir, then one seed per argument (printf escapes allowed)
  local dir="$1" i=0
  shift
  rm -rf "$dir" && mkdir -p "$dir"
  for s in "$@"; do printf "$s" >"$dir/seed$i"; i=$((i + 1)); done
}
seed "$out/corpus_knobs" '1' '0\0on' 'off\0yes\0NO' '64K' '8M\0001G' '18446744073709551615' '99999999999999999999' \
  'WARN\0INIT,COLL' 'INFO\0^ALL' '600000\0-1\0 12' '1e3\0true\0TRUE'
seed "$out/corpus_fd" '\001x' '\000x' '\003xyz' '\004' '\002' '\001'

status=0
for target in fuzz_knobs fuzz_fd_exchange; do
  corpus="$out/corpus_${target#fuzz_}"
  [ "$target" = fuzz_knobs ] && corpus="$out/corpus_knobs"
  [ "$target" = fuzz_fd_exchange ] && corpus="$out/corpus_fd"
  log="$out/$target.log"
  if (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "./$target" -max_total_time="$seconds" -timeout=10 \
        -artifact_prefix="$out/${target}-" "$corpus" >"$log" 2>&1); then
    echo "$target: $(grep -E '^#[0-9]+' "$log" | tail -1)"
  else
    echo "$target: FINDING (see $log and $out/${target}-*)"
    tail -30 "$log"
    status=1
  fi
done
exit $status
