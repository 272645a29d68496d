// vsl_onfi_seq: the LUN operation sequencer of one channel. It turns a request (an ONFI
// operation on a LUN) into the bus ops of vsl_onfi_phy, waits for the LUN by polling
// READ STATUS ENHANCED (78h + row: multi-LUN safe, the LUN is also selected for data
// out), and answers with the LUN's final status byte.
//
//   REQ_RESET      FFh, tWB, wait R/B# (the whole target)
//   REQ_READ_ID    90h, address req_col[7:0], tWHR, req_len bytes out
//   REQ_READ_PARAM ECh, 00h, tWB, poll with 70h, 00h, tWHR, req_len bytes out
//   REQ_READ       00h, col x2, row x3, 30h, tWB, poll, 00h, tWHR, req_len bytes out
//   REQ_PROGRAM    80h, col x2, row x3, tADL, req_len bytes in, 10h, tWB, poll
//   REQ_ERASE      60h, row x3, D0h, tWB, poll
//   REQ_STATUS     poll (one 78h read that waits for ready)
//   REQ_SET_FEAT   EFh, address req_col[7:0], tADL, 4 bytes in, tWB, poll with 70h
//   REQ_GET_FEAT   EEh, address req_col[7:0], tWB, poll with 70h, 00h, tWHR, 4 bytes out
// Target-level operations (parameter page, features) poll with READ STATUS (70h: the LUN
// that runs them) rather than wait on R/B#, which a dead LUN on the shared line holds low
// for ever, and before the geometry is known the host cannot form a 78h row.
// Split requests, for a scheduler that interleaves LUNs (start an array operation on one
// LUN, then use the bus for others while it is busy):
//   REQ_READ_START    00h, col x2, row x3, 30h, tWB                 (no wait)
//   REQ_PROGRAM_START 80h, col x2, row x3, tADL, req_len bytes in, 10h, tWB (no wait)
//   REQ_ERASE_START   60h, row x3, D0h, tWB                         (no wait)
//   REQ_POLL_ONCE     78h, row x3, tWHR, one status byte: answered whatever it says
//   REQ_READ_OUT      poll (selects the LUN), 05h, col x2, E0h, tWHR (tCCS), req_len bytes
//                     out: the data of a READ_START whose LUN is ready, from column req_col
//   REQ_RESET_LUN     FAh, row x3, tWB, poll: resets one LUN (aborts its array operation)
//                     without touching the others behind the same CE#
// Data bytes pass straight between the user's streams and the phy; status bytes read
// while polling are the sequencer's (dout_valid is held off for them). A LUN that stays
// busy past rb_timeout cycles of polling, or an R/B# wait that times out, ends the
// request with resp_timeout. resp_status is the last status byte read (FAIL in bit 0);
// 0 for requests that read none.
module vsl_onfi_seq (
    input  logic        clk,
    input  logic        rst_n,
    input  logic [31:0] rb_timeout,
    // requests
    input  logic        req_valid,
    output logic        req_ready,
    input  logic [3:0]  req_op,
    input  logic [23:0] req_row,
    input  logic [15:0] req_col,
    input  logic [15:0] req_len,
    output logic        resp_valid,
    output logic [7:0]  resp_status,
    output logic        resp_timeout,
    // data out as the user sees it (status bytes removed)
    input  logic [7:0]  phy_dout_data,
    input  logic        phy_dout_valid,
    output logic [7:0]  dout_data,
    output logic        dout_valid,
    // the phy's op port
    output logic        op_valid,
    input  logic        op_ready,
    output logic [2:0]  op_kind,
    output logic [7:0]  op_byte,
    output logic [15:0] op_count,
    input  logic        op_done,
    input  logic        op_timeout
);
  localparam logic [3:0] REQ_RESET = 4'd0, REQ_READ_ID = 4'd1, REQ_READ_PARAM = 4'd2, REQ_READ = 4'd3,
                         REQ_PROGRAM = 4'd4, REQ_ERASE = 4'd5, REQ_STATUS = 4'd6, REQ_SET_FEAT = 4'd7,
                         REQ_GET_FEAT = 4'd8, REQ_READ_START = 4'd9, REQ_PROGRAM_START = 4'd10,
                         REQ_ERASE_START = 4'd11, REQ_POLL_ONCE = 4'd12, REQ_READ_OUT = 4'd13,
                         REQ_RESET_LUN = 4'd14;
  localparam logic [7:0] STATUS_RDY = 8'h40;

  // One micro-step: a phy op, or POLL (the 78h loop) or END.
  typedef struct packed {
    logic       poll;
    logic       done;
    logic [2:0] kind;
    logic [7:0] byte_;
    logic       use_len;  // op_count = req_len (else 1)
  } step_t;

  // A bus-op step; fields in declaration order: poll, done, kind, byte_, use_len. (A
  // macro, not a function: yosys infers latches for function results in always_comb.)
