// Formal properties of vsl_onfi_seq, a channel's operation sequencer (docs/formal.md).
//
// Environment: reset low in the first cycle only; requests any op, row, column, length and
// R/B# timeout, at any time. Below the sequencer an abstract pin engine (this harness's
// own logic, not vsl_onfi_phy, whose pin rules onfi_phy_props proves): one op at a time,
// accepted when the sequencer offers it and the engine is free (any delay); a DOUT op
// gives exactly op_count bytes, the last one before its done or with it (onfi_phy_props
// DOUT_EXACT proves the phy keeps to that); every other op is done after any delay; any op
// may end in a timeout; status and data byte values are free. Like a real target the
// engine is in status mode after READ STATUS (70h) or READ STATUS ENHANCED (78h) until the
// next command, and its bytes then are status bytes.
// One property per run (`PROP):
//   1 ONE_RESPONSE     one response per accepted request, none without one, and no request
//                      taken while one is open
//   2 OP_STABLE        an op offered and not taken is offered again unchanged
//   3 CE_FIRST         each request's first op selects the target (OP_CE)
//   4 NO_STATUS_LEAK   a status byte never reaches the data stream, a data byte always does
//   5 BYTES_OUT_EXACT  a request that reads data answers (without a timeout) after exactly
//                      req_len data bytes; any other request after none
//   6 BYTES_IN_EXACT   PROGRAM(_START) and SET FEATURES send exactly req_len bytes, one
//                      DIN op; nothing else sends any
//   7 POLL_BY_LUN      LUN-level requests poll with 78h and their own row (three address
//                      cycles, row[7:0] first); target-level ones (READ PARAMETER PAGE,
//                      GET/SET FEATURES) with 70h and no address
//   8 READY_SEEN       a poll ends (the request goes on, or answers without a timeout) only
//                      when the status byte it read last says ready (RDY, bit 6); POLL_ONCE
//                      answers whatever it read
`ifndef PROP
`define PROP 1
`endif
module onfi_seq_props (
    input logic        clk,
    input logic [31:0] rb_timeout,
    input logic        req_valid,
    input logic [3:0]  req_op,
    input logic [23:0] req_row,
    input logic [15:0] req_col,
    input logic [15:0] req_len,
    input logic [7:0]  phy_byte,     // the engine's byte out, free
    input logic        e_ready,      // the engine takes an offered op this cycle (when free)
    input logic        e_step,       // the engine moves on this cycle (a byte, or done)
    input logic        e_timeout,    // the op ends in a timeout
    input logic        e_join        // a DOUT's last byte comes in its done cycle
);
  localparam logic [3:0] REQ_READ_ID = 4'd1, REQ_READ_PARAM = 4'd2, REQ_READ = 4'd3, REQ_PROGRAM = 4'd4,
                         REQ_SET_FEAT = 4'd7, REQ_GET_FEAT = 4'd8, REQ_PROGRAM_START = 4'd10,
                         REQ_READ_OUT = 4'd13;

  logic started = 1'b0;
  always_ff @(posedge clk) started <= 1'b1;
  wire rst_n = started;

  // --- the abstract pin engine ---
  logic        e_busy = 1'b0;     // an op taken, not done yet
  logic [2:0]  e_kind = 3'd0;
  logic [15:0] e_left = 16'd0;    // DOUT bytes still to give
  logic        e_status = 1'b0;   // status mode (after 70h/78h, until the next command)
  logic        op_valid, op_ready, op_done, op_timeout, phy_dout_valid;
  logic [2:0]  op_kind;
  logic [7:0]  op_byte;
  logic [15:0] op_count;
  assign op_ready       = started && !e_busy && e_ready;
  assign phy_dout_valid = e_busy && e_kind == vsl_onfi_pkg::OP_DOUT && e_left != 16'd0 && e_step;
  assign op_done        = e_busy && e_step &&
                          (e_left == 16'd0 || (e_left == 16'd1 && e_kind == vsl_onfi_pkg::OP_DOUT && e_join));
  assign op_timeout     = op_done && e_timeout;
  wire op_take = op_valid && op_ready;
  always_ff @(posedge clk) begin
    if (op_take) begin
      e_busy <= 1'b1;
      e_kind <= op_kind;
      e_left <= op_kind == vsl_onfi_pkg::OP_DOUT ? op_count : 16'd0;
      if (op_kind == vsl_onfi_pkg::OP_CMD) e_status <= op_byte == vsl_onfi_pkg::CMD_READ_STATUS || op_byte == vsl_onfi_pkg::CMD_READ_STATUS_ENH;
    end else begin
      if (phy_dout_valid) e_left <= e_left - 16'd1;
      if (op_done) e_busy <= 1'b0;
    end
  end

  logic        req_ready, resp_valid, resp_timeout, dout_valid;
  logic [7:0]  resp_status, dout_data;
  vsl_onfi_seq dut (
      .clk, .rst_n, .rb_timeout, .req_valid, .req_ready, .req_op, .req_row, .req_col, .req_len,
      .resp_valid, .resp_status, .resp_timeout, .phy_dout_data(phy_byte), .phy_dout_valid, .dout_data,
      .dout_valid, .op_valid, .op_ready, .op_kind, .op_byte, .op_count, .op_done, .op_timeout);

  // --- monitors ---
  wire req_take = started && req_valid && req_ready;
  logic        open_q = 1'b0;      // a request accepted, not answered
  logic [3:0]  rop = 4'd0;         // its op, row, length
  logic [23:0] rrow = 24'd0;
  logic [15:0] rlen = 16'd0;
  logic        first_op = 1'b0;    // its first op not taken yet
  logic [16:0] outs = 17'd0;       // data bytes the user saw
  logic [16:0] ins = 17'd0;        // DIN bytes asked of the engine
  logic [1:0]  dins = 2'd0;        // DIN ops (saturating)
  logic [1:0]  addr_i = 2'd3;      // address cycles seen since a 78h (3: none expected)
  logic        bad_poll = 1'b0;    // a poll command or address not as the request's kind wants
  logic        off_q = 1'b0;       // an op offered and not taken last cycle, and what it was
  logic [2:0]  off_kind = 3'd0;
  logic [7:0]  off_byte = 8'd0;
  logic [15:0] off_count = 16'd0;
  wire target_level = rop == REQ_READ_PARAM || rop == REQ_GET_FEAT || rop == REQ_SET_FEAT;
  // The last status byte read, and whether the last op done was a status read.
  logic [7:0] last_st = 8'd0;
  logic       after_poll = 1'b0;
  wire status_byte = phy_dout_valid && e_status;
  wire [7:0] st_now = status_byte ? phy_byte : last_st;
  always_ff @(posedge clk) begin
    if (status_byte) last_st <= phy_byte;
    if (op_done && e_kind == vsl_onfi_pkg::OP_DOUT && e_status) after_poll <= 1'b1;
    else if (op_take || resp_valid) after_poll <= 1'b0;
  end
  wire poll_again = op_take && op_kind == vsl_onfi_pkg::OP_CMD &&
                    (op_byte == vsl_onfi_pkg::CMD_READ_STATUS || op_byte == vsl_onfi_pkg::CMD_READ_STATUS_ENH);
  always_ff @(posedge clk) begin
    if (req_take) begin
      rop <= req_op; rrow <= req_row; rlen <= req_len;
      open_q <= 1'b1; first_op <= 1'b1; outs <= 17'd0; ins <= 17'd0; dins <= 2'd0; addr_i <= 2'd3;
    end else begin
      if (resp_valid) open_q <= 1'b0;
      if (op_take) first_op <= 1'b0;
      if (dout_valid) outs <= outs + 17'd1;
      if (op_take && op_kind == vsl_onfi_pkg::OP_DIN) begin
        ins <= ins + {1'b0, op_count};
        if (dins != 2'd3) dins <= dins + 2'd1;
      end
      if (op_take && op_kind == vsl_onfi_pkg::OP_CMD) addr_i <= op_byte == vsl_onfi_pkg::CMD_READ_STATUS_ENH ? 2'd0 : 2'd3;
      else if (op_take && op_kind == vsl_onfi_pkg::OP_ADDR && addr_i != 2'd3) addr_i <= addr_i + 2'd1;
    end
    off_q <= op_valid && !op_ready;
    off_kind <= op_kind; off_byte <= op_byte; off_count <= op_count;
  end
  // A poll's command, and the address cycles after a 78h, against the request's kind.
  logic poll_ok;
  always_comb begin
    poll_ok = 1'b1;
    if (op_take && op_kind == vsl_onfi_pkg::OP_CMD && op_byte == vsl_onfi_pkg::CMD_READ_STATUS_ENH && target_level) poll_ok = 1'b0;
    if (op_take && op_kind == vsl_onfi_pkg::OP_CMD && op_byte == vsl_onfi_pkg::CMD_READ_STATUS && !target_level) poll_ok = 1'b0;
    if (op_take && addr_i != 2'd3 && (op_kind != vsl_onfi_pkg::OP_ADDR || op_byte != rrow[8*addr_i +: 8])) poll_ok = 1'b0;
  end
  wire reads_data = rop == REQ_READ_ID || rop == REQ_READ_PARAM || rop == REQ_GET_FEAT || rop == REQ_READ ||
                    rop == REQ_READ_OUT;
  wire writes_data = rop == REQ_PROGRAM || rop == REQ_PROGRAM_START || rop == REQ_SET_FEAT;

  logic [8:0] ok;
  always_comb begin
    ok = '1;
    ok[8] = !(after_poll && ((op_take && !poll_again) || (resp_valid && !resp_timeout)) &&
              rop != 4'd12 && !st_now[6]);
    // (A response and the next request may meet: the sequencer is idle again as it answers.)
    ok[1] = !(resp_valid && !open_q) && !(req_take && open_q && !resp_valid);
    ok[2] = !off_q || (op_valid && op_kind == off_kind && op_byte == off_byte && op_count == off_count);
    ok[3] = !(op_take && first_op && op_kind != vsl_onfi_pkg::OP_CE) && !(op_take && !open_q);
    ok[4] = !(phy_dout_valid && e_status && dout_valid) && !(phy_dout_valid && !e_status && !dout_valid);
    ok[5] = !(resp_valid && !resp_timeout && outs != (reads_data ? {1'b0, rlen} : 17'd0));
    ok[6] = !(resp_valid && !resp_timeout && (writes_data ? (ins != {1'b0, rlen} || dins != 2'd1) : dins != 2'd0));
    ok[7] = poll_ok;
  end
`ifndef COVER
  always @* if (started) assert (ok[`PROP]);
`else
  logic [8:0] hit;
  always_comb begin
    hit = '0;
    hit[8] = after_poll && op_take && !poll_again && rop == REQ_READ_OUT;  // a poll ended, data follows
    hit[1] = resp_valid && open_q && rop == REQ_READ;
    hit[2] = off_q && op_valid;
    hit[3] = op_take && first_op && rop == REQ_PROGRAM;
    hit[4] = phy_dout_valid && e_status && open_q && rop == REQ_GET_FEAT;  // a status byte while polling
    hit[5] = resp_valid && !resp_timeout && rop == REQ_READ_ID && outs == 17'd2;
    hit[6] = resp_valid && !resp_timeout && rop == REQ_SET_FEAT && ins == 17'd2;
    hit[7] = op_take && op_kind == vsl_onfi_pkg::OP_ADDR && addr_i == 2'd2 && rop == 4'd6;  // STATUS: a 78h's last row byte
  end
  always @* if (started) assert (!hit[`PROP]);
`endif
endmodule
