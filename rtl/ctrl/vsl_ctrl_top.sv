// vsl_ctrl_top: the register block over one bare ONFI channel (sequencer and pin engine,
// its timing from the CHAN 0 registers) with the channel's request port on the outside:
// for testing the channel through registers. The controller is vsl_ctrl.
module vsl_ctrl_top (
    input  logic        clk,
    input  logic        rst_n,
    // AXI4-Lite slave (registers)
    input  logic [15:0] s_awaddr,
    input  logic        s_awvalid,
    output logic        s_awready,
    input  logic [31:0] s_wdata,
    input  logic [3:0]  s_wstrb,
    input  logic        s_wvalid,
    output logic        s_wready,
    output logic [1:0]  s_bresp,
    output logic        s_bvalid,
    input  logic        s_bready,
    input  logic [15:0] s_araddr,
    input  logic        s_arvalid,
    output logic        s_arready,
    output logic [31:0] s_rdata,
    output logic [1:0]  s_rresp,
    output logic        s_rvalid,
    input  logic        s_rready,
    output logic        irq,  // the Alveo wrapper names it `interrupt`
    // channel requests (the pipes' place)
    input  logic        req_valid,
    output logic        req_ready,
    input  logic [3:0]  req_op,
    input  logic [23:0] req_row,
    input  logic [15:0] req_col,
    input  logic [15:0] req_len,
    output logic        resp_valid,
    output logic [7:0]  resp_status,
    output logic        resp_timeout,
    input  logic [7:0]  din_data,
    input  logic        din_valid,
    output logic        din_ready,
    output logic [7:0]  dout_data,
    output logic        dout_valid,
    // ONFI pins
    output logic        ce_n,
    output logic        cle,
    output logic        ale,
    output logic        we_n,
    output logic        re_n,
    output logic        wp_n,
    output logic [7:0]  dq_o,
    output logic        dq_oe,
    input  logic [7:0]  dq_i,
    input  logic        rb_n
);
  logic [31:0] timing0, timing1, timing2, rb_timeout;
  logic        ap_start, soft_reset, busy, timeout_evt;
  logic        chan_rst_n;
  // The register block's pipe outputs, unused here.
  logic [63:0] np_base0, np_base1;
  logic [31:0] np_w0, np_w1, np_w2, np_w3, np_w4;
  logic        np_en;
  logic [15:0] np_lr;
  logic        np_claim, np_force, np_renew, np_release;
  logic [15:0] np_host, np_gen;
  logic [31:0] np_lease;

  // SOFT_RESET resets the channel (its registers keep their values).
  assign chan_rst_n  = rst_n && !soft_reset;
  assign timeout_evt = resp_valid && resp_timeout;

  vsl_axil_regs #(.NUM_CHAN(1), .LUNS_PER_CHANNEL(4), .ECC_T(8)) regs (
      .clk, .rst_n,
      .s_awaddr, .s_awvalid, .s_awready, .s_wdata, .s_wstrb, .s_wvalid, .s_wready,
      .s_bresp, .s_bvalid, .s_bready, .s_araddr, .s_arvalid, .s_arready,
      .s_rdata, .s_rresp, .s_rvalid, .s_rready,
      .ap_start, .idle(!busy), .soft_reset, .irq,
      .irq_events({timeout_evt, 2'b00}),
      .chan_timing0(timing0), .chan_timing1(timing1), .chan_timing2(timing2), .chan_rb_timeout(rb_timeout),
      .chan_busy(busy), .chan_timeout_evt(timeout_evt), .chan_rb(rb_n),
      // no pipes in this top: their registers answer SLVERR
      .pipe_sq_base(np_base0), .pipe_sq_size(np_w0), .pipe_sq_tail(np_w1), .pipe_cq_base(np_base1),
      .pipe_cq_size(np_w2), .pipe_cq_head(np_w3), .pipe_poll_gap(np_w4), .pipe_enable(np_en),
      .pipe_lun_reset(np_lr), .pipe_sq_head(32'd0), .pipe_cq_tail(32'd0),
      .pipe_completions(32'd0), .pipe_running(1'b0), .pipe_ring_error(1'b0), .pipe_dma_error(1'b0),
      .pipe_idle(1'b1),
      .pipe_own_claim(np_claim), .pipe_own_claim_host(np_host), .pipe_own_claim_force(np_force),
      .pipe_own_renew(np_renew), .pipe_own_release(np_release), .pipe_own_arg_gen(np_gen),
      .pipe_own_lease(np_lease), .pipe_own_host(16'd0), .pipe_own_gen(16'd0), .pipe_own_lease_left(32'd0),
      .pipe_own_status(2'd0), .pipe_fenced(32'd0),
      .sensor_present(1'b0), .sensor_temp_mc(32'd0), .sensor_power_mw(32'd0)
  );

  vsl_onfi_channel chan (
      .clk, .rst_n(chan_rst_n), .timing0, .timing1, .timing2, .rb_timeout,
      .req_valid, .req_ready, .req_op, .req_row, .req_col, .req_len,
      .resp_valid, .resp_status, .resp_timeout,
      .din_data, .din_valid, .din_ready, .dout_data, .dout_valid, .busy,
      .ce_n, .cle, .ale, .we_n, .re_n, .wp_n, .dq_o, .dq_oe, .dq_i, .rb_n
  );

  logic unused;
  assign unused = ^{ap_start, np_base0, np_base1, np_w0, np_w1, np_w2, np_w3, np_w4, np_en, np_lr, np_claim, np_host,
                    np_force, np_renew, np_release, np_gen, np_lease};
endmodule
