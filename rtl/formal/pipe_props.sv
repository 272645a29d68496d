// Formal properties of vsl_pipe's bookkeeping: descriptors in, completions out
// (docs/formal.md).
//
// Abstraction: under the pipe are not the real channel, DMA and ECC but the abstract
// blocks of rtl/formal/pipe_abstract.sv (their handshakes as proved of the real ones,
// everything else free: any delay, any status, any error, any data). The pipe is built
// with two LUNs and a 16-word page buffer (8 words of page, the 8 staging words) and one
// accumulator: the bookkeeping does not depend on the sizes, and a descriptor's sizes are
// free either way (too large ones complete INVALID).
// Environment: reset low in the first cycle only; the rings at address 0, each of 2 or 4
// entries, fixed from the first cycle (software changes them only while the pipe is
// stopped). The host is this harness: it submits a descriptor (SQ_TAIL + 1) at any time
// while the ring has room for it (one entry stays empty: SQ_TAIL + 1 == SQ_HEAD is full)
// and consumes a posted completion (CQ_HEAD + 1) at any time; descriptor contents (the
// DMA's data) are free. run, poll_gap, lun_reset, the ownership pulses (claims, renewals,
// releases, of any host and generation) and the channel's registers are free in every
// cycle.
// One property per run (`PROP):
//   1 ACCOUNT   every descriptor taken off the ring is in exactly one place until its one
//               completion: fetched - completed == the slots in use + the descriptor
//               waiting for its slot + the failed fetch waiting for its completion + the
//               one being read out of the staging area (so no completion is lost, none is
//               posted twice and none without a descriptor, a failed fetch's included)
//   2 CQ_ROOM   the pipe never overwrites a completion the host has not consumed: at
//               most CQ_SIZE - 1 are unconsumed, and CQ_TAIL moves by one per completion
//   3 SQ_BOUND  the pipe takes only descriptors the host submitted: never more fetched
//               than submitted, and SQ_HEAD moves by one per descriptor taken
// Scheduling (4-6) against a model of the target kept from the channel's requests and
// answers: a LUN is busy from the request that starts its array operation (READ_START,
// PROGRAM_START, ERASE_START) until a status poll (POLL_ONCE, STATUS) answers ready, or a
// RESET LUN of it (or a target RESET) is done; a LUN whose poll, RESET LUN or target RESET
// timed out is stuck (its state unknown) until one of those answers ready. For these
// the pipe's own R/B# limit is off (rb_timeout 0): the channel's timeouts stand for it.
//   4 NO_BUSY_CMD  no array or data-out request (READ_START, PROGRAM_START, ERASE_START,
//                  READ_OUT) to a LUN that is busy or stuck
//   5 TARGET_IDLE  no target-level request (READ ID, READ PARAMETER PAGE, GET/SET
//                  FEATURES, target RESET) while a LUN is busy (a stuck LUN does not hold
//                  them back: the pipe's documented choice, so a dead die cannot)
//   6 POLL_FAIR    two status polls of busy LUNs in a row never go to the same LUN while
//                  the other has been busy since before the first of them
// Ownership (dual-host cards), over claims, renewals and releases free in every cycle:
//   7 GEN_FENCE    once the pipe has been claimed, no command starts (leaves its slot for
//                  the channel) unless its descriptor's generation is the owner's at that
//                  moment and a host holds the pipe: a descriptor fetched under one owner
//                  and still waiting when another claims is fenced, never sent to a die
//                  (IDENTIFY, READ ID and PARAMETER PAGE, answers any host)
// Completions' identity:
//   8 CPL_TAG      every completion the pipe writes names the command it answers: the
//                  tag the descriptor carried when it took its slot and that slot's LUN
//                  (a failed fetch's: tag FFFFh, LUN FFh, as documented)
// Aborts (lun_reset free in every cycle):
//   9 ABORT        once lun_reset has pulsed for a LUN whose slot holds a command, the
//                  pipe decides no more channel requests for that command but RESET LUN:
//                  one that had not reached the die never does (a PROGRAM stopped while
//                  its data came in, a command not started), one under way is only reset.
//                  The pulse counts from the cycle after it (a request the pipe chose in
//                  the pulse's own cycle went out on what it knew then); a pulse while the
//                  slot is free, or in the cycle a descriptor takes it, aborts nothing.
`ifndef PROP
`define PROP 1
`endif
module pipe_props (
    input logic        clk,
    input logic        run,
    input logic        sq_big,      // the submission ring has 4 entries (else 2); latched
    input logic        cq_big,      // the completion ring has 4 entries (else 2); latched
    input logic        submit,      // the host submits a descriptor this cycle (if there is room)
    input logic        consume,     // the host consumes a completion this cycle (if one is posted)
    input logic [31:0] poll_gap,
    input logic [1:0]  lun_reset,
    input logic        own_claim,
    input logic [15:0] own_claim_host,
    input logic        own_claim_force,
    input logic        own_renew,
    input logic        own_release,
    input logic [15:0] own_arg_gen,
    input logic [31:0] own_lease,
    input logic [31:0] timing0,
    input logic [31:0] timing1,
    input logic [31:0] timing2,
    input logic [31:0] rb_timeout
);
  logic started = 1'b0;
  always_ff @(posedge clk) started <= 1'b1;
  wire rst_n = started;

  // --- the rings' geometry, fixed from the first cycle ---
  logic sq4 = 1'b0, cq4 = 1'b0;
  always_ff @(posedge clk) begin
    if (!started) begin
      sq4 <= sq_big;
      cq4 <= cq_big;
    end
  end
  wire [31:0] sq_size = sq4 ? 32'd4 : 32'd2;
  wire [31:0] cq_size = cq4 ? 32'd4 : 32'd2;
  wire [3:0]  sq_room = sq4 ? 4'd3 : 4'd1;  // entries the host may have outstanding
  wire [3:0]  cq_room = cq4 ? 4'd3 : 4'd1;

  // --- the host: counts mod 16 (at most 4 outstanding either way) ---
  // Posted completions are the pipe's own count (COMPLETIONS), mod 16.
  logic [31:0] completions;
  logic [3:0] submitted = 4'd0, fetched = 4'd0, consumed = 4'd0;
  wire [3:0] posted = completions[3:0];
  wire [3:0] in_sq = submitted - fetched;   // submitted, not yet taken by the pipe
  wire [3:0] in_cq = posted - consumed;     // posted, not yet consumed
  wire do_submit  = started && submit && in_sq < sq_room;
  wire do_consume = started && consume && in_cq != 4'd0;
  wire [31:0] sq_tail = {28'd0, submitted} & (sq_size - 32'd1);
  wire [31:0] cq_head = {28'd0, consumed} & (cq_size - 32'd1);

  logic [31:0] sq_head, cq_tail, fenced, own_lease_left;
  logic [15:0] own_host, own_gen;
  logic        own_granted, own_renewed, running, ring_error, dma_error, idle, cq_event, error_event, chan_busy;
  logic [5:0]  f_slots;
  logic        f_p_valid, f_ff_valid, f_fetch, f_fetch_rd, f_cpl_ff, f_idle;
  logic        f_cur, f_rq_take, f_seq, f_rs_valid, f_rs_timeout, f_rs_rdy;
  logic [3:0]  f_rq_op;
  logic        f_start, f_start_own_host;
  logic [15:0] f_start_gen, f_start_own_gen;
  logic [7:0]  f_start_op;
  logic        f_take, f_take_slot, f_cpl0;
  logic [15:0] f_take_tag;
  logic [63:0] f_cpl_word;
  logic [31:0] f_slot_tags;
  logic [63:0] m_awaddr, m_wdata, m_araddr;
  logic [7:0]  m_awlen, m_wstrb, m_arlen, dq_o;
  logic [2:0]  m_awsize, m_arsize;
  logic [1:0]  m_awburst, m_arburst;
  logic        m_awvalid, m_wlast, m_wvalid, m_bready, m_arvalid, m_rready;
  logic        ce_n, cle, ale, we_n, re_n, wp_n, dq_oe;
  vsl_pipe #(.LUNS(2), .BUF_WORDS(16), .ACCS(1)) dut (
      .clk, .rst_n, .run, .sq_base(64'd0), .sq_size, .sq_tail, .cq_base(64'd0), .cq_size, .cq_head, .poll_gap,
      .lun_reset, .own_claim, .own_claim_host, .own_claim_force, .own_renew, .own_release, .own_arg_gen,
      .own_lease, .own_host, .own_gen, .own_lease_left, .own_granted, .own_renewed, .fenced, .sq_head, .cq_tail,
      .completions, .running, .ring_error, .dma_error, .idle, .cq_event, .error_event,
      .timing0, .timing1, .timing2, .rb_timeout, .chan_busy,
      .m_awaddr, .m_awlen, .m_awsize, .m_awburst, .m_awvalid, .m_awready(1'b0), .m_wdata, .m_wstrb, .m_wlast,
      .m_wvalid, .m_wready(1'b0), .m_bresp(2'd0), .m_bvalid(1'b0), .m_bready, .m_araddr, .m_arlen, .m_arsize,
      .m_arburst, .m_arvalid, .m_arready(1'b0), .m_rdata(64'd0), .m_rresp(2'd0), .m_rlast(1'b0), .m_rvalid(1'b0),
      .m_rready, .ce_n, .cle, .ale, .we_n, .re_n, .wp_n, .dq_o, .dq_oe, .dq_i(8'd0), .rb_n(1'b1),
      .f_slots, .f_p_valid, .f_ff_valid, .f_fetch, .f_fetch_rd, .f_cpl_ff, .f_idle,
      .f_cur, .f_rq_take, .f_seq, .f_rq_op, .f_rs_valid, .f_rs_timeout, .f_rs_rdy,
      .f_start, .f_start_gen, .f_start_op, .f_start_own_gen, .f_start_own_host,
      .f_take, .f_take_slot, .f_take_tag, .f_cpl0, .f_cpl_word, .f_slot_tags);

  // --- monitors ---
  logic [31:0] completions_q = 32'd0, sq_head_q = 32'd0, cq_tail_q = 32'd0;
  logic        cpl_ff_q = 1'b0;  // the completion posted last cycle was a failed fetch's
  wire post = completions != completions_q;
  always_ff @(posedge clk) begin
    completions_q <= completions;
    cpl_ff_q <= f_cpl_ff;
    sq_head_q <= sq_head;
    cq_tail_q <= cq_tail;
    if (do_submit) submitted <= submitted + 4'd1;
    if (started && f_fetch) fetched <= fetched + 4'd1;
    if (do_consume) consumed <= consumed + 4'd1;
  end
  wire [3:0] occupied = {3'd0, f_slots[2:0] != 3'd0} + {3'd0, f_slots[5:3] != 3'd0} + {3'd0, f_p_valid} +
                        {3'd0, f_ff_valid} + {3'd0, f_fetch_rd};
  wire [31:0] sq_mask = sq_size - 32'd1, cq_mask = cq_size - 32'd1;

  // --- the target model (properties 4-6) ---
  localparam logic [3:0] RQ_RESET = 4'd0, RQ_READ_ID = 4'd1, RQ_READ_PARAM = 4'd2, RQ_STATUS = 4'd6,
                         RQ_SET_FEAT = 4'd7, RQ_GET_FEAT = 4'd8, RQ_READ_START = 4'd9,
                         RQ_PROGRAM_START = 4'd10, RQ_ERASE_START = 4'd11, RQ_POLL_ONCE = 4'd12,
                         RQ_READ_OUT = 4'd13, RQ_RESET_LUN = 4'd14;
  logic [1:0] busy = 2'b00, stuck = 2'b00;
  logic       q_lun = 1'b0;          // the open request's LUN and op
  logic [3:0] q_op = 4'd0;
  logic       lastp_valid = 1'b0, lastp = 1'b0, other_waits = 1'b0;  // the last busy poll
  wire take_start  = f_rq_take && (f_rq_op == RQ_READ_START || f_rq_op == RQ_PROGRAM_START ||
                                   f_rq_op == RQ_ERASE_START);
  wire take_lunlvl = take_start || (f_rq_take && f_rq_op == RQ_READ_OUT);
  wire take_target = f_rq_take && (f_rq_op == RQ_READ_ID || f_rq_op == RQ_READ_PARAM || f_rq_op == RQ_GET_FEAT ||
                                   f_rq_op == RQ_SET_FEAT || f_rq_op == RQ_RESET);
  wire busy_poll   = f_rq_take && f_rq_op == RQ_POLL_ONCE && busy[f_cur];
  wire ans_ready   = f_rs_valid && !f_rs_timeout && f_rs_rdy;
  wire ans_poll    = f_rs_valid && (q_op == RQ_POLL_ONCE || q_op == RQ_STATUS);
  logic [1:0] busy_n, stuck_n;
  always_comb begin
    busy_n = busy; stuck_n = stuck;
    if (take_start) begin busy_n[f_cur] = 1'b1; stuck_n[f_cur] = 1'b0; end
    if (ans_poll && ans_ready) begin busy_n[q_lun] = 1'b0; stuck_n[q_lun] = 1'b0; end
    if (ans_poll && f_rs_timeout && (busy[q_lun] || stuck[q_lun])) begin busy_n[q_lun] = 1'b0; stuck_n[q_lun] = 1'b1; end
    if (f_rs_valid && q_op == RQ_RESET_LUN) begin busy_n[q_lun] = 1'b0; stuck_n[q_lun] = f_rs_timeout; end
    if (f_rs_valid && q_op == RQ_RESET) begin busy_n = 2'b00; stuck_n = f_rs_timeout ? 2'b11 : 2'b00; end
  end
  always_ff @(posedge clk) begin
    if (started) begin
      busy <= busy_n;
      stuck <= stuck_n;
      if (f_rq_take) begin q_lun <= f_cur; q_op <= f_rq_op; end
      if (busy_poll) begin
        lastp_valid <= 1'b1; lastp <= f_cur; other_waits <= busy[!f_cur];
      end else if (!busy_n[!lastp]) begin
        other_waits <= 1'b0;
      end
    end
  end
  always @* if (started && `PROP >= 4 && `PROP <= 6) assume (rb_timeout == 32'd0);

  // --- the tag each slot took (property 8) ---
  logic [15:0] slot_tag [2];
  initial begin slot_tag[0] = 16'd0; slot_tag[1] = 16'd0; end
  always_ff @(posedge clk) if (started && f_take) slot_tag[f_take_slot] <= f_take_tag;
  // What each slot holds now (a take shows the cycle after it, with the slot's new tag).
  wire [15:0] tag_now0 = f_take && !f_take_slot ? f_take_tag : slot_tag[0];
  wire [15:0] tag_now1 = f_take && f_take_slot ? f_take_tag : slot_tag[1];
  wire [15:0] cpl_tag = f_cpl_word[15:0];
  wire [7:0]  cpl_lun = f_cpl_word[55:48];
  // --- aborts (property 9): which slots' occupants lun_reset has aborted ---
  // abt: pulses before this cycle since the slot's last take (a take drops the pulses up
  // to its own cycle: they were for no command); abt_q: the same one cycle earlier, what
  // the pipe knew when it chose the request it offers from this cycle on (seq_enter).
  logic [1:0] abt = 2'b00, abt_q = 2'b00, began = 2'b00, sent = 2'b00;
  logic       seq_q = 1'b0;
  wire [1:0] take_clr = f_take ? (f_take_slot ? 2'b10 : 2'b01) : 2'b00;
  wire [1:0] abt_now  = abt & ~take_clr;
  wire       seq_enter = f_seq && !seq_q;
  always_ff @(posedge clk) begin
    if (started) begin
      abt   <= abt_now | lun_reset;
      abt_q <= abt_now;
      seq_q <= f_seq;
      began <= (began & ~take_clr) | (f_start ? (f_cur ? 2'b10 : 2'b01) : 2'b00);
      sent  <= (sent & ~take_clr) | (seq_enter && f_rq_op != RQ_POLL_ONCE ? (f_cur ? 2'b10 : 2'b01) : 2'b00);
    end
  end
  wire start_identify = f_start_op == 8'd6 || f_start_op == 8'd7;  // READ ID, READ PARAMETER PAGE
  wire start_owned    = f_start_own_gen != 16'd0;                 // the pipe has been claimed
  logic [9:0] ok;
  always_comb begin
    ok = '1;
    ok[9] = !(seq_enter && abt_q[f_cur] && f_rq_op != RQ_RESET_LUN);
    // (With the helper invariant that each slot's tag is the one it took, which makes the
    // property inductive: pdr did not close it alone in 300 s.)
    ok[8] = !(f_cpl0 && (f_cpl_ff ? (cpl_tag != 16'hFFFF || cpl_lun != 8'hFF)
                                  : (cpl_tag != (f_cur ? tag_now1 : tag_now0) || cpl_lun != {7'd0, f_cur}))) &&
            f_slot_tags[15:0] == tag_now0 && f_slot_tags[31:16] == tag_now1;
    ok[7] = !(f_start && start_owned && !start_identify && (f_start_gen != f_start_own_gen || !f_start_own_host));
    ok[4] = !(take_lunlvl && (busy[f_cur] || stuck[f_cur]));
    ok[5] = !(take_target && busy != 2'b00);
    ok[6] = !(busy_poll && lastp_valid && lastp == f_cur && other_waits);
    ok[1] = fetched - posted == occupied && (!post || completions == completions_q + 32'd1);
    ok[2] = in_cq <= cq_room && (cq_tail == cq_tail_q || cq_tail == ((cq_tail_q + 32'd1) & cq_mask)) &&
            (cq_tail == cq_tail_q) == !post;
    ok[3] = in_sq <= sq_room && (sq_head == sq_head_q || sq_head == ((sq_head_q + 32'd1) & sq_mask));
  end
`ifndef COVER
  always @* if (started) assert (ok[`PROP]);
`else
  logic [9:0] hit;
  logic       was_busy = 1'b0;  // some LUN has been busy (for the covers)
  always_ff @(posedge clk) if (started && busy != 2'b00) was_busy <= 1'b1;
  always_comb begin
    hit = '0;
    hit[4] = take_lunlvl && was_busy && busy == 2'b00;          // a command after a busy spell ended
    hit[5] = take_target && was_busy;                           // a target-level one after it
    hit[6] = busy_poll && lastp_valid && lastp != f_cur && busy[lastp];  // polls alternate
    // A command the pipe had begun (its data coming in) but not sent to the die completes
    // ABORTED: the new commit-point path.
    hit[9] = f_cpl0 && !f_cpl_ff && began[f_cur] && !sent[f_cur] && f_cpl_word[23:16] == 8'd5;
    hit[8] = f_cpl0 && !f_cpl_ff && f_cur && tag_now1 != tag_now0;  // slot 1 answers, the tags differ
    hit[7] = f_start && start_owned && !start_identify && f_start_own_gen != 16'd1;  // a start under a later owner
    hit[1] = post && cpl_ff_q;                  // a failed fetch's completion goes out
    hit[2] = post && in_cq == cq_room && cq4;   // the 4-entry completion ring is full
    hit[3] = f_fetch && in_sq == 4'd2 && sq4;   // a fetch with two more submitted behind it
  end
  always @* if (started) assert (!hit[`PROP]);
`endif
endmodule
