// vsl_onfi_channel: one ONFI channel, the sequencer (vsl_onfi_seq) over the pin engine
// (vsl_onfi_phy), with the channel's timing as register fields. One request at a time.
module vsl_onfi_channel (
    input  logic        clk,
    input  logic        rst_n,
    input  logic [31:0] timing0,   // CHAN.TIMING0: TWP, TWH, TRP, TREH
    input  logic [31:0] timing1,   // CHAN.TIMING1: TCLS, TALS, TWHR, TADL
    input  logic [31:0] timing2,   // CHAN.TIMING2: TWB, TRR, TSAMPLE
    input  logic [31:0] rb_timeout,
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
    output logic        busy,
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
  logic        op_valid, op_ready, op_done, op_timeout, phy_dout_valid, phy_busy, rb_sampled;
  logic [2:0]  op_kind;
  logic [7:0]  op_byte, phy_dout_data;
  logic [15:0] op_count;

  vsl_onfi_seq seq (
      .clk, .rst_n, .rb_timeout,
      .req_valid, .req_ready, .req_op, .req_row, .req_col, .req_len,
      .resp_valid, .resp_status, .resp_timeout,
      .phy_dout_data, .phy_dout_valid, .dout_data, .dout_valid,
      .op_valid, .op_ready, .op_kind, .op_byte, .op_count, .op_done, .op_timeout
  );

  vsl_onfi_phy #(.NUM_CE(1)) phy (
      .clk, .rst_n,
      .t_wp(timing0[7:0]), .t_wh(timing0[15:8]), .t_rp(timing0[23:16]), .t_reh(timing0[31:24]),
      .t_cls(timing1[7:0]), .t_als(timing1[15:8]), .t_whr(timing1[23:16]), .t_adl(timing1[31:24]),
      .t_wb(timing2[7:0]), .t_rr(timing2[15:8]), .t_sample(timing2[23:16]),
      .rb_timeout,
      .op_valid, .op_ready, .op_kind, .op_byte, .op_count, .op_done, .done_timeout(op_timeout),
      .din_data, .din_valid, .din_ready,
      .dout_data(phy_dout_data), .dout_valid(phy_dout_valid),
      .busy(phy_busy), .rb_sampled,
      .ce_n, .cle, .ale, .we_n, .re_n, .wp_n, .dq_o, .dq_oe, .dq_i, .rb_n
  );

  assign busy = phy_busy || !req_ready;
  logic unused;
  assign unused = ^{timing2[31:24], rb_sampled};
endmodule
