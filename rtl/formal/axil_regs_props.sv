// Formal properties of vsl_axil_regs, the controller's AXI4-Lite register block
// (docs/formal.md), built with one channel and one pipe.
//
// Environment: reset low in the first cycle only; every AXI4-Lite master input, and every
// input from the controller, pipes, channels and sensors, free in every cycle (the master
// need not even hold its valids: the properties are the slave's).
// One property per run (`PROP):
//   1 B_ONCE         a write response exactly once per write taken (AW and W together),
//                    never one without a write; no write taken while its response waits
//   2 R_ONCE         the same for reads (AR, R)
//   3 B_STABLE       BVALID, once high, holds with BRESP until BREADY
//   4 R_STABLE       RVALID, once high, holds with RDATA/RRESP until RREADY
//   5 NO_LOST_WRITE  every aligned write taken lands, byte strobes honoured: SCRATCH reads
//                    back what was written, and CHAN.TIMING0 and PIPE.SQ_TAIL (outputs)
//                    always equal their writes merged in order; misaligned writes change
//                    nothing and answer SLVERR
`ifndef PROP
`define PROP 1
`endif
module axil_regs_props (
    input logic        clk,
    input logic [15:0] s_awaddr,
    input logic        s_awvalid,
    input logic [31:0] s_wdata,
    input logic [3:0]  s_wstrb,
    input logic        s_wvalid,
    input logic        s_bready,
    input logic [15:0] s_araddr,
    input logic        s_arvalid,
    input logic        s_rready,
    input logic        idle,
    input logic [2:0]  irq_events,
    input logic        chan_busy, chan_timeout_evt, chan_rb,
    input logic [31:0] pipe_sq_head, pipe_cq_tail, pipe_completions,
    input logic        pipe_running, pipe_ring_error, pipe_dma_error, pipe_idle,
    input logic [15:0] pipe_own_host, pipe_own_gen,
    input logic [31:0] pipe_own_lease_left,
    input logic [1:0]  pipe_own_status,
    input logic [31:0] pipe_fenced,
    input logic        sensor_present,
    input logic [31:0] sensor_temp_mc, sensor_power_mw
);
  logic started = 1'b0;
  always_ff @(posedge clk) started <= 1'b1;
  wire rst_n = started;

  logic        s_awready, s_wready, s_bvalid, s_arready, s_rvalid;
  logic [1:0]  s_bresp, s_rresp;
  logic [31:0] s_rdata;
  logic        ap_start, soft_reset, irq, pipe_enable, pipe_own_claim, pipe_own_claim_force, pipe_own_renew;
  logic        pipe_own_release;
  logic [31:0] chan_timing0, chan_timing1, chan_timing2, chan_rb_timeout;
  logic [63:0] pipe_sq_base, pipe_cq_base;
  logic [31:0] pipe_sq_size, pipe_sq_tail, pipe_cq_size, pipe_cq_head, pipe_poll_gap, pipe_own_lease;
  logic [15:0] pipe_lun_reset, pipe_own_claim_host, pipe_own_arg_gen;
  vsl_axil_regs #(.NUM_CHAN(1), .NUM_PIPES(1)) dut (
      .clk, .rst_n, .s_awaddr, .s_awvalid, .s_awready, .s_wdata, .s_wstrb, .s_wvalid, .s_wready, .s_bresp,
      .s_bvalid, .s_bready, .s_araddr, .s_arvalid, .s_arready, .s_rdata, .s_rresp, .s_rvalid, .s_rready,
      .ap_start, .idle, .soft_reset, .irq, .irq_events, .chan_timing0, .chan_timing1, .chan_timing2,
      .chan_rb_timeout, .chan_busy, .chan_timeout_evt, .chan_rb, .pipe_sq_base, .pipe_sq_size, .pipe_sq_tail,
      .pipe_cq_base, .pipe_cq_size, .pipe_cq_head, .pipe_poll_gap, .pipe_enable, .pipe_lun_reset, .pipe_sq_head,
      .pipe_cq_tail, .pipe_completions, .pipe_running, .pipe_ring_error, .pipe_dma_error, .pipe_idle,
      .pipe_own_claim, .pipe_own_claim_host, .pipe_own_claim_force, .pipe_own_renew, .pipe_own_release,
      .pipe_own_arg_gen, .pipe_own_lease, .pipe_own_host, .pipe_own_gen, .pipe_own_lease_left,
      .pipe_own_status, .pipe_fenced, .sensor_present, .sensor_temp_mc, .sensor_power_mw);

  function automatic logic [31:0] merged(input logic [31:0] old, input logic [31:0] d, input logic [3:0] strb);
    for (int b = 0; b < 4; b++) merged[8*b +: 8] = strb[b] ? d[8*b +: 8] : old[8*b +: 8];
  endfunction

  // --- monitors ---
  wire w_take = started && s_awvalid && s_awready && s_wvalid && s_wready;
  wire b_take = s_bvalid && s_bready;
  wire r_take = started && s_arvalid && s_arready;
  wire rd_take = s_rvalid && s_rready;
  wire aligned = s_awaddr[1:0] == 2'b00;
  wire [15:0] wa = {s_awaddr[15:2], 2'b00};
  logic [1:0]  wout = 2'd0, rout = 2'd0;
  logic        b_q = 1'b0, r_q = 1'b0;
  logic [1:0]  bresp_q = 2'd0, rresp_q = 2'd0;
  logic [31:0] rdata_q = 32'd0;
  logic [31:0] sh_scratch = 32'd0, sh_t0 = 32'd0, sh_tail = 32'd0;  // the writes, merged in order
  logic        misaligned_q = 1'b0;   // the write being answered was misaligned
  logic        scratch_rd = 1'b0;     // the read being answered is of SCRATCH
  logic [31:0] scratch_exp = 32'd0;   // and what it must return
  always_ff @(posedge clk) begin
    wout <= wout + (w_take ? 2'd1 : 2'd0) - (b_take ? 2'd1 : 2'd0);
    rout <= rout + (r_take ? 2'd1 : 2'd0) - (rd_take ? 2'd1 : 2'd0);
    b_q <= s_bvalid && !s_bready; bresp_q <= s_bresp;
    r_q <= s_rvalid && !s_rready; rresp_q <= s_rresp; rdata_q <= s_rdata;
    if (w_take) begin
      misaligned_q <= !aligned;
      if (aligned && wa == vsl_regmap_pkg::VSL_CTRL_SCRATCH) sh_scratch <= merged(sh_scratch, s_wdata, s_wstrb);
      if (aligned && wa == vsl_regmap_pkg::VSL_CHAN_BASE + vsl_regmap_pkg::VSL_CHAN_TIMING0)
        sh_t0 <= merged(sh_t0, s_wdata, s_wstrb);
      if (aligned && wa == vsl_regmap_pkg::VSL_PIPE_BASE + vsl_regmap_pkg::VSL_PIPE_SQ_TAIL)
        sh_tail <= merged(sh_tail, s_wdata, s_wstrb);
    end
    if (r_take) begin
      scratch_rd  <= s_araddr == vsl_regmap_pkg::VSL_CTRL_SCRATCH;
      scratch_exp <= sh_scratch;  // a write in the same cycle lands after the read
    end
  end

  logic [5:0] ok;
  always_comb begin
    ok = '1;
    ok[1] = wout <= 2'd1 && (wout == 2'd1) == s_bvalid;
    ok[2] = rout <= 2'd1 && (rout == 2'd1) == s_rvalid;
    ok[3] = !b_q || (s_bvalid && s_bresp == bresp_q);
    ok[4] = !r_q || (s_rvalid && s_rresp == rresp_q && s_rdata == rdata_q);
    ok[5] = chan_timing0 == sh_t0 && pipe_sq_tail == sh_tail &&
            !(s_rvalid && scratch_rd && (s_rdata != scratch_exp || s_rresp != 2'b00)) &&
            !(s_bvalid && misaligned_q && s_bresp != 2'b10);
  end
`ifndef COVER
  always @* if (started) assert (ok[`PROP]);
`else
  logic [5:0] hit;
  always_comb begin
    hit = '0;
    hit[1] = b_take && wout == 2'd1;
    hit[2] = rd_take && rout == 2'd1;
    hit[3] = b_q && s_bvalid;
    hit[4] = r_q && s_rvalid;
    hit[5] = s_rvalid && scratch_rd && scratch_exp[15:8] == 8'hA5 && scratch_exp[7:0] == 8'h5A;  // two bytes, two writes
  end
  always @* if (started) assert (!hit[`PROP]);
`endif
endmodule