`define VSL_SEQ_STEP(KIND, BYTE, USE_LEN) {1'b0, 1'b0, (KIND), (BYTE), (USE_LEN)}
  localparam step_t POLL = {1'b1, 1'b0, 3'd0, 8'd0, 1'b0};
  localparam step_t DONE = {1'b0, 1'b1, 3'd0, 8'd0, 1'b0};

  logic [3:0]  op_q;
  logic [23:0] row_q;
  logic [15:0] col_q, len_q;
  logic [4:0]  pc;   // 0: select the target (CE# low); then step pc - 1 of the request
  logic [4:0]  sp;
  step_t       cur;
  assign sp = pc - 5'd1;

  // The micro-program of each request (pc = 0, 1, ...).
  always_comb begin
    cur = DONE;
    if (pc == 5'd0) cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CE, 8'h00, 1'b0);
    else case (op_q)
      REQ_RESET: case (sp)
        5'd0: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_RESET, 1'b0);
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WB, 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT_RB, 8'd0, 1'b0);
        default: cur = DONE;
      endcase
      REQ_READ_ID: case (sp)
        5'd0: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_READ_ID, 1'b0);
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, col_q[7:0], 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WHR, 1'b0);
        5'd3: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_DOUT, 8'd0, 1'b1);
        default: cur = DONE;
      endcase
      REQ_READ_PARAM, REQ_GET_FEAT: case (sp)
        5'd0: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, op_q == REQ_GET_FEAT ? vsl_onfi_pkg::CMD_GET_FEATURES
                                                                  : vsl_onfi_pkg::CMD_READ_PARAM_PAGE, 1'b0);
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, op_q == REQ_GET_FEAT ? col_q[7:0] : 8'h00, 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WB, 1'b0);
        5'd3: cur = POLL;
        5'd4: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_READ_1, 1'b0);
        5'd5: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WHR, 1'b0);
        5'd6: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_DOUT, 8'd0, 1'b1);
        default: cur = DONE;
      endcase
      REQ_READ, REQ_READ_START: case (sp)
        5'd0: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_READ_1, 1'b0);
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, col_q[7:0], 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, col_q[15:8], 1'b0);
        5'd3: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[7:0], 1'b0);
        5'd4: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[15:8], 1'b0);
        5'd5: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[23:16], 1'b0);
        5'd6: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_READ_2, 1'b0);
        5'd7: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WB, 1'b0);
        5'd8: cur = op_q == REQ_READ_START ? DONE : POLL;
        5'd9: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_READ_1, 1'b0);
        5'd10: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WHR, 1'b0);
        5'd11: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_DOUT, 8'd0, 1'b1);
        default: cur = DONE;
      endcase
      REQ_PROGRAM, REQ_PROGRAM_START: case (sp)
        5'd0: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_PROGRAM_1, 1'b0);
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, col_q[7:0], 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, col_q[15:8], 1'b0);
        5'd3: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[7:0], 1'b0);
        5'd4: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[15:8], 1'b0);
        5'd5: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[23:16], 1'b0);
        5'd6: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_ADL, 1'b0);
        5'd7: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_DIN, 8'd0, 1'b1);
        5'd8: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_PROGRAM_2, 1'b0);
        5'd9: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WB, 1'b0);
        5'd10: cur = op_q == REQ_PROGRAM_START ? DONE : POLL;
        default: cur = DONE;
      endcase
      REQ_ERASE, REQ_ERASE_START: case (sp)
        5'd0: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_ERASE_1, 1'b0);
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[7:0], 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[15:8], 1'b0);
        5'd3: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[23:16], 1'b0);
        5'd4: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_ERASE_2, 1'b0);
        5'd5: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WB, 1'b0);
        5'd6: cur = op_q == REQ_ERASE_START ? DONE : POLL;
        default: cur = DONE;
      endcase
      REQ_RESET_LUN: case (sp)
        5'd0: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_RESET_LUN, 1'b0);
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[7:0], 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[15:8], 1'b0);
        5'd3: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, row_q[23:16], 1'b0);
        5'd4: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WB, 1'b0);
        5'd5: cur = POLL;
        default: cur = DONE;
      endcase
      REQ_READ_OUT: case (sp)
        5'd0: cur = POLL;
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_CHANGE_READ_COL_1, 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, col_q[7:0], 1'b0);
        5'd3: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, col_q[15:8], 1'b0);
        5'd4: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_CHANGE_READ_COL_2, 1'b0);
        5'd5: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WHR, 1'b0);
        5'd6: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_DOUT, 8'd0, 1'b1);
        default: cur = DONE;
      endcase
      REQ_STATUS, REQ_POLL_ONCE: case (sp)
        5'd0: cur = POLL;
        default: cur = DONE;
      endcase
      REQ_SET_FEAT: case (sp)
        5'd0: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_CMD, vsl_onfi_pkg::CMD_SET_FEATURES, 1'b0);
        5'd1: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_ADDR, col_q[7:0], 1'b0);
        5'd2: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_ADL, 1'b0);
        5'd3: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_DIN, 8'd0, 1'b1);
        5'd4: cur = `VSL_SEQ_STEP(vsl_onfi_pkg::OP_WAIT, vsl_onfi_pkg::WAIT_WB, 1'b0);
        5'd5: cur = POLL;
        default: cur = DONE;
      endcase
      default: cur = DONE;
    endcase
  end

  // POLL: 78h, row x3, tWHR, one status byte; again until RDY. Target-level requests
  // poll with 70h instead (no row).
  logic poll70;
  assign poll70 = (op_q == REQ_READ_PARAM || op_q == REQ_GET_FEAT || op_q == REQ_SET_FEAT);
  localparam logic [2:0] P_CMD = 3'd0, P_R0 = 3'd1, P_R1 = 3'd2, P_R2 = 3'd3, P_WHR = 3'd4, P_READ = 3'd5;

  typedef enum logic [1:0] {S_IDLE, S_ISSUE, S_WAIT, S_RESP} state_e;
  state_e      state;
  logic [2:0]  pstep;
  logic        in_poll;
  logic [31:0] polled;   // cycles spent polling this request
  logic        timed_out;
  logic [7:0]  status_q;

  assign req_ready = (state == S_IDLE);
  // The poll's status byte: this cycle's if it lands now, else the last one read.
  logic [7:0] status_now;
  assign status_now = (in_poll && phy_dout_valid) ? phy_dout_data : status_q;
  // Status bytes read while polling are the sequencer's.
  assign dout_data  = phy_dout_data;
  assign dout_valid = phy_dout_valid && !in_poll;

  always_comb begin
    op_kind  = cur.kind;
    op_byte  = cur.byte_;
    op_count = cur.use_len ? len_q : 16'd1;
    if (in_poll) begin
      op_count = 16'd1;
      case (pstep)
        P_CMD:   begin
          op_kind = vsl_onfi_pkg::OP_CMD;
          op_byte = poll70 ? vsl_onfi_pkg::CMD_READ_STATUS : vsl_onfi_pkg::CMD_READ_STATUS_ENH;
        end
        P_R0:    begin op_kind = vsl_onfi_pkg::OP_ADDR; op_byte = row_q[7:0]; end
        P_R1:    begin op_kind = vsl_onfi_pkg::OP_ADDR; op_byte = row_q[15:8]; end
        P_R2:    begin op_kind = vsl_onfi_pkg::OP_ADDR; op_byte = row_q[23:16]; end
        P_WHR:   begin op_kind = vsl_onfi_pkg::OP_WAIT; op_byte = vsl_onfi_pkg::WAIT_WHR; end
        default: begin op_kind = vsl_onfi_pkg::OP_DOUT; op_byte = 8'd0; end
      endcase
    end
  end
  // Only bus steps reach the engine: the POLL and DONE markers are the sequencer's own (a
  // marker offered as an op would put a stray 00h command cycle on the bus).
  assign op_valid = (state == S_ISSUE) && (in_poll || (!cur.done && !cur.poll));

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      state        <= S_IDLE;
      op_q         <= REQ_RESET;
      row_q        <= 24'd0;
      col_q        <= 16'd0;
      len_q        <= 16'd0;
      pc           <= 5'd0;
      pstep        <= P_CMD;
      in_poll      <= 1'b0;
      polled       <= 32'd0;
      timed_out    <= 1'b0;
      status_q     <= 8'd0;
      resp_valid   <= 1'b0;
      resp_status  <= 8'd0;
      resp_timeout <= 1'b0;
    end else begin
      resp_valid <= 1'b0;
      if (in_poll) polled <= polled + 32'd1;
      if (in_poll && phy_dout_valid) status_q <= phy_dout_data;
      case (state)
        S_IDLE: begin
          if (req_valid) begin
            op_q      <= req_op;
            row_q     <= req_row;
            col_q     <= req_col;
            len_q     <= req_len;
            pc        <= 5'd0;
            in_poll   <= 1'b0;
            polled    <= 32'd0;
            timed_out <= 1'b0;
            status_q  <= 8'd0;
            state     <= S_ISSUE;
          end
        end
        S_ISSUE: begin
          if (cur.done && !in_poll) begin
            state <= S_RESP;
          end else if (cur.poll && !in_poll) begin
            in_poll <= 1'b1;
            pstep   <= P_CMD;
          end else if (op_ready) begin
            state <= S_WAIT;
          end
        end
        S_WAIT: begin
          if (op_done) begin
            if (op_timeout) timed_out <= 1'b1;
            state <= S_ISSUE;
            if (in_poll) begin
              if (pstep == P_READ) begin
                // The status byte lands before op_done or with it (the phy's last byte may
                // come in the done cycle: formal onfi_phy DOUT_EXACT): judge the newest.
                if ((status_now & STATUS_RDY) != 8'd0 || op_q == REQ_POLL_ONCE) begin
                  in_poll <= 1'b0;
                  pc      <= pc + 5'd1;
                end else if (rb_timeout != 32'd0 && polled >= rb_timeout) begin
                  timed_out <= 1'b1;
                  state     <= S_RESP;
                end else begin
                  pstep <= P_CMD;
                end
              end else begin
                pstep <= (poll70 && pstep == P_CMD) ? P_WHR : pstep + 3'd1;
              end
            end else if (op_timeout) begin
              state <= S_RESP;
            end else begin
              pc <= pc + 5'd1;
            end
          end
        end
        default: begin  // S_RESP
          resp_valid   <= 1'b1;
          resp_status  <= status_q;
          resp_timeout <= timed_out;
          in_poll      <= 1'b0;
          state        <= S_IDLE;
        end
      endcase
    end
  end
endmodule
`undef VSL_SEQ_STEP
