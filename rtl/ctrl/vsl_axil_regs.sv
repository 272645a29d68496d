// vsl_axil_regs: the controller's AXI4-Lite register block (docs/register-map.md), built
// from the generated package. This build implements the CTRL block and NUM_CHAN CHAN
// blocks; the PIPE blocks are not there yet, and every address outside what exists
// answers SLVERR (reads return 0), so a host can tell a missing register from a zero; so
// does a misaligned address (nothing is written).
//
// AXI4-Lite: one outstanding write (AW and W taken together, then B) and one outstanding
// read; WSTRB honoured byte by byte on read-write registers. ISR bits toggle on a 1
// written, as XRT's ap_ctrl_hs ISR. SOFT_RESET.RESET pulses soft_reset for one cycle and
// clears the channels' sticky TIMEOUT bits. The interrupt line is GIE & |(IER & ISR).
module vsl_axil_regs #(
    parameter int unsigned NUM_CHAN = 1,
    parameter int unsigned LUNS_PER_CHANNEL = 4,
    parameter int unsigned ECC_T = 8
) (
    input  logic                    clk,
    input  logic                    rst_n,
    // AXI4-Lite slave
    input  logic [15:0]             s_awaddr,
    input  logic                    s_awvalid,
    output logic                    s_awready,
    input  logic [31:0]             s_wdata,
    input  logic [3:0]              s_wstrb,
    input  logic                    s_wvalid,
    output logic                    s_wready,
    output logic [1:0]              s_bresp,
    output logic                    s_bvalid,
    input  logic                    s_bready,
    input  logic [15:0]             s_araddr,
    input  logic                    s_arvalid,
    output logic                    s_arready,
    output logic [31:0]             s_rdata,
    output logic [1:0]              s_rresp,
    output logic                    s_rvalid,
    input  logic                    s_rready,
    // controller
    output logic                    ap_start,
    input  logic                    idle,
    output logic                    soft_reset,
    output logic                    irq,
    input  logic [2:0]              irq_events,  // pulses: pipe 0 CQ, pipe 1 CQ, error
    // channels (channel c in bits [32c +: 32] or [c])
    output logic [NUM_CHAN*32-1:0]  chan_timing0,
    output logic [NUM_CHAN*32-1:0]  chan_timing1,
    output logic [NUM_CHAN*32-1:0]  chan_timing2,
    output logic [NUM_CHAN*32-1:0]  chan_rb_timeout,
    input  logic [NUM_CHAN-1:0]     chan_busy,
    input  logic [NUM_CHAN-1:0]     chan_timeout_evt,
    input  logic [NUM_CHAN-1:0]     chan_rb
);
  localparam logic [1:0] RESP_OKAY = 2'b00, RESP_SLVERR = 2'b10;

  logic        start_q, auto_restart_q, done_q, gie_q;
  logic [2:0]  ier_q, isr_q;
  logic [31:0] scratch_q;
  logic [NUM_CHAN*32-1:0] mode_q;
  logic [NUM_CHAN-1:0]    timeout_q;

  assign ap_start = start_q;
  assign irq      = gie_q && |(ier_q & isr_q);

  function automatic logic [31:0] merge(input logic [31:0] old, input logic [31:0] d, input logic [3:0] strb);
    for (int b = 0; b < 4; b++) merge[8*b +: 8] = strb[b] ? d[8*b +: 8] : old[8*b +: 8];
  endfunction

  // Which CHAN block an address falls in (NUM_CHAN if none) and its register offset.
  function automatic int unsigned chan_of(input logic [15:0] a);
    chan_of = NUM_CHAN;
    for (int unsigned c = 0; c < NUM_CHAN; c++) begin
      if (a >= vsl_regmap_pkg::VSL_CHAN_BASE + 16'(c) * vsl_regmap_pkg::VSL_CHAN_STRIDE &&
          a < vsl_regmap_pkg::VSL_CHAN_BASE + 16'(c + 1) * vsl_regmap_pkg::VSL_CHAN_STRIDE) chan_of = c;
    end
  endfunction

  // ---- reads ----
  logic        rd_fire;
  logic [15:0] ra, roff;
  int unsigned rc;
  logic [31:0] rdata;
  logic        rerr;
  assign s_arready = !s_rvalid;
  assign rd_fire   = s_arvalid && !s_rvalid;
  assign ra        = {s_araddr[15:2], 2'b00};
  assign rc        = chan_of(ra);
  assign roff      = ra - (vsl_regmap_pkg::VSL_CHAN_BASE + 16'(rc) * vsl_regmap_pkg::VSL_CHAN_STRIDE);

  // ---- writes ----
  logic        wr_fire;
  logic [15:0] wa;
  int unsigned wc;
  logic [15:0] woff;
  assign s_awready = s_awvalid && s_wvalid && !s_bvalid;
  assign s_wready  = s_awready;
  assign wr_fire   = s_awvalid && s_wvalid && !s_bvalid;
  assign wa        = {s_awaddr[15:2], 2'b00};
  assign wc        = chan_of(wa);
  assign woff      = wa - (vsl_regmap_pkg::VSL_CHAN_BASE + 16'(wc) * vsl_regmap_pkg::VSL_CHAN_STRIDE);

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      start_q         <= 1'b0;
      auto_restart_q  <= 1'b0;
      done_q          <= 1'b0;
      gie_q           <= 1'b0;
      ier_q           <= 3'd0;
      isr_q           <= 3'd0;
      scratch_q       <= 32'd0;
      soft_reset      <= 1'b0;
      s_bvalid        <= 1'b0;
      s_bresp         <= RESP_OKAY;
      chan_timing0    <= '0;
      chan_timing1    <= '0;
      chan_timing2    <= '0;
      chan_rb_timeout <= '0;
      mode_q          <= '0;
      timeout_q       <= '0;
    end else begin
      soft_reset <= 1'b0;
      isr_q      <= isr_q | irq_events;
      timeout_q  <= timeout_q | chan_timeout_evt;
      if (s_bvalid && s_bready) s_bvalid <= 1'b0;
      if (wr_fire) begin
        s_bvalid <= 1'b1;
        s_bresp  <= RESP_OKAY;
        if (s_awaddr[1:0] != 2'b00) begin
          s_bresp <= RESP_SLVERR;  // misaligned: nothing written
        end else if (wc < NUM_CHAN) begin
          case (woff)
            vsl_regmap_pkg::VSL_CHAN_TIMING0: chan_timing0[32*wc +: 32] <= merge(chan_timing0[32*wc +: 32], s_wdata, s_wstrb);
            vsl_regmap_pkg::VSL_CHAN_TIMING1: chan_timing1[32*wc +: 32] <= merge(chan_timing1[32*wc +: 32], s_wdata, s_wstrb);
            vsl_regmap_pkg::VSL_CHAN_TIMING2: chan_timing2[32*wc +: 32] <= merge(chan_timing2[32*wc +: 32], s_wdata, s_wstrb);
            vsl_regmap_pkg::VSL_CHAN_RB_TIMEOUT:
              chan_rb_timeout[32*wc +: 32] <= merge(chan_rb_timeout[32*wc +: 32], s_wdata, s_wstrb);
            vsl_regmap_pkg::VSL_CHAN_ONFI_MODE: if (s_wstrb[0]) mode_q[32*wc +: 32] <= {29'd0, s_wdata[2:0]};
            vsl_regmap_pkg::VSL_CHAN_CHAN_STATUS: ;  // read-only: the write is ignored
            default: s_bresp <= RESP_SLVERR;
          endcase
        end else begin
          case (wa)
            vsl_regmap_pkg::VSL_CTRL_AP_CTRL: if (s_wstrb[0]) begin
              start_q        <= s_wdata[vsl_regmap_pkg::VSL_CTRL_AP_CTRL_START_LSB];
              auto_restart_q <= s_wdata[vsl_regmap_pkg::VSL_CTRL_AP_CTRL_AUTO_RESTART_LSB];
              if (start_q && !s_wdata[vsl_regmap_pkg::VSL_CTRL_AP_CTRL_START_LSB]) done_q <= 1'b1;
            end
            vsl_regmap_pkg::VSL_CTRL_GIE: if (s_wstrb[0]) gie_q <= s_wdata[0];
            vsl_regmap_pkg::VSL_CTRL_IER: if (s_wstrb[0]) ier_q <= s_wdata[2:0];
            vsl_regmap_pkg::VSL_CTRL_ISR: if (s_wstrb[0]) isr_q <= (isr_q | irq_events) ^ s_wdata[2:0];
            vsl_regmap_pkg::VSL_CTRL_SCRATCH: scratch_q <= merge(scratch_q, s_wdata, s_wstrb);
            vsl_regmap_pkg::VSL_CTRL_SOFT_RESET: if (s_wstrb[0] && s_wdata[0]) begin
              soft_reset <= 1'b1;
              timeout_q  <= '0;
            end
            vsl_regmap_pkg::VSL_CTRL_ID, vsl_regmap_pkg::VSL_CTRL_VERSION, vsl_regmap_pkg::VSL_CTRL_CAPS,
            vsl_regmap_pkg::VSL_CTRL_STATUS: ;  // read-only: the write is ignored
            default: s_bresp <= RESP_SLVERR;
          endcase
        end
      end
      // DONE clears on read (below, with the read that returns it).
      if (rd_fire && ra == vsl_regmap_pkg::VSL_CTRL_AP_CTRL) done_q <= 1'b0;
    end
  end


  always_comb begin
    rdata = 32'd0;
    rerr  = 1'b0;
    if (s_araddr[1:0] != 2'b00) begin
      rerr = 1'b1;  // misaligned
    end else if (rc < NUM_CHAN) begin
      case (roff)
        vsl_regmap_pkg::VSL_CHAN_TIMING0:    rdata = chan_timing0[32*rc +: 32];
        vsl_regmap_pkg::VSL_CHAN_TIMING1:    rdata = chan_timing1[32*rc +: 32];
        vsl_regmap_pkg::VSL_CHAN_TIMING2:    rdata = chan_timing2[32*rc +: 32];
        vsl_regmap_pkg::VSL_CHAN_RB_TIMEOUT: rdata = chan_rb_timeout[32*rc +: 32];
        vsl_regmap_pkg::VSL_CHAN_ONFI_MODE:  rdata = mode_q[32*rc +: 32];
        vsl_regmap_pkg::VSL_CHAN_CHAN_STATUS: begin
          rdata[vsl_regmap_pkg::VSL_CHAN_CHAN_STATUS_BUSY_LSB]    = chan_busy[rc];
          rdata[vsl_regmap_pkg::VSL_CHAN_CHAN_STATUS_TIMEOUT_LSB] = timeout_q[rc];
          rdata[vsl_regmap_pkg::VSL_CHAN_CHAN_STATUS_RB_LSB]      = chan_rb[rc];
        end
        default: rerr = 1'b1;
      endcase
    end else begin
      case (ra)
        vsl_regmap_pkg::VSL_CTRL_AP_CTRL: begin
          rdata[vsl_regmap_pkg::VSL_CTRL_AP_CTRL_START_LSB]        = start_q;
          rdata[vsl_regmap_pkg::VSL_CTRL_AP_CTRL_DONE_LSB]         = done_q;
          rdata[vsl_regmap_pkg::VSL_CTRL_AP_CTRL_IDLE_LSB]         = idle;
          rdata[vsl_regmap_pkg::VSL_CTRL_AP_CTRL_READY_LSB]        = 1'b1;
          rdata[vsl_regmap_pkg::VSL_CTRL_AP_CTRL_AUTO_RESTART_LSB] = auto_restart_q;
        end
        vsl_regmap_pkg::VSL_CTRL_GIE:     rdata = {31'd0, gie_q};
        vsl_regmap_pkg::VSL_CTRL_IER:     rdata = {29'd0, ier_q};
        vsl_regmap_pkg::VSL_CTRL_ISR:     rdata = {29'd0, isr_q};
        vsl_regmap_pkg::VSL_CTRL_ID:      rdata = vsl_regmap_pkg::VSL_CTRL_ID_RESET;
        vsl_regmap_pkg::VSL_CTRL_VERSION: rdata = vsl_regmap_pkg::VSL_CTRL_VERSION_RESET;
        vsl_regmap_pkg::VSL_CTRL_CAPS: begin
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_PIPES_LSB +: 4]             = 4'd0;  // no PIPE blocks in this build
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_CHANNELS_PER_PIPE_LSB +: 4] = 4'(NUM_CHAN);
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_LUNS_PER_CHANNEL_LSB +: 4]  = 4'(LUNS_PER_CHANNEL);
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_ECC_T_LSB +: 5]             = 5'(ECC_T);
        end
        vsl_regmap_pkg::VSL_CTRL_SCRATCH:    rdata = scratch_q;
        vsl_regmap_pkg::VSL_CTRL_SOFT_RESET: rdata = 32'd0;  // write-only
        vsl_regmap_pkg::VSL_CTRL_STATUS: begin
          rdata[vsl_regmap_pkg::VSL_CTRL_STATUS_RUNNING_LSB] = start_q;
          rdata[vsl_regmap_pkg::VSL_CTRL_STATUS_ERROR_LSB]   = |timeout_q;
        end
        default: rerr = 1'b1;
      endcase
    end
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      s_rvalid <= 1'b0;
      s_rdata  <= 32'd0;
      s_rresp  <= RESP_OKAY;
    end else begin
      if (s_rvalid && s_rready) s_rvalid <= 1'b0;
      if (rd_fire) begin
        s_rvalid <= 1'b1;
        s_rdata  <= rerr ? 32'd0 : rdata;
        s_rresp  <= rerr ? RESP_SLVERR : RESP_OKAY;
      end
    end
  end
endmodule
