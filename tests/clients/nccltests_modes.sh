#!/usr/bin/env bash
# nccl-tests in every execution mode it has, under nccl-lamport (LD_PRELOAD) and, for a few, stock:
# all_reduce_perf -g 2 (float, half, bfloat16), -t 2, -m 4 with every -a reporting mode, -z 1/2/3,
# CUDA graphs (-G), -o avg, unaligned buffers (-u 1), registered buffers (-R 2); all_gather_perf,
# reduce_scatter_perf and sendrecv_perf (which nccl-lamport must leave alone); and one tuner-only
# run (NCCL_TUNER_PLUGIN=libnccl-tuner-lamport.so, no preload). All with -c 1 (data check).
#
#   bash tests/clients/nccltests_modes.sh SO NT_DIR OUT_DIR
# SO: libnccl-lamport.so (libnccl-tuner-lamport.so is taken from beside it); NT_DIR: the folder with
# the nccl-tests binaries; OUT_DIR gets nccltests.log (every run's full output),
# nccltests-perf.txt (the result tables only, "=== label: command" before each, for docs) and
# nccltests-summary.txt (one line per run). The loader must find libcudart and NCCL (gpu_suite.sh
# sets LD_LIBRARY_PATH; by hand: source .device/device-env.sh and add the CUDA runtime's folder).
# Env: NT_QUICK=1 runs fewer variants; NT_TIMEOUT per run in seconds (default 120).
#
# A run FAILs if its exit status is not 0, it printed no result row, any #wrong column is not 0
# (or N/A), "Out of bounds values : 0 OK" is missing, or its nccl-lamport expectation fails:
#   lamport  all_reduce with the object preloaded: a communicator logged "Lamport one-shot ON" and
#            the destroy lines count > 0 allreduce calls run on Lamport kernels
#   other    all_gather/reduce_scatter/sendrecv preloaded: 0 calls on Lamport kernels ("unaffected")
#   stock    no "Lamport: " log line at all
#   tuner    the tuner-only notice exactly once (one process), no "Lamport one-shot ON"
# Prints one line per run and "nccl-tests: N passed, M failed"; exits 1 if any run failed.
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 SO NT_DIR OUT_DIR" >&2
  exit 2
fi
SO=$(realpath "$1")
NT=$(realpath "$2")
OUTDIR=$3
mkdir -p "$OUTDIR"
TUNER="$(dirname "$SO")/libnccl-tuner-lamport.so"
LOG="$OUTDIR/nccltests.log"
PERF="$OUTDIR/nccltests-perf.txt"
SUMMARY="$OUTDIR/nccltests-summary.txt"
NT_TIMEOUT=${NT_TIMEOUT:-120}
TUNER_NOTICE="Lamport path is off: this process loaded libnccl-lamport.so only as NCCL's tuner"
: >"$LOG"
: >"$PERF"
: >"$SUMMARY"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# run_nt KIND LABEL BINARY ARGS...   (KIND: lamport | other | stock | tuner)
run_nt() {
  local kind=$1 label=$2 bin=$3
  shift 3
  local out="$tmp/$label.out"
  local -a envs=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT)
  case $kind in
    lamport | other) envs+=("LD_PRELOAD=$SO") ;;
    stock) ;;
    tuner) envs=(NCCL_DEBUG=INFO "NCCL_TUNER_PLUGIN=$TUNER") ;;
  esac
  if [ ! -x "$NT/$bin" ]; then
    echo "nccl-tests $label: FAIL no $NT/$bin" | tee -a "$SUMMARY"
    failed=$((failed + 1))
    return
  fi
  local t0 t1 rc
  t0=$(date +%s%N)
  timeout "$NT_TIMEOUT" env "${envs[@]}" "$NT/$bin" "$@" >"$out" 2>&1
  rc=$?
  t1=$(date +%s%N)
  local secs=$(((t1 - t0) / 1000000))
  secs="$((secs / 1000)).$(printf '%03d' $((secs % 1000)))"
  {
    echo "=== $label: ${envs[*]} $NT/$bin $*"
    cat "$out"
  } >>"$LOG"
  {
    echo "=== $label: ${envs[*]} $NT/$bin $*"
    grep -E '^#|^ *[0-9]+ +[0-9]+ ' "$out" | grep -v 'NCCL INFO'
  } >>"$PERF"

  local rows wrong na
  read -r rows wrong na < <(awk '
    $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 13 {
      rows++
      for (i = 9; i <= NF; i += 4) { if ($i == "N/A") na++; else if ($i + 0 != 0) wrong += $i }
    }
    END { printf "%d %d %d\n", rows, wrong, na }' "$out")
  local oob=missing
  grep -q "Out of bounds values : 0 OK" "$out" && oob=OK
  local on lam_calls nccl_calls notices lamport_lines
  on=$(grep -c "Lamport one-shot ON" "$out")
  read -r lam_calls nccl_calls < <(sed -nE 's/.* ([0-9]+) allreduce calls ran on Lamport kernels, ([0-9]+) went to NCCL.*/\1 \2/p' "$out" |
    awk '{ l += $1; n += $2 } END { printf "%d %d\n", l, n }')
  notices=$(grep -c "$TUNER_NOTICE" "$out")
  lamport_lines=$(grep -c "Lamport: " "$out")

  local why=""
  [ "$rc" -eq 0 ] || why+=" rc=$rc"
  [ "$rows" -gt 0 ] || why+=" no-result-rows"
  [ "$wrong" -eq 0 ] || why+=" wrong=$wrong"
  # sendrecv_perf never checks its in-place column (N/A in every row, stock too); elsewhere an
  # N/A means a result went unchecked.
  local allowed_na=0
  case $label in *sendrecv*) allowed_na=$rows ;; esac
  [ "$na" -le "$allowed_na" ] || why+=" unchecked=$na"
  [ "$oob" = OK ] || why+=" out-of-bounds-line-$oob"
  case $kind in
    lamport)
      [ "$on" -gt 0 ] || why+=" no-'Lamport one-shot ON'"
      [ "$lam_calls" -gt 0 ] || why+=" no-Lamport-calls"
      ;;
    other) [ "$lam_calls" -eq 0 ] || why+=" lamport-calls=$lam_calls" ;;
    stock) [ "$lamport_lines" -eq 0 ] || why+=" stock-run-has-$lamport_lines-Lamport-lines" ;;
    tuner)
      [ "$notices" -eq 1 ] || why+=" tuner-notice-x$notices"
      [ "$on" -eq 0 ] || why+=" Lamport-ON-in-tuner-only"
      ;;
  esac
  local status=PASS
  if [ -n "$why" ]; then
    status=FAIL
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
  local detail="rows=$rows wrong=$wrong oob=$oob"
  case $kind in
    lamport | other) detail+=" lamport_on=$on lamport_calls=$lam_calls nccl_calls=$nccl_calls" ;;
    tuner) detail+=" tuner_notices=$notices" ;;
  esac
  local busbw
  busbw=$(sed -nE 's/^# Avg bus bandwidth *: *([0-9.e+-]+).*/\1/p' "$out" | tail -1)
  echo "nccl-tests $label: $status rc=$rc $detail busbw=${busbw:-?} ${secs}s${why:+ (FAIL:$why)}" | tee -a "$SUMMARY"
}

