#!/usr/bin/env bash
# RTL checks that need only the tools: lint and generic synthesis.
#   rtl_checks.sh lint             verilator --lint-only -Wall over every RTL source
#   rtl_checks.sh synth TOP OUT    yosys generic synthesis of TOP; cell counts to OUT
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
# The ECC engine: its DPI-C simulation model for lint, a black box for synthesis (the
# BCH kernel from hls/ takes its place in hardware).
ECC_SIM="$ROOT/rtl/ecc/vsl_ecc.sv"
ECC_BB="$ROOT/rtl/ecc/vsl_ecc_blackbox.sv"
case "${1:-}" in
  lint)
    command -v verilator >/dev/null || { echo "verilator not installed (scripts/setup installs it)"; exit 77; }
    for top in vsl_onfi_phy vsl_onfi_seq vsl_onfi_channel vsl_axil_regs vsl_ctrl_top vsl_axi_dma vsl_ecc vsl_pipe vsl_ctrl \
               vsl_nand_emu vsl_axil_split vsl_kernel; do
      verilator --lint-only -Wall "${SOURCES[@]}" "$ECC_SIM" --top-module "$top"
      echo "lint clean: $top"
    done
    ;;
  synth)
    command -v yosys >/dev/null || { echo "yosys not installed (scripts/setup installs it)"; exit 77; }
    top="$2"
    out="$3"
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    yosys -l "$log" -q -p "read_verilog -sv ${SOURCES[*]} $ECC_BB; synth -top $top -run :fine; opt -fast -full; techmap; opt -fast; abc -fast; opt_clean; check -assert; tee -o $out stat" >/dev/null
    grep -q "Number of cells" "$out" || { echo "no statistics from yosys"; cat "$log"; exit 1; }
    cat "$out"
    ;;
  *)
    echo "usage: rtl_checks.sh lint | synth TOP OUT" >&2
    exit 2
    ;;
esac
