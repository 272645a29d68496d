// vsl_ecc: the controller's ECC engine boundary (BCH over GF(2^13), t = 8, 512-byte
// codewords; the codec is hls/bch.h). One page at a time.
//
//   encode (decode = 0): the page's message bytes (data, then the host metadata) arrive
//     on `in_*` in page order; after `in_last` the engine writes the spare area behind
//     the metadata as `fix_*` byte writes (buffer byte addresses): each codeword's parity,
//     codeword 0 first, then zeroes to the end of the spare; then `done`.
//   decode (decode = 1): the whole page as sensed (data, spare) arrives on `in_*`; after
//     `in_last` the engine writes each corrected byte back (`fix_*`: the right value),
//     then `done` with the bits corrected and `uncorrectable` (a codeword with more than t
//     errors: its bytes are left as sensed). An erased page (every codeword within t bits
//     of all ones) comes back as all 0xFF.
// Layout (the same as the simulated card's bit-exact mode, docs/formats/card-image.md):
// codeword i protects data bytes [512 i, 512 i + 512); the last also the metadata; parity
// fields of ecc parity bytes each follow the metadata. The geometry (data, metadata and
// spare bytes) comes with `start`; `in_nbytes` bytes of `in_word` count, low byte first.
//
// In simulation the engine is the C++ codec behind DPI-C (testbench/cosim/ecc_dpi.cc),
// which sees the same byte stream and answers with the same writes the hardware kernel
// would. In hardware the HLS kernel (hls/kernels.h, vsl_bch8_*) fills this boundary;
// yosys counts the controller with this module as a black box (rtl/ecc/vsl_ecc_blackbox.sv).
module vsl_ecc #(
    parameter int ID = 0  // checked by the DPI side (0-7); it keeps instances apart by scope
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
  import "DPI-C" context function void vsl_ecc_dpi_begin(input int id, input int decode, input int data_bytes,
                                                 input int meta_bytes, input int spare_bytes);
  import "DPI-C" context function void vsl_ecc_dpi_push(input int id, input longint word, input int nbytes);
  import "DPI-C" context function int vsl_ecc_dpi_finish(input int id);
  // The answers of the last finish(): the index-th write ({addr, value}) and the result
  // ({uncorrectable, corrected}); no side effects. Every import is a context function: the
  // C++ side keeps each instance's engine by its scope, so any number of controllers (each
  // with engines 0 and 1) share one simulation.
  import "DPI-C" context function int vsl_ecc_dpi_fix(input int id, input int index);
  import "DPI-C" context function int vsl_ecc_dpi_result(input int id);

  logic        running;
  int          fixes, next_fix;
  logic [31:0] fx, res;
  always_comb begin
    fx  = 32'd0;
    res = 32'd0;
    if (running && next_fix < fixes) fx = vsl_ecc_dpi_fix(ID, next_fix);
    if (running) res = vsl_ecc_dpi_result(ID);
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      running       <= 1'b0;
      fixes         <= 0;
      next_fix      <= 0;
      fix_valid     <= 1'b0;
      fix_addr      <= 16'd0;
      fix_data      <= 8'd0;
      done          <= 1'b0;
      corrected     <= 16'd0;
      uncorrectable <= 1'b0;
    end else begin
      done      <= 1'b0;
      fix_valid <= 1'b0;
      if (start) begin
        vsl_ecc_dpi_begin(ID, {31'd0, decode}, {16'd0, data_bytes}, {16'd0, meta_bytes}, {16'd0, spare_bytes});
        running <= 1'b0;
      end else begin
        if (in_valid) vsl_ecc_dpi_push(ID, in_word, {28'd0, in_nbytes});
        if (in_valid && in_last) begin
          fixes    <= vsl_ecc_dpi_finish(ID);
          next_fix <= 0;
          running  <= 1'b1;
        end else if (running) begin
          if (next_fix < fixes) begin
            fix_valid <= 1'b1;
            fix_addr  <= fx[23:8];
            fix_data  <= fx[7:0];
            next_fix  <= next_fix + 1;
          end else begin
            corrected     <= res[15:0];
            uncorrectable <= res[16];
            done          <= 1'b1;
            running       <= 1'b0;
          end
        end
      end
    end
  end
  logic unused;
  assign unused = ^{fx[31:24], res[31:17]};
endmodule
