#!/usr/bin/env bash
# Checks the shared object the way the loader and NCCL see it (SPEC 4.1, 7):
#   - no DT_NEEDED on libnccl, libcudart or libcuda;
#   - the dynamic symbol table exports exactly the names of exports.map (plus nothing else);
#   - libnccl-tuner-lamport.so sits beside it and resolves to the same object;
#   - with nccl.h: every function of nccl.h that has a pnccl twin is exported (a program that
#     dlopens us in NCCL's place may look any of them up), and no pnccl name is;
#   - with the audit module: it needs only libc and exports only its la_* entry points;
#   - with the real libnccl.so.2: every function it defines and exports, except pnccl*, is
#     exported by us as a function (a program linked against NCCL needs each of them to load when
#     the LD_AUDIT module gives it our object: PyTorch needs ncclDevCommDestroy).
# Usage: check_shared_object.sh libnccl-lamport.so exports.map [nccl.h [libnccl-lamport-audit.so
#        [libnccl.so.2]]] (an empty argument skips its check)
set -euo pipefail
so="$1"
map="$2"
header="${3:-}"
audit="${4:-}"
real="${5:-}"
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

if [ -n "$header" ]; then
  api=$(grep -oE '\bpnccl[A-Za-z]+[[:space:]]*\(' "$header" | sed -E 's/^p//; s/[[:space:]]*\($//' | sort -u)
  unexported=$(comm -23 <(echo "$api") <(echo "$exported"))
  if [ -n "$unexported" ]; then echo "FAIL: NCCL API of $header not exported: $(echo $unexported)"; fail=1; fi
  if echo "$exported" | grep -q '^pnccl'; then echo "FAIL: exports NCCL's pnccl aliases"; fail=1; fi
  echo "NCCL API in $(basename "$header"): $(echo "$api" | wc -l) functions, all exported unless listed above"
fi

if [ -n "$audit" ]; then
  audit_needed=$(readelf -d "$audit" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^libc\.so' || true)
  if [ -n "$audit_needed" ]; then echo "FAIL: $audit needs more than libc: $(echo $audit_needed)"; fail=1; fi
  audit_exported=$(nm -D --defined-only "$audit" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort | tr '\n' ' ')
  if [ "$audit_exported" != "la_objclose la_objopen la_objsearch la_version " ]; then
    echo "FAIL: $audit exports: $audit_exported"
    fail=1
  fi
fi

if [ -n "$real" ]; then
  # Defined functions (FUNC or IFUNC, not UND) of a dynamic symbol table, without version suffix.
  functions() { readelf -W --dyn-syms "$1" | awk '($4 == "FUNC" || $4 == "IFUNC") && $7 != "UND" {print $8}' | sed 's/@.*//' | sort -u; }
  real_api=$(functions "$real" | grep -v '^pnccl')
  if [ -z "$real_api" ]; then echo "FAIL: no NCCL functions found in $real"; fail=1; fi
  unexported=$(comm -23 <(echo "$real_api") <(functions "$so"))
  if [ -n "$unexported" ]; then
    echo "FAIL: functions of $real not exported as functions: $(echo $unexported)"
    echo "      (forward them: plugin/abi/nccl_api_list.h, or plugin/abi/opaque_api_list.h for any signature)"
    fail=1
  fi
  echo "functions of $(basename "$real"): $(echo "$real_api" | wc -l) (without pnccl*), all exported unless listed above"
fi

tuner="$(dirname "$so")/libnccl-tuner-lamport.so"
if [ ! -e "$tuner" ] || [ "$(readlink -f "$tuner")" != "$(readlink -f "$so")" ]; then
  echo "FAIL: $tuner missing or not the same object"
  fail=1
fi

if [ "$fail" -ne 0 ]; then echo "1 failed"; exit 1; fi
echo "shared object checks passed"
