#!/usr/bin/env bash
# Checks the shared object the way the loader and NCCL see it (SPEC 4.1, 7):
#   - no DT_NEEDED on libnccl, libcudart or libcuda;
#   - the dynamic symbol table exports exactly the names of exports.map (plus nothing else);
#   - libnccl-tuner-lamport.so sits beside it and resolves to the same object.
# Usage: check_shared_object.sh path/to/libnccl-lamport.so path/to/exports.map
set -euo pipefail
so="$1"
map="$2"
fail=0

needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "DT_NEEDED: $(echo $needed)"
if echo "$needed" | grep -Eq '^(libnccl|libcudart|libcuda\.)'; then
  echo "FAIL: $so depends on a library it must resolve at run time"
  fail=1
fi

expected=$(grep -E '^\s+[A-Za-z_][A-Za-z0-9_]*;' "$map" | tr -d ' ;' | sort)
exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
missing=$(comm -23 <(echo "$expected") <(echo "$exported"))
extra=$(comm -13 <(echo "$expected") <(echo "$exported"))
if [ -n "$missing" ]; then echo "FAIL: not exported: $(echo $missing)"; fail=1; fi
if [ -n "$extra" ]; then echo "FAIL: exported but not in exports.map: $(echo $extra)"; fail=1; fi
echo "exported: $(echo "$exported" | wc -l) symbols"

tuner="$(dirname "$so")/libnccl-tuner-lamport.so"
if [ ! -e "$tuner" ] || [ "$(readlink -f "$tuner")" != "$(readlink -f "$so")" ]; then
  echo "FAIL: $tuner missing or not the same object"
  fail=1
fi

if [ "$fail" -ne 0 ]; then echo "1 failed"; exit 1; fi
echo "shared object checks passed"
