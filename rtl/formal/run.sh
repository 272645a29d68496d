#!/usr/bin/env bash
# The formal suite's runner (docs/formal.md): yosys -> AIGER -> ABC, no SymbiYosys.
#
#   rtl/formal/run.sh MODULE [--prop N] [--no-mutants] [--no-covers] [--keep DIR] [--vcd DIR]
#
# MODULE names rtl/formal/MODULE.conf (the harness top, its files, its properties with how
# each is checked, and the cover depth) and rtl/formal/MODULE.mutants. For each property:
#   prove     ABC pdr: an unbounded proof (or a counterexample)
#   bmc:D     ABC bmc3 to depth D: no counterexample within D cycles (a bounded check; its
#             cover must be reached within D, or the depth says nothing)
# then its cover (the harness built with -DCOVER asserts the property's trigger never
# happens; bmc3 finding a "counterexample" within COVER_DEPTH is the witness that the
# property is exercised), then each mutant of its family (a copy of the RTL with one
# seeded change): bmc3 to MUTANT_DEPTH must find a counterexample on it, or the property
# is vacuous.
# A counterexample is kept as DIR/<prop>.cex (ABC's witness: inputs per frame). With
# --vcd DIR every counterexample found (a failing property, and each mutant caught) is
# replayed by `yosys sim` on the same netlist into DIR/<prop>[.mutK].vcd; the replay must
# fail the same assertion, or the run fails (the witness would not be the design's).
# Exit 0 when every property holds, every cover is reached and every mutant is caught.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MODULE="${1:?usage: run.sh MODULE [--prop N] [--no-mutants] [--no-covers] [--keep DIR] [--vcd DIR]}"
shift
ONLY="" MUTANTS=1 COVERS=1 KEEP="" VCD=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prop) ONLY="$2"; shift 2 ;;
    --no-mutants) MUTANTS=0; shift ;;
    --no-covers) COVERS=0; shift ;;
    --keep) KEEP="$2"; shift 2 ;;
    --vcd) VCD="$2"; shift 2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
for t in yosys yosys-abc python3; do
  command -v "$t" >/dev/null || { echo "SKIP: $t is not installed (scripts/setup installs it)"; exit 77; }
done
CONF="$HERE/$MODULE.conf"
[ -f "$CONF" ] || { echo "run.sh: no $CONF" >&2; exit 2; }
# PDR_PREP: ABC commands run before pdr (e.g. "scorr; dc2;": merge equivalent registers
# and simplify, which a large harness needs to converge); bmc3 runs on the model as built.
TOP="" FILES=() PROPS=() COVER_DEPTH=40 PDR_TIMEOUT=120 MUTANT_DEPTH="" PDR_PREP=""
# shellcheck source=/dev/null
source "$CONF"
# Mutants are checked by bmc3 to this depth (default: the cover depth plus 8): each must
# fail within it.
MUTANT_DEPTH="${MUTANT_DEPTH:-$((COVER_DEPTH + 8))}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
[ -n "$KEEP" ] && mkdir -p "$KEEP"
[ -n "$VCD" ] && mkdir -p "$VCD"

# netlist DIR DEFINES... : the yosys script that reads the harness (RTL from DIR, relative
# names as in FILES) and maps it to an AIG-ready netlist
netlist() {
  local dir="$1"
  shift
  local files=""
  for f in "${FILES[@]}"; do files+=" $dir/$f"; done
  echo "read_verilog -sv -formal $* $files; prep -flatten -top $TOP; memory_map; async2sync;
        setundef -undriven -anyseq; setundef -anyseq; techmap; opt -fast; setundef -anyseq; dffunmap; aigmap; opt_clean"
}
# aig DIR DEFINES... : the harness as $W/out.aig, its symbol map as $W/out.aim
aig() {
  yosys -q -p "$(netlist "$@"); write_aiger -zinit -map $W/out.aim $W/out.aig" >"$W/yosys.log" 2>&1 ||
    { cat "$W/yosys.log" >&2; return 2; }
}
# replay OUT DIR DEFINES... : $W/out.cex (from the last check) through `yosys sim` on the
# netlist aig built from the same DIR and DEFINES, into OUT; fails unless an assertion
# fails in the replay
replay() {
  local out="$1"
  shift
  (printf '1\nb0\n'; cat "$W/out.cex"; echo .) >"$W/out.aiw"
  yosys -p "$(netlist "$@"); sim -q -clock clk -r $W/out.aiw -map $W/out.aim -vcd $out" >"$W/sim.log" 2>&1 ||
    { cat "$W/sim.log" >&2; return 2; }
  grep -q "Assert .* failed" "$W/sim.log"
}
# check MODE : ABC on $W/out.aig; prints "proved", "holds to D" or "fails at frame F"
check() {
  local mode="$1" cmd
  case "$mode" in
    prove) cmd="$PDR_PREP pdr -T $PDR_TIMEOUT" ;;
    bmc:*) cmd="bmc3 -F ${mode#bmc:}" ;;
    *) echo "bad mode $mode" >&2; return 2 ;;
  esac
  local out
  out=$(yosys-abc -c "read_aiger $W/out.aig; fold; strash; $cmd; write_cex -a $W/out.cex" 2>&1) || true
  if grep -q "Property proved" <<<"$out"; then
    echo "proved"
  elif f=$(grep -oE "(asserted|failed) in frame [0-9]+" <<<"$out" | grep -oE "[0-9]+$" | head -1) && [ -n "$f" ]; then
    echo "fails at frame $f"
  elif grep -qE "No output asserted in [0-9]+ frames|Reached limit on the number of timeframes" <<<"$out"; then
    echo "holds to ${mode#bmc:}"
  else
    echo "undecided: $(tail -2 <<<"$out" | tr '\n' ' ')"
  fi
}

