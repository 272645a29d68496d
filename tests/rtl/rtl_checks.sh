#!/usr/bin/env bash
# RTL checks that need only the tools: lint and generic synthesis.
#   rtl_checks.sh lint             verilator --lint-only -Wall over every RTL source
#   rtl_checks.sh synth TOP OUT [rtl-ecc] [bb=MODULE]
#                                  yosys generic synthesis of TOP; cell counts to OUT; the
#                                  ECC engine a black box, or with rtl-ecc the synthesizable
#                                  BCH engine (rtl/ecc/vsl_ecc_bch.sv); bb=MODULE keeps
#                                  MODULE a black box too (counted on its own elsewhere)
# Exits 77 (skip) with the reason when the tool is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# Packages first, then modules.
SOURCES=(
  "$ROOT/rtl/gen/vsl_regmap_pkg.sv"
  "$ROOT/rtl/onfi/vsl_onfi_pkg.sv"
  "$ROOT/rtl/onfi/vsl_onfi_phy.sv"
  "$ROOT/rtl/onfi/vsl_onfi_seq.sv"
  "$ROOT/rtl/onfi/vsl_onfi_channel.sv"
  "$ROOT/rtl/ctrl/vsl_axil_regs.sv"
  "$ROOT/rtl/ctrl/vsl_ctrl_top.sv"
  "$ROOT/rtl/dma/vsl_axi_dma.sv"
  "$ROOT/rtl/pipe/vsl_pipe.sv"
  "$ROOT/rtl/ctrl/vsl_ctrl.sv"
  "$ROOT/rtl/emu/vsl_nand_emu.sv"
  "$ROOT/rtl/alveo/vsl_axil_split.sv"
  "$ROOT/rtl/alveo/vsl_kernel.sv"
)
# The ECC engine comes in three forms with the same ports: its DPI-C simulation model
# (the controller's co-simulation), the synthesizable BCH engine (the Alveo kernel's
# co-simulation, hardware) and a black box (synthesis counts without it).
ECC_SIM="$ROOT/rtl/ecc/vsl_ecc.sv"
ECC_RTL="$ROOT/rtl/ecc/vsl_bch_pkg.sv $ROOT/rtl/ecc/vsl_ecc_bch.sv"
ECC_BB="$ROOT/rtl/ecc/vsl_ecc_blackbox.sv"
case "${1:-}" in
  lint)
    command -v verilator >/dev/null || { echo "verilator not installed (scripts/setup installs it)"; exit 77; }
    for top in vsl_onfi_phy vsl_onfi_seq vsl_onfi_channel vsl_axil_regs vsl_ctrl_top vsl_axi_dma vsl_ecc vsl_pipe vsl_ctrl \
               vsl_nand_emu vsl_axil_split vsl_kernel; do
      verilator --lint-only -Wall "${SOURCES[@]}" "$ECC_SIM" --top-module "$top"
      echo "lint clean: $top"
    done
    # shellcheck disable=SC2086
    for top in vsl_ecc vsl_kernel; do
      verilator --lint-only -Wall "${SOURCES[@]}" $ECC_RTL --top-module "$top"
      echo "lint clean: $top (synthesizable ECC)"
    done
    ;;
  synth)
    command -v yosys >/dev/null || { echo "yosys not installed (scripts/setup installs it)"; exit 77; }
    top="$2"
    out="$3"
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    ecc="$ECC_BB"
    bb=""
    for opt in "${@:4}"; do
      case "$opt" in
        rtl-ecc) ecc="$ECC_RTL" ;;
        bb=*) bb="blackbox ${opt#bb=};" ;;
        *) echo "unknown synth option $opt" >&2; exit 2 ;;
      esac
    done
    yosys -l "$log" -q -p "read_verilog -sv ${SOURCES[*]} $ecc; $bb synth -top $top -run :fine; opt -fast -full; techmap; opt -fast; abc -fast; opt_clean; check -assert; tee -o $out stat" >/dev/null
    grep -q "Number of cells" "$out" || { echo "no statistics from yosys"; cat "$log"; exit 1; }
    cat "$out"
    ;;
  *)
    echo "usage: rtl_checks.sh lint | synth TOP OUT [rtl-ecc]" >&2
    exit 2
    ;;
esac
