// vsl_onfi_phy: the pin engine of one ONFI channel in asynchronous (SDR) mode.
//
// It executes one bus operation at a time from its op port and owns the timing of every
// strobe, so the sequencer above it thinks in commands, address cycles and data bursts:
//   OP_CMD     one command cycle (CLE high, WE# pulse) with op_byte
//   OP_ADDR    one address cycle (ALE high, WE# pulse) with op_byte
//   OP_DIN     op_count data-in cycles (WE# pulses), bytes from the din stream; a byte
//              not yet there holds WE# high (a longer tWH is legal)
//   OP_DOUT    op_count data-out cycles (RE# pulses), bytes to the dout stream (no
//              backpressure: the consumer is a page buffer)
//   OP_WAIT    waits the timing selected by op_byte (WAIT_WHR, WAIT_ADL, WAIT_WB, WAIT_RR)
//   OP_WAIT_RB waits for R/B# high; after rb_timeout cycles (0 = never) it gives up and
//              reports done_timeout: a LUN that never becomes ready is reported, not hung on
//   OP_CE      drives CE# to op_byte[NUM_CE-1:0] (active low)
// Timing comes from the channel's TIMING registers in clock cycles (docs/register-map.md):
// a write cycle is max(tCLS|tALS, tWP) cycles of WE# low (CLE/ALE/DQ set as it falls, so
// their setup to the rising edge is the low time) then tWH cycles high (their hold); a
// read cycle is tRP cycles of RE# low then tREH cycles high, DQ sampled t_sample cycles
// after RE# fell (>= tREA; past tRP for EDO timing, where the die holds DQ tRHOH after
// RE# rises), at most tRP + tREH. Every count of 0 is taken as 1.
//
// Invariants: WE# and RE# are never low together; DQ is driven (dq_oe) only during
// command, address and data-in cycles; one op completes (op_done pulse) before the next
// is accepted (op_ready).
module vsl_onfi_phy #(
    parameter int unsigned NUM_CE = 1
) (
    input  logic              clk,
    input  logic              rst_n,
    // timing (cycles), from the channel registers
    input  logic [7:0]        t_wp,
    input  logic [7:0]        t_wh,
    input  logic [7:0]        t_rp,
    input  logic [7:0]        t_reh,
    input  logic [7:0]        t_cls,
    input  logic [7:0]        t_als,
    input  logic [7:0]        t_whr,
    input  logic [7:0]        t_adl,
    input  logic [7:0]        t_wb,
    input  logic [7:0]        t_rr,
    input  logic [7:0]        t_sample,
    input  logic [31:0]       rb_timeout,
    // op port
    input  logic              op_valid,
    output logic              op_ready,
    input  logic [2:0]        op_kind,
    input  logic [7:0]        op_byte,
    input  logic [15:0]       op_count,
    output logic              op_done,
    output logic              done_timeout,
    // data in (to the NAND)
    input  logic [7:0]        din_data,
    input  logic              din_valid,
    output logic              din_ready,
    // data out (from the NAND)
    output logic [7:0]        dout_data,
    output logic              dout_valid,
    // status
    output logic              busy,
    output logic              rb_sampled,
    // ONFI pins
    output logic [NUM_CE-1:0] ce_n,
    output logic              cle,
    output logic              ale,
    output logic              we_n,
    output logic              re_n,
    output logic              wp_n,
    output logic [7:0]        dq_o,
    output logic              dq_oe,
    input  logic [7:0]        dq_i,
    input  logic              rb_n
`ifdef FORMAL
    ,
    // The formal harness's view of the state (rtl/formal/onfi_phy_props.sv: helper
    // invariants); not in a synthesized or simulated build.
    output logic [2:0]        f_state,
    output logic [7:0]        f_phase
`endif
);
  typedef enum logic [2:0] {
    S_IDLE,
    S_WE_LOW,
    S_WE_HIGH,
    S_RE_LOW,
    S_RE_HIGH,
    S_WAIT,
    S_WAIT_RB
  } state_e;

  state_e      state;
  logic [7:0]  phase;      // cycles left in the current strobe phase
  logic [15:0] remaining;  // data cycles left in a burst
  logic [31:0] rb_waited;
  logic [2:0]  kind;
  logic        rb_q, rb_qq;  // R/B# through two flops (it is asynchronous to clk)
  logic [7:0]  samp;         // cycles until the pending DQ sample (0: none pending)
  logic [8:0]  samp_max;     // t_rp + t_reh: a sample must land before the next byte's
  logic [7:0]  samp_load;    // the sample delay in force, clamped to samp_max

  function automatic logic [7:0] at_least_1(input logic [7:0] v);
    at_least_1 = (v == 8'd0) ? 8'd1 : v;
  endfunction

  function automatic logic [7:0] max8(input logic [7:0] a, input logic [7:0] b);
    max8 = (a > b) ? a : b;
  endfunction

  function automatic logic [7:0] wait_cycles(input logic [7:0] sel);
    case (sel)
      vsl_onfi_pkg::WAIT_WHR: wait_cycles = at_least_1(t_whr);
      vsl_onfi_pkg::WAIT_ADL: wait_cycles = at_least_1(t_adl);
      vsl_onfi_pkg::WAIT_WB:  wait_cycles = at_least_1(t_wb);
      default:                wait_cycles = at_least_1(t_rr);
    endcase
  endfunction

`ifdef FORMAL
  assign f_state = state;
  assign f_phase = phase;
`endif
  assign op_ready   = (state == S_IDLE);
  assign busy       = (state != S_IDLE);
  assign rb_sampled = rb_qq;
  // A data-in byte moves when din_valid && din_ready at a clock edge: the first as the
  // op is accepted, the others as each WE# high phase ends.
  assign din_ready  = ((state == S_IDLE) && op_valid && (op_kind == vsl_onfi_pkg::OP_DIN) && (op_count != 16'd0)) ||
                      ((state == S_WE_HIGH) && (kind == vsl_onfi_pkg::OP_DIN) && (phase == 8'd1) &&
                       (remaining != 16'd0));
  assign wp_n       = 1'b1;
  assign samp_max   = {1'b0, at_least_1(t_rp)} + {1'b0, at_least_1(t_reh)};
  assign samp_load  = ({1'b0, at_least_1(t_sample)} > samp_max) ? samp_max[7:0] : at_least_1(t_sample);

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      rb_q  <= 1'b1;
      rb_qq <= 1'b1;
    end else begin
      rb_q  <= rb_n;
      rb_qq <= rb_q;
    end
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      state        <= S_IDLE;
      phase        <= 8'd0;
      remaining    <= 16'd0;
      rb_waited    <= 32'd0;
      kind         <= vsl_onfi_pkg::OP_CMD;
      ce_n         <= '1;
      cle          <= 1'b0;
      ale          <= 1'b0;
      we_n         <= 1'b1;
      re_n         <= 1'b1;
      dq_o         <= 8'd0;
      dq_oe        <= 1'b0;
      op_done      <= 1'b0;
      done_timeout <= 1'b0;
      dout_data    <= 8'd0;
      dout_valid   <= 1'b0;
      samp         <= 8'd0;
    end else begin
      op_done      <= 1'b0;
      done_timeout <= 1'b0;
      dout_valid   <= 1'b0;
      // The DQ sample of the last RE# falling edge (a new edge below reloads it, after
      // this one has landed: samp_load <= tRP + tREH keeps them apart).
      if (samp == 8'd1) begin
        dout_data  <= dq_i;
        dout_valid <= 1'b1;
      end
      if (samp != 8'd0) samp <= samp - 8'd1;
      case (state)
        S_IDLE: begin
          if (op_valid) begin
            kind <= op_kind;
            case (op_kind)
              vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::OP_ADDR: begin
                cle   <= (op_kind == vsl_onfi_pkg::OP_CMD);
                ale   <= (op_kind == vsl_onfi_pkg::OP_ADDR);
                dq_o  <= op_byte;
                dq_oe <= 1'b1;
                we_n  <= 1'b0;
                phase <= max8(at_least_1(t_wp), (op_kind == vsl_onfi_pkg::OP_CMD) ? t_cls : t_als);
                state <= S_WE_LOW;
              end
              vsl_onfi_pkg::OP_DIN: begin
                remaining <= op_count;
                if (op_count == 16'd0) begin
                  op_done <= 1'b1;
                end else if (din_valid) begin
                  // first byte: taken here; later ones as WE# high ends (din_ready)
                  dq_o      <= din_data;
                  dq_oe     <= 1'b1;
                  we_n      <= 1'b0;
                  remaining <= op_count - 16'd1;
                  phase     <= max8(at_least_1(t_wp), t_cls);
                  state     <= S_WE_LOW;
                end else begin
                  phase <= 8'd1;
                  state <= S_WE_HIGH;
                end
              end
              vsl_onfi_pkg::OP_DOUT: begin
                dq_oe <= 1'b0;
                if (op_count == 16'd0) begin
                  op_done <= 1'b1;
                end else begin
                  remaining <= op_count - 16'd1;
                  re_n      <= 1'b0;
                  samp      <= samp_load;
                  phase     <= at_least_1(t_rp);
                  state     <= S_RE_LOW;
                end
              end
              vsl_onfi_pkg::OP_WAIT: begin
                phase <= wait_cycles(op_byte);
                state <= S_WAIT;
              end
              vsl_onfi_pkg::OP_WAIT_RB: begin
                rb_waited <= 32'd0;
                state     <= S_WAIT_RB;
              end
              default: begin  // vsl_onfi_pkg::OP_CE
                ce_n    <= op_byte[NUM_CE-1:0];
                op_done <= 1'b1;
              end
            endcase
          end
        end
        S_WE_LOW: begin
          if (phase <= 8'd1) begin
            we_n  <= 1'b1;
            phase <= at_least_1(t_wh);
            state <= S_WE_HIGH;
          end else begin
            phase <= phase - 8'd1;
          end
        end
        S_WE_HIGH: begin
          if (phase > 8'd1) begin
            phase <= phase - 8'd1;
          end else if (kind == vsl_onfi_pkg::OP_DIN && remaining != 16'd0) begin
            if (din_valid) begin
              dq_o      <= din_data;
              dq_oe     <= 1'b1;
              we_n      <= 1'b0;
              remaining <= remaining - 16'd1;
              phase     <= max8(at_least_1(t_wp), t_cls);
              state     <= S_WE_LOW;
            end
          end else begin
            cle     <= 1'b0;
            ale     <= 1'b0;
            dq_oe   <= 1'b0;
            op_done <= 1'b1;
            state   <= S_IDLE;
          end
        end
        S_RE_LOW: begin
          if (phase <= 8'd1) begin
            re_n  <= 1'b1;
            phase <= at_least_1(t_reh);
            state <= S_RE_HIGH;
          end else begin
            phase <= phase - 8'd1;
          end
        end
        S_RE_HIGH: begin
          if (phase > 8'd1) begin
            phase <= phase - 8'd1;
          end else if (remaining != 16'd0) begin
            remaining <= remaining - 16'd1;
            re_n      <= 1'b0;
            samp      <= samp_load;
            phase     <= at_least_1(t_rp);
            state     <= S_RE_LOW;
          end else if (samp == 8'd0 || samp == 8'd1) begin
            // done once the last byte's sample has landed
            op_done <= 1'b1;
            state   <= S_IDLE;
          end
        end
        S_WAIT: begin
          if (phase <= 8'd1) begin
            op_done <= 1'b1;
            state   <= S_IDLE;
          end else begin
            phase <= phase - 8'd1;
          end
        end
        S_WAIT_RB: begin
          if (rb_qq) begin
            op_done <= 1'b1;
            state   <= S_IDLE;
          end else if (rb_timeout != 32'd0 && rb_waited >= rb_timeout) begin
            op_done      <= 1'b1;
            done_timeout <= 1'b1;
            state        <= S_IDLE;
          end else begin
            rb_waited <= rb_waited + 32'd1;
          end
        end
        default: state <= S_IDLE;
      endcase
    end
  end
endmodule