fail=0
printf '%-3s %-22s %-8s %-26s %-22s %s\n' "#" "property" "mode" "result" "cover" "mutants"
for entry in "${PROPS[@]}"; do
  read -r n name mode <<<"$entry"
  [ -n "$ONLY" ] && [ "$ONLY" != "$n" ] && continue
  t0=$(date +%s.%N)
  aig "$ROOT" "-DPROP=$n"
  res=$(check "$mode")
  secs=$(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')")
  ok=1
  case "$res" in proved | holds*) ;; *) ok=0 ;; esac
  [ "$ok" = 0 ] && [ -n "$KEEP" ] && cp "$W/out.cex" "$KEEP/$name.cex" 2>/dev/null || true
  if [ "$ok" = 0 ] && [ -n "$VCD" ] && [[ "$res" == "fails at frame"* ]]; then
    replay "$VCD/$name.vcd" "$ROOT" "-DPROP=$n" || { res+=" (replay did not fail)"; }
  fi
  cover="-"
  if [ "$COVERS" = 1 ]; then
    aig "$ROOT" "-DPROP=$n" -DCOVER
    c=$(check "bmc:$COVER_DEPTH")
    case "$c" in
      "fails at frame"*) cover="reached at ${c##* }" ;;
      *) cover="NOT REACHED ($c)"; ok=0 ;;
    esac
    # A bounded check says nothing past its depth: its cover must be reached within it.
    if [[ "$mode" == bmc:* ]] && [[ "$cover" == reached* ]] && [ "${cover##* }" -ge "${mode#bmc:}" ]; then
      cover+=" (past the check's depth)"; ok=0
    fi
  fi
  muts=""
  if [ "$MUTANTS" = 1 ] && [ -f "$HERE/$MODULE.mutants" ]; then
    k=0
    while IFS= read -r line; do
      [[ -z "$line" || "$line" == \#* ]] && continue
      mp="${line%%|||*}"
      mp="${mp// /}"
      [[ ",$mp," == *",$n,"* ]] || continue
      k=$((k + 1))
      rm -rf "$W/mut" && mkdir -p "$W/mut"
      (cd "$ROOT" && cp --parents "${FILES[@]}" "$W/mut/")
      python3 - "$W/mut" "$line" <<'PY' || { echo "mutant '$line' does not apply" >&2; exit 2; }
import sys
root, line = sys.argv[1], sys.argv[2]
_, path, occ, old, new = [x.strip() for x in line.split("|||")]
old, new = old.replace("\\n", "\n"), new.replace("\\n", "\n")
p = f"{root}/{path}"
s = open(p).read()
at = -1
for _ in range(int(occ)):
    at = s.find(old, at + 1)
    if at < 0:
        sys.exit(1)
open(p, "w").write(s[:at] + new + s[at + len(old):])
PY
      aig "$W/mut" "-DPROP=$n"
      # A mutant needs only a counterexample: bmc3 finds a shallow one sooner than pdr.
      m=$(check "bmc:$MUTANT_DEPTH")
      case "$m" in
        "fails at frame"*)
          muts+="${muts:+, }#$k caught at ${m##* }"
          if [ -n "$VCD" ]; then
            if replay "$VCD/$name.mut$k.vcd" "$W/mut" "-DPROP=$n"; then
              muts+=" (vcd)"
            else
              muts+=" (REPLAY DID NOT FAIL)"; ok=0
            fi
          fi
          ;;
        *) muts+="${muts:+, }#$k MISSED ($m)"; ok=0 ;;
      esac
    done <"$HERE/$MODULE.mutants"
  fi
  [ -z "$muts" ] && muts="-"
  printf '%-3s %-22s %-8s %-26s %-22s %s\n' "$n" "$name" "$mode" "$res (${secs}s)" "$cover" "$muts"
  [ "$ok" = 1 ] || fail=1
done
exit "$fail"
