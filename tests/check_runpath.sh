#!/usr/bin/env bash
# RUNPATH / RPATH rules (issue 10, point 11):
#   - no ELF file of the build tree has an empty search-path entry (a leading, trailing or double
#     ':' makes the loader search the current directory);
#   - installed (cmake --install into a scratch prefix), no ELF file names an absolute directory:
#     only $ORIGIN-relative entries, so nothing of the build machine leaks into an install.
# Usage: check_runpath.sh BUILD_DIR
set -euo pipefail
build="$1"
fail=0
runpath() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p'; }
is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = "177ELF" ]; }

checked=0
while IFS= read -r f; do
  is_elf "$f" || continue
  checked=$((checked + 1))
  rp=$(runpath "$f")
  [ -z "$rp" ] && continue
  if [[ "$rp" == :* || "$rp" == *: || "$rp" == *::* ]]; then
    echo "FAIL: empty search-path entry in $f: [$rp]"
    fail=1
  fi
done < <(find "$build" -path '*/CMakeFiles' -prune -o -type f \( -perm -u+x -o -name '*.so*' \) -print)
echo "build tree: $checked ELF files checked"

prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
installed=0
while IFS= read -r f; do
  is_elf "$f" || continue
  installed=$((installed + 1))
  rp=$(runpath "$f")
  IFS=':' read -ra entries <<<"$rp"
  for e in "${entries[@]}"; do
    if [[ "$e" != '$ORIGIN'* ]]; then
      echo "FAIL: installed $f has search-path entry '$e' (all: [$rp])"
      fail=1
    fi
  done
done < <(find "$prefix" -type f)
echo "installed: $installed ELF files checked"
# The installed benchmark must reach the installed plugin through its own search path, wherever
# CMAKE_INSTALL_LIBDIR put it (lib, lib64, lib/<multiarch>).
bench=$(find "$prefix" -type f -name nccl-lamport-bench | head -1)
if [ -n "$bench" ]; then
  found=""
  IFS=':' read -ra entries <<<"$(runpath "$bench")"
  for e in "${entries[@]}"; do
    dir="${e/\$ORIGIN/$(dirname "$bench")}"
    [ -e "$dir/libnccl-lamport.so" ] && found="$dir"
  done
  if [ -z "$found" ]; then
    echo "FAIL: the installed benchmark's search path [$(runpath "$bench")] reaches no libnccl-lamport.so" \
         "(installed: $(find "$prefix" -name libnccl-lamport.so | sed "s|$prefix/||"))"
    fail=1
  else
    echo "installed benchmark finds the plugin in ${found#$prefix/}"
  fi
fi
[ "$installed" -gt 0 ] || { echo "FAIL: nothing installed"; fail=1; }
exit $fail
