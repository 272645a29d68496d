// Formal properties of vsl_onfi_phy, the ONFI SDR pin engine (docs/formal.md).
//
// The harness instantiates the phy with every input free, except:
//   - reset: low in the first cycle only (rst_n = started), then never again;
//   - the timing registers: any value over their full 8-bit range, latched in the first
//     cycle and constant after (software changes them only while the channel is idle).
// Environment assumptions are combinational (an assumption in a clocked block takes
// effect a cycle late, leaving the last step of a bounded check unconstrained).
//
// One property is asserted per run, selected by `PROP (rtl/formal/run.sh sets it), so a
// proof or a counterexample names exactly one property:
//   1 WE_RE_EXCLUSIVE   WE# and RE# are never low together
//   2 NO_DRIVE_ON_READ  DQ is not driven while RE# is low
//   3 CLE_ALE_EXCLUSIVE CLE and ALE are never high together
//   4 ONE_OP_AT_A_TIME  at most one op is outstanding, and op_done never comes without one
//   5 HELD_WHILE_WE_LOW CLE, ALE, DQ and its drive hold while WE# is low (they are sampled
//                       at its rising edge)
//   6 WE_LOW_WIDTH      each WE# low pulse lasts at least tWP, and tCLS/tALS while CLE/ALE
//                       is high (the setup of what it latches), in cycles (0 counts as 1)
//   7 WE_HIGH_WIDTH     WE# stays high at least tWH between two pulses
//   8 RE_LOW_WIDTH      each RE# low pulse lasts at least tRP
//   9 RE_HIGH_WIDTH     RE# stays high at least tREH between two pulses
//  10 DOUT_EXACT        a DOUT op gives exactly op_count bytes, the last one before its
//                       op_done or in the same cycle, and no byte comes outside a DOUT op
//                       (the contract the sequencer's proofs assume of their abstract engine,
//                       onfi_seq_props)
//  11 DIN_EXACT         a DIN op takes exactly op_count bytes before its op_done, and none
//                       is taken outside a DIN op (the same contract, data in)
//  12 WAIT_EXACT        an OP_WAIT lasts exactly the timing its selector names (tWHR, tADL,
//                       tWB, tRR; 0 counts as 1): its op_done comes that many cycles after
//                       the cycle it started in, plus one, and WE# and RE# stay high and DQ
//                       undriven throughout. With the sequencer's order of ops (onfi_seq)
//                       this is what keeps tWHR, tADL, tWB and tRR on the pins.
`ifndef PROP
`define PROP 1
`endif
module onfi_phy_props (
    input logic        clk,
    input logic [7:0]  t_wp_in, t_wh_in, t_rp_in, t_reh_in, t_cls_in, t_als_in, t_whr_in, t_adl_in, t_wb_in,
    input logic [7:0]  t_rr_in, t_sample_in,
    input logic [31:0] rb_timeout_in,
    input logic        op_valid,
    input logic [2:0]  op_kind,
    input logic [7:0]  op_byte,
    input logic [15:0] op_count,
    input logic [7:0]  din_data,
    input logic        din_valid,
    input logic [7:0]  dq_i,
    input logic        rb_n
);
  logic started = 1'b0;
  always_ff @(posedge clk) started <= 1'b1;
  wire rst_n = started;

  logic [7:0] t_wp, t_wh, t_rp, t_reh, t_cls, t_als, t_whr, t_adl, t_wb, t_rr, t_sample;
  logic [31:0] rb_timeout;
  always_ff @(posedge clk) begin
    if (!started) begin
      t_wp <= t_wp_in; t_wh <= t_wh_in; t_rp <= t_rp_in; t_reh <= t_reh_in; t_cls <= t_cls_in;
      t_als <= t_als_in; t_whr <= t_whr_in; t_adl <= t_adl_in; t_wb <= t_wb_in; t_rr <= t_rr_in;
      t_sample <= t_sample_in; rb_timeout <= rb_timeout_in;
    end
  end

  logic op_ready, op_done, done_timeout, din_ready, dout_valid, busy, rb_sampled;
  logic [7:0] dout_data, dq_o;
  logic [0:0] ce_n;
  logic cle, ale, we_n, re_n, wp_n, dq_oe;
  vsl_onfi_phy #(.NUM_CE(1)) dut (
      .clk, .rst_n, .t_wp, .t_wh, .t_rp, .t_reh, .t_cls, .t_als, .t_whr, .t_adl, .t_wb, .t_rr, .t_sample,
      .rb_timeout, .op_valid, .op_ready, .op_kind, .op_byte, .op_count, .op_done, .done_timeout, .din_data,
      .din_valid, .din_ready, .dout_data, .dout_valid, .busy, .rb_sampled, .ce_n, .cle, .ale, .we_n, .re_n, .wp_n,
      .dq_o, .dq_oe, .dq_i, .rb_n, .f_state, .f_phase);
  logic [2:0] f_state;  // the phy's state and phase counter (`FORMAL ports), for helpers
  logic [7:0] f_phase;
  localparam logic [2:0] S_IDLE = 3'd0, S_WE_LOW = 3'd1, S_WE_HIGH = 3'd2, S_RE_LOW = 3'd3, S_RE_HIGH = 3'd4;

  function automatic logic [7:0] at_least_1(input logic [7:0] v);
    at_least_1 = (v == 8'd0) ? 8'd1 : v;
  endfunction

  // --- monitors ---
  // Ops accepted and not yet done.
  logic [1:0] pending = 2'd0;
  wire accepted = op_valid && op_ready && started;
  always_ff @(posedge clk) pending <= pending + (accepted ? 2'd1 : 2'd0) - (op_done ? 2'd1 : 2'd0);
  // Cycles each strobe has been low / high (saturating at 511 > any 8-bit timing).
  logic [8:0] we_low = 9'd0, we_high = 9'd0, re_low = 9'd0, re_high = 9'd0;
  logic we_pulsed = 1'b0, re_pulsed = 1'b0;  // a pulse ended before (a high run is between two)
  logic cle_q = 1'b0, ale_q = 1'b0, we_q = 1'b1, re_q = 1'b1, dq_oe_q = 1'b0;
  logic [7:0] dq_q = 8'd0;
  always_ff @(posedge clk) begin
    we_low  <= !we_n ? (we_low == 9'h1FF ? we_low : we_low + 9'd1) : 9'd0;
    we_high <= we_n ? (we_high == 9'h1FF ? we_high : we_high + 9'd1) : 9'd0;
    re_low  <= !re_n ? (re_low == 9'h1FF ? re_low : re_low + 9'd1) : 9'd0;
    re_high <= re_n ? (re_high == 9'h1FF ? re_high : re_high + 9'd1) : 9'd0;
    if (we_n && !we_q) we_pulsed <= 1'b1;
    if (re_n && !re_q) re_pulsed <= 1'b1;
    cle_q <= cle; ale_q <= ale; we_q <= we_n; re_q <= re_n; dq_oe_q <= dq_oe; dq_q <= dq_o;
  end
  // The op in flight, and the bytes it has moved.
  logic [2:0]  kind_q = 3'd0;
  logic [7:0]  byte_q = 8'd0;
  logic [8:0]  age = 9'd0;  // cycles since the op in flight was accepted (saturating)
  logic [15:0] count_q = 16'd0;
  logic [16:0] moved = 17'd0;
  wire din_take = din_valid && din_ready;
  always_ff @(posedge clk) begin
    age <= accepted ? 9'd1 : (age == 9'h1FF ? age : age + 9'd1);
    if (accepted) begin
      kind_q <= op_kind;
      byte_q <= op_byte;
      count_q <= op_count;
      moved <= din_take ? 17'd1 : 17'd0;
    end else if (dout_valid || din_take) begin
      moved <= moved + 17'd1;
    end
  end
  // What the low phase of WE# that ends now needed: tWP, and the CLE/ALE setup.
  wire [8:0] we_need = {1'b0, (cle_q && t_cls > at_least_1(t_wp)) ? t_cls
                            : (ale_q && t_als > at_least_1(t_wp)) ? t_als
                                                                  : at_least_1(t_wp)};

  // Helper invariants (proved with the property they serve, which they make inductive):
  // a strobe is low exactly in its LOW state, where the cycles it has been low plus the
  // phase left equal the width loaded; in its HIGH state between pulses the cycles high
  // plus the phase left reach the high width, and elsewhere it has been high that long.
  function automatic logic [7:0] max8(input logic [7:0] a, input logic [7:0] b);
    max8 = (a > b) ? a : b;
  endfunction
  wire [8:0] we_load = {1'b0, max8(at_least_1(t_wp), ale ? t_als : t_cls)};
  wire h_we_low = ((f_state == S_WE_LOW) == !we_n) &&
                  (f_state != S_WE_LOW || (f_phase != 8'd0 && we_low + {1'b0, f_phase} == we_load));
  wire h_we_high = !we_pulsed || (f_state == S_WE_LOW) ||
                   (f_state == S_WE_HIGH ? (f_phase != 8'd0 && we_high + {1'b0, f_phase} >= {1'b0, at_least_1(t_wh)})
                                         : we_high >= {1'b0, at_least_1(t_wh)});
  wire h_re_low = ((f_state == S_RE_LOW) == !re_n) &&
                  (f_state != S_RE_LOW || (f_phase != 8'd0 && re_low + {1'b0, f_phase} == {1'b0, at_least_1(t_rp)}));
  wire h_re_high = !re_pulsed || (f_state == S_RE_LOW) ||
                   (f_state == S_RE_HIGH ? (f_phase != 8'd0 && re_high + {1'b0, f_phase} >= {1'b0, at_least_1(t_reh)})
                                         : re_high >= {1'b0, at_least_1(t_reh)});

  // The wait an OP_WAIT selector names (the phy's own table, restated).
  wire [7:0] wait_need = byte_q == 8'd0 ? at_least_1(t_whr) : byte_q == 8'd1 ? at_least_1(t_adl)
                       : byte_q == 8'd2 ? at_least_1(t_wb) : at_least_1(t_rr);
  wire in_wait = pending != 2'd0 && kind_q == 3'd4;

  logic [12:0] ok;
  always_comb begin
    ok = '1;
    // Helper: a wait in flight is in S_WAIT with the cycles left matching its age.
    ok[12] = !(op_done && in_wait && age != {1'b0, wait_need} + 9'd1) &&
             !(in_wait && !op_done && (!we_n || !re_n || dq_oe)) &&
             (!in_wait || op_done || (f_state == 3'd5 && age + {1'b0, f_phase} == {1'b0, wait_need} + 9'd1));
    // (moved counts bytes of earlier cycles: a byte in the done cycle is added here.)
    ok[10] = !(dout_valid && (pending == 2'd0 || kind_q != 3'd3)) &&
             !(op_done && !done_timeout && pending != 2'd0 && kind_q == 3'd3 &&
               moved + {16'd0, dout_valid} != {1'b0, count_q});
    // The first byte is taken as the op is accepted (din_ready then depends on op_valid).
    ok[11] = !(din_take && !(accepted && op_kind == 3'd2) && (pending == 2'd0 || kind_q != 3'd2 || op_done)) &&
             !(op_done && !done_timeout && pending != 2'd0 && kind_q == 3'd2 && moved != {1'b0, count_q});
    ok[1] = !(!we_n && !re_n);
    ok[2] = !(dq_oe && !re_n);
    ok[3] = !(cle && ale);
    ok[4] = (pending <= 2'd1) && !(op_done && pending == 2'd0);
    ok[5] = !(!we_n && !we_q) || (cle == cle_q && ale == ale_q && dq_o == dq_q && dq_oe == dq_oe_q);
    ok[6] = (!(we_n && !we_q) || we_low >= we_need) && h_we_low;                       // WE# rises now
    ok[7] = (!(!we_n && we_q && we_pulsed) || we_high >= {1'b0, at_least_1(t_wh)}) && h_we_high && h_we_low;
    ok[8] = (!(re_n && !re_q) || re_low >= {1'b0, at_least_1(t_rp)}) && h_re_low;
    ok[9] = (!(!re_n && re_q && re_pulsed) || re_high >= {1'b0, at_least_1(t_reh)}) && h_re_high && h_re_low;
  end

`ifndef COVER
  always @* if (started) assert (ok[`PROP]);
`endif

  // Covers: each property's trigger is reachable (run.sh --cover checks them with bmc3).
  logic [12:0] hit;
  always_comb begin
    hit = '0;
    hit[12] = op_done && in_wait && byte_q == 8'd1 && t_adl > 8'd3;
    hit[10] = op_done && kind_q == 3'd3 && moved == 17'd2;
    hit[11] = op_done && kind_q == 3'd2 && moved == 17'd2;
    hit[1] = !we_n;
    hit[2] = !re_n;
    hit[3] = cle || ale;
    hit[4] = op_done && pending == 2'd1;
    hit[5] = !we_n && !we_q && cle;
    hit[6] = we_n && !we_q && ale_q && t_als > 8'd3;
    hit[7] = !we_n && we_q && we_pulsed && t_wh > 8'd2;
    hit[8] = re_n && !re_q && t_rp > 8'd2;
    hit[9] = !re_n && re_q && re_pulsed && t_reh > 8'd2;
  end
`ifdef COVER
  always @* if (started) assert (!hit[`PROP]);  // a "failure" here is the cover's witness
`endif
endmodule
