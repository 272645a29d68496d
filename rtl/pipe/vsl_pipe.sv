// vsl_pipe: one pipe of the controller, an independent device to the host: its
// submission and completion rings in device memory, its channel (four LUNs behind one
// CE#), its page buffer, its ECC engine and its own AXI4 master (DMA context).
//
// Host protocol (docs/rtl.md, "Pipes"; the host side is vsl/hw/ctrl_pipe.h):
// - The host writes 64-byte descriptors into the submission ring (SQ_BASE, SQ_SIZE
//   entries) and the index after the last one into SQ_TAIL (the doorbell). The pipe
//   fetches them in ring order (SQ_HEAD) while `run`.
// - Descriptor, little-endian 64-bit words:
//     w0: [7:0] opcode, [31:16] tag, [39:32] LUN;  w1: [23:0] row, [47:32] column,
//     [63:48] length;  w2: data address;  w3: metadata address;
//     w4: [15:0] page data bytes, [31:16] metadata bytes, [47:32] spare bytes,
//     [63:48] window bytes;
//     w5: [15:0] window offset, [23:16] accumulator, [25:24] accumulator operation
//     (0 none, 1 add, 2 take, 3 peek), [26] window on, [27] no metadata out,
//     [63:48] CRC offset (take / peek).
// - Windows (register map 1.2; how the host copies pages inside the card): a READ with
//   a window writes only `window bytes` of the corrected data area from `window offset`
//   to the data address (a gathered copy's segment, into card memory), and with "no
//   metadata out" no metadata; a PROGRAM with a window fetches only the first `window
//   bytes` of its data area and zeroes the rest (0: all zeros, nothing fetched).
// - Accumulators (ACCS page-sized XOR registers of data and metadata: FlashBack parity
//   formed in the controller). A PROGRAM's operation, once its data and metadata are in
//   the page buffer and before they are encoded: add XORs them into the accumulator;
//   take and peek XOR the accumulator's data area into the page's, and, with column
//   (meta offset, a multiple of 8) and length (meta bytes) set, the accumulator's first
//   `length` metadata bytes into the page's metadata at `column`, then write the CRC-32C
//   of the metadata's first `CRC offset` bytes (a multiple of 4) at `CRC offset`; take
//   then zeroes the accumulator. ACC_CLEAR zeroes one. Operations take effect in the
//   order the pipe starts its commands (a LUN's slot at a time), so a host orders the
//   operations on one accumulator itself (vsl/hw/ctrl_pipe.h).
// - Each command ends with one 16-byte completion at CQ_TAIL (then CQ_TAIL advances and
//   cq_event pulses): w0: [15:0] tag, [23:16] status code, [31:24] the LUN's last status
//   byte, [47:32] bits corrected, [55:48] LUN, [63] phase (1 on the first pass round the
//   ring, flipping at each wrap); w1: the pipe's cycle counter. The host consumes
//   completions and writes CQ_HEAD; the pipe never overwrites an unconsumed one.
// - The pipe holds one command per LUN (a slot). A descriptor for a LUN whose slot is
//   taken waits at the head of the ring, so a host keeps at most one command per LUN in
//   the ring to let later ones overtake.
// - Commands on different LUNs overlap: READ, PROGRAM and ERASE start the array
//   operation and free the bus; busy LUNs are polled with READ STATUS ENHANCED every
//   poll_gap cycles; a read's data comes out (CHANGE READ COLUMN from column 0, whole
//   page with spare) when its LUN is ready and the page buffer is free. A PROGRAM's data
//   and metadata are fetched into the page buffer, the ECC writes the spare, and the page
//   goes to the LUN. A READ's page is decoded in the buffer and its data and metadata
//   written to the descriptor's addresses.
// - A LUN busy longer than rb_timeout cycles ends its command with TIMEOUT (a dead die
//   is reported, never waited on). lun_reset[l] aborts LUN l's command: one that has not
//   reached the die yet never does (a PROGRAM whose data is still coming in stops before
//   its accumulator operation, one aborted later before its page transfer, leaving the
//   accumulator as a failed program does; a SET FEATURES before its parameters go out),
//   one under way on the die gets RESET LUN (FAh) on that LUN alone; either completes
//   ABORTED. After a TIMEOUT the LUN gets
//   no new command while it still reads busy: each one is preceded by a status poll and
//   completes TIMEOUT at once if the LUN has not come back (RESET and RESET LUN go to it
//   regardless).
// - Ownership (dual-host cards; docs/raw-flash-contract.md "Ownership"): owner host id,
//   a 16-bit generation bumped by every granted claim, and a lease counted down in units
//   of 256 cycles (own_lease 0: no expiry). own_claim is granted when nobody holds the
//   pipe, the lease ran out, the same host claims, or with force. Once claimed (generation
//   not 0), a descriptor whose generation (w5[47:32]) is not the owner's, or any
//   descriptor while the pipe is released, completes FENCED with nothing done; at a
//   granted claim or a release the commands still waiting for their start (slot NEW) are
//   fenced too. A command already started finishes. IDENTIFY (READ ID, PARAMETER PAGE)
//   answers any host.
// - Errors: an unknown opcode, a LUN out of range or sizes the buffer cannot hold (or
//   not multiples of 8) complete INVALID with nothing done; an AXI error response
//   completes the command DMA_ERROR and sets dma_error (a descriptor whose own fetch
//   failed too: its completion has LUN 0xFF, tag 0xFFFF and the descriptor's SQ index in
//   place of the corrected bits, as its tag was never read); a ring size that is not a power
//   of two (or zero) sets ring_error and the pipe does not run.
// The page buffer is one block RAM of 64-bit words; its last 8 words stage descriptors
// and completions.
module vsl_pipe #(
    parameter int unsigned LUNS = 4,
    parameter int unsigned BUF_WORDS = 2304,  // 18 KiB: a 16 KiB page, 2 KiB spare, staging
    parameter int unsigned ACCS = 16          // accumulators, each a page and its spare
) (
    input  logic        clk,
    input  logic        rst_n,
    // registers (PIPE block)
    input  logic        run,
    input  logic [63:0] sq_base,
    input  logic [31:0] sq_size,
    input  logic [31:0] sq_tail,
    input  logic [63:0] cq_base,
    input  logic [31:0] cq_size,
    input  logic [31:0] cq_head,
    input  logic [31:0] poll_gap,
    input  logic [LUNS-1:0] lun_reset,   // pulses
    // ownership (PIPE block OWNER registers): claim/renew/release are pulses
    input  logic        own_claim,
    input  logic [15:0] own_claim_host,
    input  logic        own_claim_force,
    input  logic        own_renew,
    input  logic        own_release,
    input  logic [15:0] own_arg_gen,      // renew/release: the caller's generation
    input  logic [31:0] own_lease,        // lease length, units of 256 cycles (0: none)
    output logic [15:0] own_host,
    output logic [15:0] own_gen,
    output logic [31:0] own_lease_left,
    output logic        own_granted,      // the last claim was granted
    output logic        own_renewed,      // the last renewal was accepted
    output logic [31:0] fenced,           // commands completed FENCED
    output logic [31:0] sq_head,
    output logic [31:0] cq_tail,
    output logic [31:0] completions,
    output logic        running,
    output logic        ring_error,
    output logic        dma_error,
    output logic        idle,
    output logic        cq_event,        // pulse per completion posted
    output logic        error_event,     // pulse: a LUN timed out or a DMA failed
    // its channel's registers (CHAN block)
    input  logic [31:0] timing0,
    input  logic [31:0] timing1,
    input  logic [31:0] timing2,
    input  logic [31:0] rb_timeout,
    output logic        chan_busy,
    // AXI4 master
    output logic [63:0] m_awaddr,
    output logic [7:0]  m_awlen,
    output logic [2:0]  m_awsize,
    output logic [1:0]  m_awburst,
    output logic        m_awvalid,
    input  logic        m_awready,
    output logic [63:0] m_wdata,
    output logic [7:0]  m_wstrb,
    output logic        m_wlast,
    output logic        m_wvalid,
    input  logic        m_wready,
    input  logic [1:0]  m_bresp,
    input  logic        m_bvalid,
    output logic        m_bready,
    output logic [63:0] m_araddr,
    output logic [7:0]  m_arlen,
    output logic [2:0]  m_arsize,
    output logic [1:0]  m_arburst,
    output logic        m_arvalid,
    input  logic        m_arready,
    input  logic [63:0] m_rdata,
    input  logic [1:0]  m_rresp,
    input  logic        m_rlast,
    input  logic        m_rvalid,
    output logic        m_rready,
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
`ifdef FORMAL
    ,
    // The formal harness's view of the bookkeeping (rtl/formal/pipe_props.sv); not in a
    // synthesized or simulated build.
    output logic [LUNS*3-1:0] f_slots,     // each slot's state
    output logic              f_p_valid,   // a fetched descriptor waits for its slot
    output logic              f_ff_valid,  // a failed fetch waits for its completion
    output logic              f_fetch,     // this cycle a descriptor is taken off the ring
    output logic              f_fetch_rd,  // one is being read out of the staging area
    output logic              f_cpl_ff,    // the completion being written is a failed fetch's
    output logic              f_idle,      // the main state machine is idle
    output logic [((LUNS > 1) ? $clog2(LUNS) : 1)-1:0] f_cur,  // the LUN the channel request is for
    output logic              f_rq_take,   // the channel takes a request (f_rq_op) this cycle
    output logic              f_seq,       // a request (f_rq_op, for LUN f_cur) is offered
    output logic [3:0]        f_rq_op,
    output logic              f_rs_valid,  // the channel answers: timed out, or its status byte
    output logic              f_rs_timeout,
    output logic              f_rs_rdy,    // says the LUN is ready (bit 6)
    // Last cycle the main state machine took a NEW slot's command to start it: its
    // descriptor's generation and opcode, and the owner (generation, host held) then.
    output logic              f_start,
    output logic [15:0]       f_start_gen,
    output logic [7:0]        f_start_op,
    output logic [15:0]       f_start_own_gen,
    output logic              f_start_own_host,
    // Last cycle a fetched descriptor took slot f_take_slot, with tag f_take_tag; this
    // cycle a completion's first word (f_cpl_word, as formed for the buffer) is staged.
    output logic              f_take,
    output logic [((LUNS > 1) ? $clog2(LUNS) : 1)-1:0] f_take_slot,
    output logic [15:0]       f_take_tag,
    output logic              f_cpl0,
    output logic [63:0]       f_cpl_word,
    output logic [LUNS*16-1:0] f_slot_tags  // each slot's tag (a helper invariant's)
`endif
);
  localparam int unsigned AW = $clog2(BUF_WORDS);
  localparam int unsigned LW = (LUNS > 1) ? $clog2(LUNS) : 1;
  localparam logic [AW-1:0] DESC_W = AW'(BUF_WORDS - 8);  // 6 descriptor words
  localparam logic [AW-1:0] CPL_W  = AW'(BUF_WORDS - 2);  // 2 completion words
  localparam logic [15:0] PAGE_MAX = 16'((BUF_WORDS - 8) * 8);
  localparam int unsigned ACC_WORDS = BUF_WORDS - 8;  // a page and its spare
  localparam int unsigned NACC = (ACCS > 0) ? ACCS : 1;
  localparam int unsigned XW = $clog2(NACC * ACC_WORDS);

  // Opcodes and completion status codes (vsl/hw/descriptor.h has the same).
  localparam logic [7:0] OPC_READ = 8'd1, OPC_PROGRAM = 8'd2, OPC_ERASE = 8'd3, OPC_RESET = 8'd4,
                         OPC_RESET_LUN = 8'd5, OPC_READ_ID = 8'd6, OPC_READ_PARAM = 8'd7,
                         OPC_GET_FEAT = 8'd8, OPC_SET_FEAT = 8'd9, OPC_STATUS = 8'd10, OPC_ACC_CLEAR = 8'd11;
  localparam logic [1:0] ACC_NONE = 2'd0, ACC_ADD = 2'd1, ACC_PEEK = 2'd3;  // 2: take
  localparam logic [7:0] ST_OK = 8'd0, ST_UNCORRECTABLE = 8'd1, ST_PROGRAM_FAIL = 8'd2, ST_ERASE_FAIL = 8'd3,
                         ST_TIMEOUT = 8'd4, ST_ABORTED = 8'd5, ST_INVALID = 8'd6, ST_DMA_ERROR = 8'd7,
                         ST_FAIL = 8'd8, ST_FENCED = 8'd9;
  // Sequencer requests (vsl_onfi_seq).
  localparam logic [3:0] RQ_RESET = 4'd0, RQ_READ_ID = 4'd1, RQ_READ_PARAM = 4'd2, RQ_STATUS = 4'd6,
                         RQ_SET_FEAT = 4'd7, RQ_GET_FEAT = 4'd8, RQ_READ_START = 4'd9,
                         RQ_PROGRAM_START = 4'd10, RQ_ERASE_START = 4'd11, RQ_POLL_ONCE = 4'd12,
                         RQ_READ_OUT = 4'd13, RQ_RESET_LUN = 4'd14;
  // Slot states.
  localparam logic [2:0] SL_FREE = 3'd0, SL_NEW = 3'd1, SL_BUSY = 3'd2, SL_READY = 3'd3, SL_CPL = 3'd4;

  // ---- cycle counter ----
  logic [63:0] cycles;
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) cycles <= 64'd0;
    else cycles <= cycles + 64'd1;
  end

  // ---- page buffer: one write port, one read port with a cycle of latency ----
  logic [63:0]   pbuf [BUF_WORDS];
  logic          b_we;
  logic [AW-1:0] b_waddr, b_raddr;
  logic [63:0]   b_wdata, b_rdata;
  logic [7:0]    b_wbe;
  always_ff @(posedge clk) begin
    if (b_we) begin
      for (int bi = 0; bi < 8; bi++) if (b_wbe[bi]) pbuf[b_waddr][8*bi +: 8] <= b_wdata[8*bi +: 8];
    end
    b_rdata <= pbuf[b_raddr];
  end

  // ---- accumulators: one write port, one read port with a cycle of latency ----
  logic [63:0]   abuf [NACC * ACC_WORDS];
  logic          a_we;
  logic [XW-1:0] a_waddr, a_raddr;
  logic [63:0]   a_wdata, a_rdata;
  always_ff @(posedge clk) begin
    if (a_we) abuf[a_waddr] <= a_wdata;
    a_rdata <= abuf[a_raddr];
  end

  // CRC-32C (Castagnoli, reflected; vsl/core/crc.h) of `n` little-endian bytes of `w`.
  function automatic logic [31:0] crc32c_bytes(input logic [31:0] crc_in, input logic [63:0] w,
                                                input logic [3:0] n);
    logic [31:0] c;
    c = crc_in;
    for (int b = 0; b < 8; b++) begin
      if (4'(b) < n) begin
        c = c ^ {24'd0, w[8*b +: 8]};
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (32'h82F63B78 & {32{c[0]}});
      end
    end
    crc32c_bytes = c;
  endfunction

  // ---- slots: one command per LUN ----
  // Per-LUN fields, LUN i in slice i (flat vectors: yosys 0.23 has no packed arrays of
  // vectors).
  logic [LUNS*3-1:0]  s_state;
  logic [LUNS*8-1:0]  s_op, s_result, s_nand;
  logic [LUNS*16-1:0] s_tag, s_col, s_len, s_dbytes, s_mbytes, s_sbytes, s_corr, s_win;
  logic [LUNS*64-1:0] s_w5;
  logic [LUNS*24-1:0] s_row;
  logic [LUNS*64-1:0] s_daddr, s_maddr;
  logic [LUNS*32-1:0] s_started, s_polled;
  logic [LUNS-1:0]       s_abort;  // lun_reset seen, not yet acted on
  logic [LUNS-1:0]       s_dead;   // the LUN's last command timed out: probe before the next

  // The descriptor fetched and waiting for its LUN's slot.
  logic        p_valid;
  logic [63:0] p_w0, p_w1, p_w2, p_w3, p_w4, p_w5;
  logic [7:0]  p_lun;
  assign p_lun = p_w0[39:32];

  // ---- ring state ----
  logic        phase;
  logic [31:0] sq_mask, cq_mask;
  logic        ring_ok, cq_full;
  assign sq_mask = sq_size - 32'd1;
  assign cq_mask = cq_size - 32'd1;
  assign ring_ok = sq_size != 0 && (sq_size & sq_mask) == 0 && cq_size != 0 && (cq_size & cq_mask) == 0 &&
                   sq_base[5:0] == 6'd0 && cq_base[3:0] == 4'd0;
  assign cq_full = ((cq_tail + 32'd1) & cq_mask) == (cq_head & cq_mask);
  assign running    = run && ring_ok;
  assign ring_error = run && !ring_ok;

  // ---- channel ----
  logic        rq_valid, rq_ready, rs_valid, rs_timeout;
  logic [3:0]  rq_op;
  logic [23:0] rq_row;
  logic [15:0] rq_col, rq_len;
  logic [7:0]  rs_status;
  logic [7:0]  din_data, dout_data;
  logic        din_valid, din_ready, dout_valid;
  vsl_onfi_channel chan (
      .clk, .rst_n, .timing0, .timing1, .timing2, .rb_timeout,
      .req_valid(rq_valid), .req_ready(rq_ready), .req_op(rq_op), .req_row(rq_row), .req_col(rq_col),
      .req_len(rq_len), .resp_valid(rs_valid), .resp_status(rs_status), .resp_timeout(rs_timeout),
      .din_data, .din_valid, .din_ready, .dout_data, .dout_valid, .busy(chan_busy),
      .ce_n, .cle, .ale, .we_n, .re_n, .wp_n, .dq_o, .dq_oe, .dq_i, .rb_n
  );

  // ---- DMA ----
  logic          d_valid, d_ready, d_write, d_done, d_err;
  logic [63:0]   d_addr;
  logic [15:0]   d_words;
  logic [AW-1:0] d_buf, d_raddr, d_waddr;
  logic          d_we;
  logic [63:0]   d_wdata;
  vsl_axi_dma #(.BUF_AW(AW)) dma (
      .clk, .rst_n, .cmd_valid(d_valid), .cmd_ready(d_ready), .cmd_write(d_write), .cmd_addr(d_addr),
      .cmd_words(d_words), .cmd_buf(d_buf), .done(d_done), .done_err(d_err),
      .buf_raddr(d_raddr), .buf_rdata(b_rdata), .buf_we(d_we), .buf_waddr(d_waddr), .buf_wdata(d_wdata),
      .m_awaddr, .m_awlen, .m_awsize, .m_awburst, .m_awvalid, .m_awready, .m_wdata, .m_wstrb, .m_wlast,
      .m_wvalid, .m_wready, .m_bresp, .m_bvalid, .m_bready, .m_araddr, .m_arlen, .m_arsize, .m_arburst,
      .m_arvalid, .m_arready, .m_rdata, .m_rresp, .m_rlast, .m_rvalid, .m_rready
  );

  // ---- ECC ----
  logic        e_start, e_decode, e_in_valid, e_in_last, e_fix_valid, e_done, e_unc;
  logic [63:0] e_in_word;
  logic [3:0]  e_in_nbytes;
  logic [15:0] e_fix_addr, e_corr;
  logic [7:0]  e_fix_data;
  logic [LW-1:0] cur;  // the LUN being worked on
  logic [7:0]    cur_lun8;
  assign cur_lun8 = 8'(cur);
  // The current command's window and accumulator fields, and its page in words.
  logic [63:0]   cur_w5;
  logic [15:0]   cur_win, cur_dw, cur_mw, cur_at_w, cur_len_w, cur_crc_w;
  logic [1:0]    cur_aop;
  logic [XW-1:0] acc_base;
  logic [63:0]   cur_len_mask;  // bytes of the last metadata word a take / peek XORs
  assign cur_w5    = s_w5[64*(cur) +: 64];
  assign cur_win   = s_win[16*(cur) +: 16];
  assign cur_aop   = cur_w5[25:24];
  assign cur_dw    = (s_dbytes[16*(cur) +: 16] + 16'd7) >> 3;
  assign cur_mw    = (s_mbytes[16*(cur) +: 16] + 16'd7) >> 3;
  assign cur_at_w  = s_col[16*(cur) +: 16] >> 3;
  assign cur_len_w = (s_len[16*(cur) +: 16] + 16'd7) >> 3;
  assign cur_crc_w = (cur_w5[63:48] + 16'd7) >> 3;
  assign acc_base  = XW'(cur_w5[23:16]) * XW'(ACC_WORDS);
  assign cur_len_mask = s_len[16*(cur) +: 3] == 3'd0 ? {64{1'b1}} : ~({64{1'b1}} << {s_len[16*(cur) +: 3], 3'd0});
  // No instance parameter: the two pipes of a controller are one module to synthesis (a
  // per-pipe parameter made yosys elaborate and process the pipe twice); the ECC's DPI
  // model tells its instances apart by their scope.
  vsl_ecc ecc (
      .clk, .rst_n, .start(e_start), .decode(e_decode), .data_bytes(s_dbytes[16*(cur) +: 16]), .meta_bytes(s_mbytes[16*(cur) +: 16]),
      .spare_bytes(s_sbytes[16*(cur) +: 16]), .in_valid(e_in_valid), .in_word(e_in_word), .in_nbytes(e_in_nbytes),
      .in_last(e_in_last), .fix_valid(e_fix_valid), .fix_addr(e_fix_addr), .fix_data(e_fix_data),
      .done(e_done), .corrected(e_corr), .uncorrectable(e_unc)
  );

  // ---- main state machine ----
  typedef enum logic [4:0] {
    M_IDLE, M_SEQ, M_SEQ_WAIT, M_DMA, M_DMA_WAIT,
    M_FETCH, M_FETCH_RD, M_PROG_META, M_PROG_ENC, M_PROG_ENC_WAIT, M_PROG_ISSUE, M_STARTED,
    M_POLLED, M_PROBED, M_RDOUT_DEC, M_RDOUT_DMA, M_RDOUT_DONE, M_MISC_SEQ, M_MISC_DONE, M_ABORTED,
    M_CPL0, M_CPL1, M_CPL_DONE,
    M_PROG_ZERO, M_PROG_ACC, M_ACC_META, M_ACC, M_ACC_CRC, M_ACC_CRCW, M_ACC_CLR
  } state_e;
  state_e state, ret;

  // Sequencer call: request registers, its data paths, the answer.
  logic [3:0]  c_op;
  logic [23:0] c_row;
  logic [15:0] c_col, c_len;
  logic        c_din, c_dout, c_dec;  // stream din from the buffer / dout into it / into the ECC
  logic [7:0]  r_status;
  logic        r_timeout;
  // DMA call.
  logic        c_dwrite;
  logic [63:0] c_daddr;
  logic [15:0] c_dwords;
  logic [AW-1:0] c_dbuf;
  logic        r_derr;
  // A descriptor whose fetch got an AXI error: it still gets its one completion
  // (DMA_ERROR, LUN 0xFF, tag 0xFFFF, the descriptor's SQ index in the corrected-bits
  // field, since its tag was never read). No other descriptor is fetched before it is
  // posted. cpl_ff: the completion being written is that one.
  logic        ff_valid, cpl_ff;
  logic [15:0] ff_index;

  // din: bytes from the buffer, one prefetched.
  logic [15:0] din_ptr, din_end;
  logic        din_have, din_rd;
  logic [2:0]  din_sel;
  // dout: bytes into the buffer (and the ECC).
  logic [15:0] dout_ptr;
  // ECC encode feed.
  logic [15:0] enc_word, enc_words;
  logic        enc_rd;

  // Accumulator passes (M_ACC_META, M_ACC, M_ACC_CRC, M_ACC_CLR) and the program's zero
  // fill: x_i is the word read this cycle, x_j the one whose data arrives (x_rd).
  logic [15:0] x_i, x_j, x_end, z_ptr;
  logic        x_rd;
  logic [31:0] x_crc;

  logic        ecc_done;  // the ECC engine finished since it was last started (its
                          // done pulse may come before the state machine waits for it)
  logic [2:0]  fetch_i;  // descriptor word being read out of the buffer
  logic        fetch_rd;

  // Target-level commands (READ ID, READ PARAMETER PAGE, GET/SET FEATURES) address the
  // whole target and poll it with READ STATUS (70h), which ONFI forbids while a multiple-
  // LUN operation runs; a target RESET (FFh) aborts every LUN's array operation, whose
  // slot would then read ready and complete OK with its page unwritten. Such a command
  // starts only when no LUN of the target has an array
  // operation under way (no slot BUSY), and while one waits no new array operation
  // (READ, PROGRAM, ERASE) starts, so the busy LUNs drain and it cannot starve. A LUN that
  // timed out is no longer BUSY: a stuck die does not hold these commands back for ever.
  logic [LUNS-1:0] s_tl, s_arr;  // per slot: a target-level command, an array operation
  logic            t_busy, t_wait;
  always_comb begin
    t_busy = 1'b0; t_wait = 1'b0;
    for (int l = 0; l < LUNS; l++) begin
      s_tl[l]  = s_op[8*l +: 8] == OPC_READ_ID || s_op[8*l +: 8] == OPC_READ_PARAM ||
                 s_op[8*l +: 8] == OPC_GET_FEAT || s_op[8*l +: 8] == OPC_SET_FEAT || s_op[8*l +: 8] == OPC_RESET;
      s_arr[l] = s_op[8*l +: 8] == OPC_READ || s_op[8*l +: 8] == OPC_PROGRAM || s_op[8*l +: 8] == OPC_ERASE;
      if (s_state[3*l +: 3] == SL_BUSY) t_busy = 1'b1;
      if (s_state[3*l +: 3] == SL_NEW && s_tl[l]) t_wait = 1'b1;
    end
  end

  // Choice of the next thing to do: each kind of work goes round the LUNs, starting after
  // the LUN served last (rr), so no LUN starves while others keep the bus busy.
  logic            f_abort, f_cpl, f_new, f_ready, f_poll;
  logic [LW-1:0]   i_abort, i_cpl, i_new, i_ready, i_poll, rr, li;
  always_comb begin
    f_abort = 1'b0; f_cpl = 1'b0; f_new = 1'b0; f_ready = 1'b0; f_poll = 1'b0;
    i_abort = '0; i_cpl = '0; i_new = '0; i_ready = '0; i_poll = '0; li = '0;
    for (int k = LUNS - 1; k >= 0; k--) begin
      li = LW'((32'(rr) + 1 + 32'(k)) % LUNS);
      if (s_abort[li] && s_state[3*(li) +: 3] != SL_FREE && s_state[3*(li) +: 3] != SL_CPL) begin
        f_abort = 1'b1; i_abort = li;
      end
      if (s_state[3*(li) +: 3] == SL_CPL) begin f_cpl = 1'b1; i_cpl = li; end
      if (s_state[3*(li) +: 3] == SL_NEW &&
          !(s_tl[li] && t_busy) && !(s_arr[li] && t_wait)) begin
        f_new = 1'b1; i_new = li;
      end
      if (s_state[3*(li) +: 3] == SL_READY) begin f_ready = 1'b1; i_ready = li; end
      if (s_state[3*(li) +: 3] == SL_BUSY && (cycles[31:0] - s_polled[32*(li) +: 32]) >= poll_gap) begin
        f_poll = 1'b1; i_poll = li;
      end
    end
  end

  logic any_slot;
  always_comb begin
    any_slot = 1'b0;
    for (int i = 0; i < LUNS; i++) if (s_state[3*(i) +: 3] != SL_FREE) any_slot = 1'b1;
  end
  assign idle = !any_slot && !p_valid && state == M_IDLE && (sq_head & sq_mask) == (sq_tail & sq_mask);

  // Descriptor checks.
  logic        p_bad;
  logic [7:0]  p_opc;
  logic [15:0] p_db, p_mb, p_sb, p_len;
  assign p_opc = p_w0[7:0];
  assign p_db  = p_w4[15:0];
  assign p_mb  = p_w4[31:16];
  assign p_sb  = p_w4[47:32];
  assign p_len = p_w1[63:48];
  logic [15:0] p_win, p_win_off, p_crc_at;
  logic [7:0]  p_acc;
  logic [1:0]  p_aop;
  logic        p_win_en;
  assign p_win     = p_w4[63:48];
  assign p_win_off = p_w5[15:0];
  assign p_acc     = p_w5[23:16];
  assign p_aop     = p_w5[25:24];
  assign p_win_en  = p_w5[26];
  assign p_crc_at  = p_w5[63:48];
  always_comb begin
    p_bad = 1'b0;
    if (p_opc == 8'd0 || p_opc > OPC_ACC_CLEAR) p_bad = 1'b1;
    if (p_opc == OPC_ACC_CLEAR && (ACCS == 0 || p_acc >= 8'(ACCS))) p_bad = 1'b1;
    if (p_win_en && (p_opc == OPC_READ || p_opc == OPC_PROGRAM) &&
        (p_win[2:0] != 3'd0 || p_win_off[2:0] != 3'd0 || {1'b0, p_win_off} + {1'b0, p_win} > {1'b0, p_db} ||
         (p_opc == OPC_PROGRAM && p_win_off != 16'd0))) p_bad = 1'b1;
    if (p_aop != ACC_NONE) begin
      if (p_opc != OPC_PROGRAM || ACCS == 0 || p_acc >= 8'(ACCS)) p_bad = 1'b1;
      // Take / peek with metadata: the offsets the pass handles, inside the metadata.
      if (p_aop != ACC_ADD && p_len != 16'd0 &&
          (p_w1[34:32] != 3'd0 || p_crc_at[1:0] != 2'd0 || {1'b0, p_w1[47:32]} + {1'b0, p_len} > {1'b0, p_mb} ||
           {1'b0, p_crc_at} + 17'd4 > {1'b0, p_mb})) p_bad = 1'b1;
    end
    if (p_opc == OPC_READ || p_opc == OPC_PROGRAM) begin
      if (p_db == 16'd0 || p_db[2:0] != 3'd0 || p_mb[2:0] != 3'd0 || p_sb[2:0] != 3'd0 || p_mb > p_sb ||
          {1'b0, p_db} + {1'b0, p_sb} > {1'b0, PAGE_MAX}) p_bad = 1'b1;
      if (p_w2[2:0] != 3'd0 || p_w3[2:0] != 3'd0) p_bad = 1'b1;
    end
    if ((p_opc == OPC_READ_ID || p_opc == OPC_READ_PARAM || p_opc == OPC_GET_FEAT || p_opc == OPC_SET_FEAT) &&
        (p_len == 16'd0 || p_len > PAGE_MAX || p_w2[2:0] != 3'd0)) p_bad = 1'b1;
  end

  // A completion's first word: a failed fetch's (LUN FFh, tag FFFFh, its SQ index), or
  // the answer of slot `cur` with the tag it took.
  logic [63:0] cpl_w0;
  assign cpl_w0 = cpl_ff ? {phase, 7'd0, 8'hFF, ff_index, 8'd0, ST_DMA_ERROR, 16'hFFFF}
                         : {phase, 7'd0, cur_lun8, s_corr[16*(cur) +: 16], s_nand[8*(cur) +: 8], s_result[8*(cur) +: 8],
                            s_tag[16*(cur) +: 16]};

  // Buffer port muxes (the users never overlap: each belongs to one state).
  always_comb begin
    b_we    = 1'b0;
    b_waddr = d_waddr;
    b_wdata = d_wdata;
    b_wbe   = 8'hFF;
    b_raddr = d_raddr;
    if (d_we) begin
      b_we = 1'b1;
    end else if (c_dout && dout_valid && state == M_SEQ_WAIT) begin
      b_we    = 1'b1;
      b_waddr = dout_ptr[AW+2:3];
      b_wdata = {8{dout_data}};
      b_wbe   = 8'd1 << dout_ptr[2:0];
    end else if (e_fix_valid) begin
      b_we    = 1'b1;
      b_waddr = e_fix_addr[AW+2:3];
      b_wdata = {8{e_fix_data}};
      b_wbe   = 8'd1 << e_fix_addr[2:0];
    end else if (state == M_PROG_ZERO && !r_derr && z_ptr != cur_dw) begin
      b_we    = 1'b1;
      b_waddr = z_ptr[AW-1:0];
      b_wdata = 64'd0;
    end else if (state == M_ACC_META && x_rd) begin
      b_we    = 1'b1;
      b_waddr = AW'(cur_dw + cur_at_w + x_j);
      b_wdata = b_rdata ^ (a_rdata & ((x_j + 16'd1 == cur_len_w) ? cur_len_mask : {64{1'b1}}));
    end else if (state == M_ACC && x_rd && cur_aop != ACC_ADD && x_j < cur_dw) begin
      b_we    = 1'b1;
      b_waddr = x_j[AW-1:0];
      b_wdata = b_rdata ^ a_rdata;
    end else if (state == M_ACC_CRCW) begin
      b_we    = 1'b1;
      b_waddr = AW'(cur_dw + (cur_w5[63:48] >> 3));
      b_wdata = {~x_crc, ~x_crc};
      b_wbe   = cur_w5[50] ? 8'hF0 : 8'h0F;
    end else if (state == M_CPL0 || state == M_CPL1) begin
      b_we    = 1'b1;
      b_waddr = state == M_CPL0 ? CPL_W : CPL_W + 1'b1;
      b_wdata = state != M_CPL0 ? cycles : cpl_w0;
    end
    if (c_din && state == M_SEQ_WAIT) b_raddr = din_ptr[AW+2:3];
    else if (state == M_PROG_ENC) b_raddr = enc_word[AW-1:0];
    else if (state == M_FETCH_RD) b_raddr = DESC_W + AW'(fetch_i);
    else if (state == M_ACC_META) b_raddr = AW'(cur_dw + cur_at_w + x_i);
    else if (state == M_ACC) b_raddr = x_i[AW-1:0];
    else if (state == M_ACC_CRC) b_raddr = AW'(cur_dw + x_i);
  end

  // Accumulator port: reads in the passes, writes of their results (zeroes for a take and
  // ACC_CLEAR).
  always_comb begin
    a_we    = 1'b0;
    a_waddr = acc_base + XW'(x_j);
    a_wdata = 64'd0;
    a_raddr = acc_base + XW'(x_i);
    if (state == M_ACC_META) a_raddr = acc_base + XW'(cur_dw + x_i);
    if (state == M_ACC && x_rd && cur_aop != ACC_PEEK) begin
      a_we    = 1'b1;
      a_wdata = cur_aop == ACC_ADD ? (a_rdata ^ b_rdata) : 64'd0;
    end else if (state == M_ACC_CLR && x_i != x_end) begin
      a_we    = 1'b1;
      a_waddr = acc_base + XW'(x_i);
    end
  end

  assign din_valid = din_have;
  assign rq_valid  = (state == M_SEQ);
  assign rq_op     = c_op;
  assign rq_row    = c_row;
  assign rq_col    = c_col;
  assign rq_len    = c_len;
  assign d_valid   = (state == M_DMA);
  assign d_write   = c_dwrite;
  assign d_addr    = c_daddr;
  assign d_words   = c_dwords;
  assign d_buf     = c_dbuf;

  // ECC feeds: encode from the buffer (one word a cycle after its read), decode from dout.
  always_comb begin
    e_in_valid  = 1'b0;
    e_in_word   = 64'd0;
    e_in_nbytes = 4'd8;
    e_in_last   = 1'b0;
    if (state == M_PROG_ENC && enc_rd) begin
      e_in_valid = 1'b1;
      e_in_word  = b_rdata;
      e_in_last  = (enc_word == enc_words);
    end else if (c_dec && state == M_SEQ_WAIT && dout_valid) begin
      e_in_valid  = 1'b1;
      e_in_word   = {56'd0, dout_data};
      e_in_nbytes = 4'd1;
      e_in_last   = (dout_ptr == c_len - 16'd1);
    end
  end

  function automatic logic [15:0] words_of(input logic [15:0] bytes_);
    words_of = (bytes_ + 16'd7) >> 3;
  endfunction

  assign cq_event = (state == M_CPL_DONE);

  // Ownership registers. A granted claim or a release sets fence_pend: the main state
  // machine, when next idle, fences the slots still NEW of another generation (fence_ack),
  // against the owner of that cycle; a change in the same cycle leaves it set for another
  // pass. (Until issue 35's GEN_FENCE, an 8-bit count of changes against the count seen:
  // 256 claims while the machine was busy with one command wrapped it, and the NEW slots
  // of an earlier owner were never fenced.)
  logic [7:0]  own_tick;
  logic        own_forever;  // the lease does not expire
  logic        fence_pend, fence_ack;
  logic        own_expired;
  assign own_expired = !own_forever && own_lease_left == 32'd0;
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      own_host <= 16'd0; own_gen <= 16'd0; own_lease_left <= 32'd0; own_forever <= 1'b1;
      own_granted <= 1'b0; own_renewed <= 1'b0; own_tick <= 8'd0; fence_pend <= 1'b0;
    end else begin
      own_tick <= own_tick + 8'd1;
      if (fence_ack) fence_pend <= 1'b0;
      if (own_tick == 8'hFF && own_lease_left != 32'd0) own_lease_left <= own_lease_left - 32'd1;
      if (own_claim) begin
        if (own_claim_host != 16'd0 &&
            (own_host == 16'd0 || own_expired || own_host == own_claim_host || own_claim_force)) begin
          own_gen        <= (own_gen == 16'hFFFF) ? 16'd1 : own_gen + 16'd1;
          own_host       <= own_claim_host;
          own_lease_left <= own_lease;
          own_forever    <= own_lease == 32'd0;
          own_granted    <= 1'b1;
          fence_pend     <= 1'b1;
        end else begin
          own_granted <= 1'b0;
        end
      end else if (own_renew) begin
        if (own_gen != 16'd0 && own_arg_gen == own_gen && own_host != 16'd0) begin
          own_lease_left <= own_lease;
          own_forever    <= own_lease == 32'd0;
          own_renewed    <= 1'b1;
        end else begin
          own_renewed <= 1'b0;
        end
      end else if (own_release) begin
        if (own_gen != 16'd0 && own_arg_gen == own_gen && own_host != 16'd0) begin
          own_host       <= 16'd0;
          own_lease_left <= 32'd0;
          own_forever    <= 1'b1;
          fence_pend     <= 1'b1;
        end
      end
    end
  end
  assign fence_ack = state == M_IDLE && fence_pend;  // the sweep below runs this cycle
  // A descriptor from a host that does not own the pipe (identification excepted).
  logic p_fenced;
  assign p_fenced = own_gen != 16'd0 && (p_w5[47:32] != own_gen || own_host == 16'd0) &&
                    p_opc != OPC_READ_ID && p_opc != OPC_READ_PARAM;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      state <= M_IDLE; ret <= M_IDLE; cur <= '0; rr <= '0;
      s_state <= '0; s_op <= '0; s_result <= '0; s_nand <= '0; s_tag <= '0; s_col <= '0; s_len <= '0;
      s_dbytes <= '0; s_mbytes <= '0; s_sbytes <= '0; s_corr <= '0; s_row <= '0; s_daddr <= '0;
      s_win <= '0; s_w5 <= '0; p_w5 <= '0;
      x_i <= '0; x_j <= '0; x_end <= '0; z_ptr <= '0; x_rd <= 1'b0; x_crc <= '0;
      s_maddr <= '0; s_started <= '0; s_polled <= '0; s_abort <= '0; s_dead <= '0;
      p_valid <= 1'b0; p_w0 <= '0; p_w1 <= '0; p_w2 <= '0; p_w3 <= '0; p_w4 <= '0;
      sq_head <= 32'd0; cq_tail <= 32'd0; completions <= 32'd0; phase <= 1'b1; dma_error <= 1'b0;
      c_op <= RQ_RESET; c_row <= '0; c_col <= '0; c_len <= '0; c_din <= 1'b0; c_dout <= 1'b0; c_dec <= 1'b0;
      r_status <= 8'd0; r_timeout <= 1'b0;
      c_dwrite <= 1'b0; c_daddr <= '0; c_dwords <= '0; c_dbuf <= '0; r_derr <= 1'b0;
      din_ptr <= '0; din_end <= '0; din_have <= 1'b0; din_rd <= 1'b0; din_sel <= '0; din_data <= 8'd0;
      dout_ptr <= '0; enc_word <= '0; enc_words <= '0; enc_rd <= 1'b0; fetch_i <= '0; fetch_rd <= 1'b0;
      e_start <= 1'b0; e_decode <= 1'b0; error_event <= 1'b0; ecc_done <= 1'b0;
      fenced <= 32'd0;
`ifdef FORMAL
      f_start <= 1'b0; f_start_gen <= 16'd0; f_start_op <= 8'd0; f_start_own_gen <= 16'd0; f_start_own_host <= 1'b0;
      f_take <= 1'b0; f_take_slot <= '0; f_take_tag <= 16'd0;
`endif
      ff_valid <= 1'b0; cpl_ff <= 1'b0; ff_index <= 16'd0;
    end else begin
      e_start     <= 1'b0;
      error_event <= 1'b0;
`ifdef FORMAL
      f_start     <= 1'b0;
      f_take      <= 1'b0;
`endif
      if (e_start) ecc_done <= 1'b0;
      else if (e_done) ecc_done <= 1'b1;
      s_abort     <= s_abort | lun_reset;

      // din prefetch: one byte ready ahead of the channel.
      if (din_valid && din_ready) din_have <= 1'b0;
      if (din_rd) begin
        din_data <= b_rdata[8*din_sel +: 8];
        din_have <= 1'b1;
        din_rd   <= 1'b0;
      end else if (c_din && state == M_SEQ_WAIT && !din_have && din_ptr != din_end) begin
        din_rd  <= 1'b1;
        din_sel <= din_ptr[2:0];
        din_ptr <= din_ptr + 16'd1;
      end
      if (c_dout && state == M_SEQ_WAIT && dout_valid) dout_ptr <= dout_ptr + 16'd1;
      // The passes' read pipeline: x_i read this cycle, its word next cycle as x_j.
      if (state == M_ACC_META || state == M_ACC || state == M_ACC_CRC) begin
        x_rd <= x_i != x_end;
        x_j  <= x_i;
        if (x_i != x_end) x_i <= x_i + 16'd1;
      end

      case (state)
        M_IDLE: begin
          if (fence_pend) begin
            // The owner changed: commands not started yet of another generation end FENCED.
            for (int l = 0; l < LUNS; l++) begin
              if (s_state[3*l +: 3] == SL_NEW &&
                  (s_w5[64*l+32 +: 16] != own_gen || own_host == 16'd0) &&
                  s_op[8*l +: 8] != OPC_READ_ID && s_op[8*l +: 8] != OPC_READ_PARAM) begin
                s_state[3*l +: 3]  <= SL_CPL;
                s_result[8*l +: 8] <= ST_FENCED;
              end
            end
          end else if (f_abort) begin
            cur <= i_abort;
            s_abort[i_abort] <= 1'b0;
            if (s_state[3*(i_abort) +: 3] == SL_NEW) begin
              s_result[8*(i_abort) +: 8] <= ST_ABORTED;
              s_state[3*(i_abort) +: 3]  <= SL_CPL;
            end else begin
              c_op <= RQ_RESET_LUN; c_row <= s_row[24*(i_abort) +: 24]; c_col <= '0; c_len <= '0;
              c_din <= 1'b0; c_dout <= 1'b0; c_dec <= 1'b0;
              state <= M_SEQ; ret <= M_ABORTED;
            end
          end else if (f_cpl && !cq_full && running) begin
            cur   <= i_cpl;
            state <= M_CPL0;
          end else if (ff_valid && !cq_full && running) begin
            cpl_ff <= 1'b1;
            state  <= M_CPL0;
          end else if (p_valid && p_lun < 8'(LUNS) && s_state[3*(p_lun[LW-1:0]) +: 3] == SL_FREE) begin
            // The waiting descriptor takes its LUN's slot.
            s_state[3*(p_lun[LW-1:0]) +: 3]  <= (p_bad || p_fenced) ? SL_CPL : SL_NEW;
            s_result[8*(p_lun[LW-1:0]) +: 8] <= p_bad ? ST_INVALID : p_fenced ? ST_FENCED : ST_OK;
            s_op[8*(p_lun[LW-1:0]) +: 8]     <= p_opc;
            s_tag[16*(p_lun[LW-1:0]) +: 16]    <= p_w0[31:16];
`ifdef FORMAL
            f_take <= 1'b1; f_take_slot <= p_lun[LW-1:0]; f_take_tag <= p_w0[31:16];
`endif
            s_row[24*(p_lun[LW-1:0]) +: 24]    <= p_w1[23:0];
            s_col[16*(p_lun[LW-1:0]) +: 16]    <= p_w1[47:32];
            s_len[16*(p_lun[LW-1:0]) +: 16]    <= p_len;
            s_daddr[64*(p_lun[LW-1:0]) +: 64]  <= p_w2;
            s_maddr[64*(p_lun[LW-1:0]) +: 64]  <= p_w3;
            s_dbytes[16*(p_lun[LW-1:0]) +: 16] <= p_db;
            s_mbytes[16*(p_lun[LW-1:0]) +: 16] <= p_mb;
            s_sbytes[16*(p_lun[LW-1:0]) +: 16] <= p_sb;
            s_win[16*(p_lun[LW-1:0]) +: 16]    <= p_win;
            s_w5[64*(p_lun[LW-1:0]) +: 64]     <= p_w5;
            s_nand[8*(p_lun[LW-1:0]) +: 8]   <= 8'd0;
            s_corr[16*(p_lun[LW-1:0]) +: 16]   <= 16'd0;
            s_abort[p_lun[LW-1:0]]  <= 1'b0;
            p_valid <= 1'b0;
          end else if (p_valid && p_lun >= 8'(LUNS)) begin
            // No such LUN: it has no slot, so slot 0 carries the INVALID answer once free.
            if (s_state[3*(0) +: 3] == SL_FREE) begin
              s_state[3*(0) +: 3] <= SL_CPL; s_result[8*(0) +: 8] <= ST_INVALID; s_op[8*(0) +: 8] <= p_opc; s_tag[16*(0) +: 16] <= p_w0[31:16];
`ifdef FORMAL
              f_take <= 1'b1; f_take_slot <= '0; f_take_tag <= p_w0[31:16];
`endif
              s_nand[8*(0) +: 8] <= 8'd0; s_corr[16*(0) +: 16] <= 16'd0;
              p_valid <= 1'b0;
            end
          end else if (running && !p_valid && !ff_valid && (sq_head & sq_mask) != (sq_tail & sq_mask)) begin
            c_dwrite <= 1'b0;
            c_daddr  <= sq_base + {26'd0, (sq_head & sq_mask), 6'd0};
            c_dwords <= 16'd6;
            c_dbuf   <= DESC_W;
            state <= M_DMA; ret <= M_FETCH;
          end else if (f_new && s_dead[i_new] && s_op[8*(i_new) +: 8] != OPC_RESET_LUN &&
                       s_op[8*(i_new) +: 8] != OPC_RESET && s_op[8*(i_new) +: 8] != OPC_ACC_CLEAR) begin
            // A LUN that timed out gets no new command while it is still busy: one status
            // poll first (a command to a busy LUN breaks the protocol).
            cur <= i_new;
            rr  <= i_new;
            c_op <= RQ_POLL_ONCE; c_row <= s_row[24*(i_new) +: 24]; c_col <= 16'd0; c_len <= 16'd0;
            c_din <= 1'b0; c_dout <= 1'b0; c_dec <= 1'b0;
            state <= M_SEQ; ret <= M_PROBED;
          end else if (f_new) begin
            cur <= i_new;
            rr  <= i_new;
`ifdef FORMAL
            f_start <= 1'b1; f_start_gen <= s_w5[64*(i_new)+32 +: 16]; f_start_op <= s_op[8*(i_new) +: 8];
            f_start_own_gen <= own_gen; f_start_own_host <= own_host != 16'd0;
`endif
            case (s_op[8*(i_new) +: 8])
              OPC_READ, OPC_ERASE: begin
                c_op <= s_op[8*(i_new) +: 8] == OPC_READ ? RQ_READ_START : RQ_ERASE_START;
                c_row <= s_row[24*(i_new) +: 24]; c_col <= 16'd0; c_len <= 16'd0;
                c_din <= 1'b0; c_dout <= 1'b0; c_dec <= 1'b0;
                state <= M_SEQ; ret <= M_STARTED;
              end
              OPC_PROGRAM: begin
                // Data in (a window: its first bytes; the rest of the data area zeroed).
                z_ptr <= s_w5[64*(i_new) + 26] ? words_of(s_win[16*(i_new) +: 16])
                                               : words_of(s_dbytes[16*(i_new) +: 16]);
                if (s_w5[64*(i_new) + 26] && s_win[16*(i_new) +: 16] == 16'd0) begin
                  r_derr <= 1'b0;
                  state  <= M_PROG_ZERO;
                end else begin
                  c_dwrite <= 1'b0;
                  c_daddr  <= s_daddr[64*(i_new) +: 64];
                  c_dwords <= s_w5[64*(i_new) + 26] ? words_of(s_win[16*(i_new) +: 16])
                                                    : words_of(s_dbytes[16*(i_new) +: 16]);
                  c_dbuf   <= '0;
                  state <= M_DMA; ret <= M_PROG_ZERO;
                end
              end
              OPC_ACC_CLEAR: begin
                x_i <= '0; x_end <= 16'(ACC_WORDS);
                state <= M_ACC_CLR;
              end
              OPC_SET_FEAT: begin
                c_dwrite <= 1'b0;
                c_daddr  <= s_daddr[64*(i_new) +: 64];
                c_dwords <= words_of(s_len[16*(i_new) +: 16]);
                c_dbuf   <= '0;
                state <= M_DMA; ret <= M_MISC_SEQ;
              end
              default: state <= M_MISC_SEQ;
            endcase
          end else if (f_ready) begin
            // A read whose LUN is ready: the whole page and spare into the buffer, decoded.
            cur <= i_ready;
            rr  <= i_ready;
            c_op <= RQ_READ_OUT; c_row <= s_row[24*(i_ready) +: 24]; c_col <= 16'd0;
            c_len <= s_dbytes[16*(i_ready) +: 16] + s_sbytes[16*(i_ready) +: 16];
            c_din <= 1'b0; c_dout <= 1'b1; c_dec <= 1'b1;
            dout_ptr <= 16'd0;
            e_start <= 1'b1; e_decode <= 1'b1;
            state <= M_SEQ; ret <= M_RDOUT_DEC;
          end else if (f_poll) begin
            cur <= i_poll;
            rr  <= i_poll;  // the next poll starts after this LUN: with POLL_GAP 0 none starves
            c_op <= RQ_POLL_ONCE; c_row <= s_row[24*(i_poll) +: 24]; c_col <= 16'd0; c_len <= 16'd0;
            c_din <= 1'b0; c_dout <= 1'b0; c_dec <= 1'b0;
            state <= M_SEQ; ret <= M_POLLED;
          end
        end

        // -- sequencer call --
        M_SEQ: if (rq_ready) begin
          state <= M_SEQ_WAIT;
          if (c_din) begin
            din_ptr  <= 16'd0;
            din_end  <= c_len;
            din_have <= 1'b0;
            din_rd   <= 1'b0;
          end
          if (c_dout) dout_ptr <= 16'd0;
        end
        M_SEQ_WAIT: if (rs_valid) begin
          r_status  <= rs_status;
          r_timeout <= rs_timeout;
          c_din  <= 1'b0;
          c_dout <= 1'b0;
          c_dec  <= 1'b0;
          state  <= ret;
        end

        // -- DMA call --
        M_DMA: if (d_ready) state <= M_DMA_WAIT;
        M_DMA_WAIT: if (d_done) begin
          r_derr <= d_err;
          if (d_err) begin
            dma_error   <= 1'b1;
            error_event <= 1'b1;
          end
          state <= ret;
        end

        // -- fetch: five descriptor words out of the staging area --
        M_FETCH: begin
          sq_head  <= (sq_head + 32'd1) & sq_mask;
          fetch_i  <= 3'd0;
          fetch_rd <= 1'b0;
          if (r_derr) begin  // a failed fetch completes DMA_ERROR (DMA_ERROR status bit set)
            ff_valid <= 1'b1;
            ff_index <= sq_head[15:0];
          end
          state    <= r_derr ? M_IDLE : M_FETCH_RD;
        end
        M_FETCH_RD: begin
          fetch_rd <= 1'b1;
          if (fetch_rd) begin
            case (fetch_i)
              3'd1: p_w0 <= b_rdata;
              3'd2: p_w1 <= b_rdata;
              3'd3: p_w2 <= b_rdata;
              3'd4: p_w3 <= b_rdata;
              3'd5: p_w4 <= b_rdata;
              default: ;
            endcase
          end
          fetch_i <= fetch_i + 3'd1;
          if (fetch_rd && fetch_i == 3'd6) begin
            p_w5    <= b_rdata;
            p_valid <= 1'b1;
            state   <= M_IDLE;
          end
        end

        // -- program: data in, metadata in, encode, the page to the LUN --
        M_PROG_ZERO: begin
          if (r_derr) begin
            s_result[8*(cur) +: 8] <= ST_DMA_ERROR; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end else if (z_ptr != cur_dw) begin
            z_ptr <= z_ptr + 16'd1;  // the word is zeroed by the buffer's write port
          end else begin
            state <= M_PROG_META;
          end
        end
        M_PROG_META: begin
          if (s_mbytes[16*(cur) +: 16] == 16'd0) begin
            state <= M_PROG_ACC;
          end else begin
            c_dwrite <= 1'b0;
            c_daddr  <= s_maddr[64*(cur) +: 64];
            c_dwords <= words_of(s_mbytes[16*(cur) +: 16]);
            c_dbuf   <= AW'(words_of(s_dbytes[16*(cur) +: 16]));
            state <= M_DMA; ret <= M_PROG_ACC;
          end
        end
        // The page is in the buffer: its accumulator operation, then the encode.
        M_PROG_ACC: begin
          x_i <= '0; x_rd <= 1'b0;
          if (r_derr) begin
            s_result[8*(cur) +: 8] <= ST_DMA_ERROR; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end else if (s_abort[cur]) begin
            // Aborted while its data came in: the commit point. Nothing of it has reached
            // the accumulator or the die, and nothing will (ABORTED, the page untouched).
            s_abort[cur] <= 1'b0;
            s_result[8*(cur) +: 8] <= ST_ABORTED; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end else if (cur_aop == ACC_NONE) begin
            state <= M_PROG_ENC; enc_word <= 16'd0; enc_rd <= 1'b0; e_start <= 1'b1; e_decode <= 1'b0;
            enc_words <= cur_dw + cur_mw;
          end else if (cur_aop != ACC_ADD && s_len[16*(cur) +: 16] != 16'd0) begin
            x_end <= cur_len_w;
            state <= M_ACC_META;
          end else begin
            x_end <= cur_aop == ACC_PEEK ? cur_dw : cur_dw + cur_mw;
            state <= M_ACC;
          end
        end
        M_ACC_META: if (!x_rd && x_i == x_end) begin
          x_i <= '0;
          x_end <= cur_aop == ACC_PEEK ? cur_dw : cur_dw + cur_mw;
          state <= M_ACC;
        end
        M_ACC: if (!x_rd && x_i == x_end) begin
          x_i <= '0;
          if (cur_aop != ACC_ADD && s_len[16*(cur) +: 16] != 16'd0) begin
            x_end <= cur_crc_w;
            x_crc <= 32'hFFFFFFFF;
            state <= M_ACC_CRC;
          end else begin
            state <= M_PROG_ENC; enc_word <= 16'd0; enc_rd <= 1'b0; e_start <= 1'b1; e_decode <= 1'b0;
            enc_words <= cur_dw + cur_mw;
          end
        end
        M_ACC_CRC: begin
          if (x_rd) begin
            x_crc <= crc32c_bytes(x_crc, b_rdata,
                                  ({x_j, 3'd0} + 19'd8 <= {3'd0, cur_w5[63:48]}) ? 4'd8 : 4'd4);
          end
          if (!x_rd && x_i == x_end) state <= M_ACC_CRCW;
        end
        M_ACC_CRCW: begin  // the CRC is written by the buffer's write port
          state <= M_PROG_ENC; enc_word <= 16'd0; enc_rd <= 1'b0; e_start <= 1'b1; e_decode <= 1'b0;
          enc_words <= cur_dw + cur_mw;
        end
        M_ACC_CLR: begin  // zeroes one word a cycle through the accumulator's write port
          if (x_i != x_end) begin
            x_i <= x_i + 16'd1;
          end else begin
            s_result[8*(cur) +: 8] <= ST_OK; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end
        end
        M_PROG_ENC: begin
          if (r_derr) begin
            s_result[8*(cur) +: 8] <= ST_DMA_ERROR; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end else begin
            // enc_word addresses the buffer; its word arrives the next cycle (enc_rd).
            enc_rd   <= enc_word != enc_words;
            enc_word <= enc_word + 16'd1;
            if (enc_rd && enc_word == enc_words) state <= M_PROG_ENC_WAIT;
          end
        end
        M_PROG_ENC_WAIT: if (ecc_done && s_abort[cur]) begin
          // Aborted after its accumulator operation: the page still never goes to the die;
          // the accumulator holds it as it holds a page whose program failed.
          s_abort[cur] <= 1'b0;
          s_result[8*(cur) +: 8] <= ST_ABORTED; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
        end else if (ecc_done) begin
          c_op <= RQ_PROGRAM_START; c_row <= s_row[24*(cur) +: 24]; c_col <= 16'd0;
          c_len <= s_dbytes[16*(cur) +: 16] + s_sbytes[16*(cur) +: 16];
          c_din <= 1'b1; c_dout <= 1'b0; c_dec <= 1'b0;
          state <= M_SEQ; ret <= M_STARTED;
        end
        M_STARTED: begin
          s_started[32*(cur) +: 32] <= cycles[31:0];
          s_polled[32*(cur) +: 32]  <= cycles[31:0];
          s_state[3*(cur) +: 3]   <= SL_BUSY;
          state <= M_IDLE;
        end

        // -- a busy LUN polled once --
        M_POLLED: begin
          s_polled[32*(cur) +: 32] <= cycles[31:0];
          s_nand[8*(cur) +: 8]   <= r_status;
          if (!r_timeout && r_status[6]) begin
            if (s_op[8*(cur) +: 8] == OPC_READ) begin
              s_state[3*(cur) +: 3] <= SL_READY;
            end else begin
              s_result[8*(cur) +: 8] <= !r_status[0] ? ST_OK : (s_op[8*(cur) +: 8] == OPC_ERASE ? ST_ERASE_FAIL : ST_PROGRAM_FAIL);
              s_state[3*(cur) +: 3]  <= SL_CPL;
            end
          end else if (r_timeout || (rb_timeout != 32'd0 && cycles[31:0] - s_started[32*(cur) +: 32] >= rb_timeout)) begin
            s_result[8*(cur) +: 8] <= ST_TIMEOUT;
            s_state[3*(cur) +: 3]  <= SL_CPL;
            s_dead[cur]   <= 1'b1;
            error_event   <= 1'b1;
          end
          state <= M_IDLE;
        end

        // -- read out: decoded in the buffer, then data and metadata to memory --
        M_RDOUT_DEC: begin
          if (r_timeout) begin
            s_result[8*(cur) +: 8] <= ST_TIMEOUT; s_state[3*(cur) +: 3] <= SL_CPL; error_event <= 1'b1; state <= M_IDLE;
            s_dead[cur] <= 1'b1;
          end else if (ecc_done) begin
            s_corr[16*(cur) +: 16]   <= e_corr;
            s_result[8*(cur) +: 8] <= e_unc ? ST_UNCORRECTABLE : ST_OK;
            if (cur_w5[26] && cur_win == 16'd0) begin
              r_derr <= 1'b0;  // an empty window: no data out
              state  <= M_RDOUT_DMA;
            end else begin
              c_dwrite <= 1'b1;
              c_daddr  <= s_daddr[64*(cur) +: 64];
              c_dwords <= cur_w5[26] ? words_of(cur_win) : words_of(s_dbytes[16*(cur) +: 16]);
              c_dbuf   <= cur_w5[26] ? AW'(cur_w5[15:3]) : '0;
              state <= M_DMA; ret <= M_RDOUT_DMA;
            end
          end
        end
        M_RDOUT_DMA: begin
          if (r_derr) begin
            s_result[8*(cur) +: 8] <= ST_DMA_ERROR; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end else if (s_mbytes[16*(cur) +: 16] == 16'd0 || cur_w5[27]) begin
            s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end else begin
            c_dwrite <= 1'b1;
            c_daddr  <= s_maddr[64*(cur) +: 64];
            c_dwords <= words_of(s_mbytes[16*(cur) +: 16]);
            c_dbuf   <= AW'(words_of(s_dbytes[16*(cur) +: 16]));
            state <= M_DMA; ret <= M_RDOUT_DONE;
          end
        end
        M_RDOUT_DONE: begin
          if (r_derr) s_result[8*(cur) +: 8] <= ST_DMA_ERROR;
          s_state[3*(cur) +: 3] <= SL_CPL;
          state <= M_IDLE;
        end

        // -- operations that hold the channel to the end (no array time worth sharing) --
        M_MISC_SEQ: begin
          if (s_op[8*(cur) +: 8] == OPC_SET_FEAT && r_derr) begin
            s_result[8*(cur) +: 8] <= ST_DMA_ERROR; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end else if (s_abort[cur]) begin
            // Aborted while its parameters came in (or in the cycle it was taken): it
            // never goes out.
            s_abort[cur] <= 1'b0;
            s_result[8*(cur) +: 8] <= ST_ABORTED; s_state[3*(cur) +: 3] <= SL_CPL; state <= M_IDLE;
          end else begin
            c_row <= s_row[24*(cur) +: 24]; c_col <= s_col[16*(cur) +: 16]; c_len <= s_len[16*(cur) +: 16];
            c_din <= s_op[8*(cur) +: 8] == OPC_SET_FEAT;
            c_dout <= s_op[8*(cur) +: 8] == OPC_READ_ID || s_op[8*(cur) +: 8] == OPC_READ_PARAM || s_op[8*(cur) +: 8] == OPC_GET_FEAT;
            c_dec <= 1'b0;
            case (s_op[8*(cur) +: 8])
              OPC_RESET:      c_op <= RQ_RESET;
              OPC_RESET_LUN:  c_op <= RQ_RESET_LUN;
              OPC_READ_ID:    c_op <= RQ_READ_ID;
              OPC_READ_PARAM: c_op <= RQ_READ_PARAM;
              OPC_GET_FEAT:   c_op <= RQ_GET_FEAT;
              OPC_SET_FEAT:   c_op <= RQ_SET_FEAT;
              default:        c_op <= RQ_STATUS;
            endcase
            state <= M_SEQ; ret <= M_MISC_DONE;
          end
        end
        M_MISC_DONE: begin
          s_nand[8*(cur) +: 8] <= r_status;
          // A target RESET answers for every LUN of the target: timed out, each may still
          // be resetting (a status poll before its next command); done, each is ready.
          if (r_timeout) begin
            s_result[8*(cur) +: 8] <= ST_TIMEOUT; s_state[3*(cur) +: 3] <= SL_CPL; error_event <= 1'b1; state <= M_IDLE;
            if (s_op[8*(cur) +: 8] == OPC_RESET) s_dead <= '1;
            else s_dead[cur] <= 1'b1;
          end else begin
            if (s_op[8*(cur) +: 8] == OPC_RESET) s_dead <= '0;
            else s_dead[cur] <= 1'b0;
            s_result[8*(cur) +: 8] <= (s_op[8*(cur) +: 8] == OPC_STATUS || s_op[8*(cur) +: 8] == OPC_RESET_LUN) && r_status[0] ? ST_FAIL : ST_OK;
            if (s_op[8*(cur) +: 8] == OPC_READ_ID || s_op[8*(cur) +: 8] == OPC_READ_PARAM || s_op[8*(cur) +: 8] == OPC_GET_FEAT) begin
              c_dwrite <= 1'b1;
              c_daddr  <= s_daddr[64*(cur) +: 64];
              c_dwords <= words_of(s_len[16*(cur) +: 16]);
              c_dbuf   <= '0;
              state <= M_DMA; ret <= M_RDOUT_DONE;
            end else begin
              s_state[3*(cur) +: 3] <= SL_CPL;
              state <= M_IDLE;
            end
          end
        end

        M_PROBED: begin
          if (!r_timeout && r_status[6]) begin
            s_dead[cur] <= 1'b0;  // alive again: the command starts on the next pass
          end else begin
            s_nand[8*(cur) +: 8]   <= r_status;
            s_result[8*(cur) +: 8] <= ST_TIMEOUT;
            s_state[3*(cur) +: 3]  <= SL_CPL;
          end
          state <= M_IDLE;
        end

        M_ABORTED: begin
          // A RESET LUN that timed out left the LUN in an unknown state: like any timeout,
          // its next command is preceded by a status poll (it may still be busy).
          if (r_timeout) s_dead[cur] <= 1'b1;
          s_nand[8*(cur) +: 8]   <= r_status;
          s_result[8*(cur) +: 8] <= ST_ABORTED;
          s_state[3*(cur) +: 3]  <= SL_CPL;
          state <= M_IDLE;
        end

        // -- completion: two words staged, then written to the ring --
        M_CPL0: state <= M_CPL1;
        M_CPL1: begin
          c_dwrite <= 1'b1;
          c_daddr  <= cq_base + {28'd0, (cq_tail & cq_mask), 4'd0};
          c_dwords <= 16'd2;
          c_dbuf   <= CPL_W;
          state <= M_DMA; ret <= M_CPL_DONE;
        end
        default: begin  // M_CPL_DONE
          // Even a completion whose write failed frees the slot (DMA_ERROR is set).
          if (cpl_ff) begin
            ff_valid <= 1'b0;
            cpl_ff   <= 1'b0;
          end else begin
            s_state[3*(cur) +: 3] <= SL_FREE;
            if (s_result[8*(cur) +: 8] == ST_FENCED) fenced <= fenced + 32'd1;
          end
          cq_tail      <= (cq_tail + 32'd1) & cq_mask;
          if (((cq_tail + 32'd1) & cq_mask) == 32'd0) phase <= !phase;
          completions  <= completions + 32'd1;
          state <= M_IDLE;
        end
      endcase
    end
  end

`ifdef FORMAL
  assign f_slots    = s_state;
  assign f_p_valid  = p_valid;
  assign f_ff_valid = ff_valid;
  assign f_fetch    = state == M_FETCH;
  assign f_fetch_rd = state == M_FETCH_RD;
  assign f_cpl_ff   = cpl_ff;
  assign f_idle     = state == M_IDLE;
  assign f_cur        = cur;
  assign f_rq_take    = rq_valid && rq_ready;
  assign f_seq        = rq_valid;
  assign f_rq_op      = rq_op;
  assign f_rs_valid   = rs_valid;
  assign f_rs_timeout = rs_timeout;
  assign f_rs_rdy     = rs_status[6];
  assign f_cpl0       = state == M_CPL0;
  assign f_cpl_word   = cpl_w0;
  assign f_slot_tags  = s_tag;
`endif

  logic unused;
  assign unused = ^{p_w0[63:40], p_w0[15:8], p_w1[31:24], p_w5[31:27], cur_w5[47:27], cur_w5[49:48], cur_w5[2:0],
                    x_i[15:AW], x_j[15:AW], z_ptr[15:AW], e_fix_addr[15:AW+3],
                    dout_ptr[15:AW+3], din_ptr[15:AW+3], enc_word[15:AW]};
endmodule