AR=all_reduce_perf
C=(-b 8 -e 8M -f 4 -c 1 -n 20 -w 5)

# Eager, one process, one thread driving both GPUs, every dtype the Lamport path takes.
for dt in float half bfloat16; do
  run_nt lamport "lamport-g2-$dt" $AR "${C[@]}" -g 2 -d "$dt"
done
run_nt stock stock-g2-bfloat16 $AR "${C[@]}" -g 2 -d bfloat16
# One thread per GPU.
run_nt lamport lamport-t2-bfloat16 $AR "${C[@]}" -t 2 -d bfloat16
# Aggregated iterations (4 collectives per ncclGroupStart/End) and the -a reporting modes.
run_nt lamport lamport-g2-m4-a1 $AR "${C[@]}" -g 2 -m 4 -d bfloat16
run_nt stock stock-g2-m4-a1 $AR "${C[@]}" -g 2 -m 4 -d bfloat16
if [ "${NT_QUICK:-0}" != 1 ]; then
  for a in 0 2 3; do
    run_nt lamport "lamport-g2-m4-a$a" $AR "${C[@]}" -g 2 -m 4 -a "$a" -d bfloat16
  done
fi
# Blocking modes: 1 = barrier after each inner iteration, 2 = no barrier, 3 = wait + barrier per -n.
for z in 1 2 3; do
  run_nt lamport "lamport-t2-z$z" $AR "${C[@]}" -t 2 -z "$z" -d bfloat16
done
run_nt stock stock-t2-z3 $AR "${C[@]}" -t 2 -z 3 -d bfloat16
# CUDA graphs. The -G 50 bfloat16 rows (stock, NCCL symmetric kernels -R 2, nccl-lamport) are the
# ones README and docs/results-2xh200.md quote.
run_nt stock stock-g2-G50-bfloat16 $AR "${C[@]}" -g 2 -d bfloat16 -G 50
run_nt stock stock-g2-G50-R2-bfloat16 $AR "${C[@]}" -g 2 -d bfloat16 -G 50 -R 2
run_nt lamport lamport-g2-G50-bfloat16 $AR "${C[@]}" -g 2 -d bfloat16 -G 50
if [ "${NT_QUICK:-0}" != 1 ]; then
  run_nt lamport lamport-g2-G20-float $AR "${C[@]}" -g 2 -d float -G 20
  run_nt lamport lamport-g2-G20-half $AR "${C[@]}" -g 2 -d half -G 20
fi
run_nt lamport lamport-t2-G10-half $AR "${C[@]}" -t 2 -d half -G 10
# avg, buffers misaligned by one element, NCCL-registered symmetric buffers.
run_nt lamport lamport-g2-avg-float $AR "${C[@]}" -g 2 -o avg -d float
run_nt lamport lamport-g2-u1-half $AR "${C[@]}" -g 2 -u 1 -d half
run_nt lamport lamport-g2-R2-bfloat16 $AR "${C[@]}" -g 2 -R 2 -d bfloat16
# Other collectives: stock and preloaded, nccl-lamport must leave them alone.
for bin in all_gather_perf reduce_scatter_perf sendrecv_perf; do
  name=${bin%_perf}
  run_nt stock "stock-$name-g2" $bin "${C[@]}" -g 2
  run_nt other "lamport-$name-g2" $bin "${C[@]}" -g 2
done
# Tuner only: NCCL loads the object as its tuner, no interposer; it says so once.
run_nt tuner tuner-only-g2-bfloat16 $AR "${C[@]}" -g 2 -d bfloat16

version=$(grep -m1 -oE 'nccl-library=[0-9]+' "$LOG")
echo "nccl-tests: ${version:-nccl-library=?}; full output $LOG, tables $PERF" | tee -a "$SUMMARY"
echo "nccl-tests: $passed passed, $failed failed" | tee -a "$SUMMARY"
[ "$failed" -eq 0 ]
