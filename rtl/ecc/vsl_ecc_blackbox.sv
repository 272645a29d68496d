// vsl_ecc for synthesis: the ECC engine's ports only. In hardware the BCH kernel built
// from hls/ (Vitis HLS) sits here; yosys keeps this as an opaque cell, so the controller's
// resource counts exclude the codec (docs/rtl.md). Simulation uses rtl/ecc/vsl_ecc.sv.
(* blackbox *)
module vsl_ecc #(
    parameter int ID = 0
) (
    input  logic        clk,
    input  logic        rst_n,
    input  logic        start,
    input  logic        decode,
    input  logic [15:0] data_bytes,
    input  logic [15:0] meta_bytes,
    input  logic [15:0] spare_bytes,
    input  logic        in_valid,
    input  logic [63:0] in_word,
    input  logic [3:0]  in_nbytes,
    input  logic        in_last,
    output logic        fix_valid,
    output logic [15:0] fix_addr,
    output logic [7:0]  fix_data,
    output logic        done,
    output logic [15:0] corrected,
    output logic        uncorrectable
);
endmodule
