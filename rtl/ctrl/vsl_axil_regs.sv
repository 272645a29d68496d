// vsl_axil_regs: the controller's AXI4-Lite register block (docs/register-map.md), built
// from the generated package: the CTRL block, NUM_PIPES PIPE blocks (pipe p drives
// channel p) and NUM_CHAN CHAN blocks. Every address outside what the build has answers
// SLVERR (reads return 0), so a host can tell a missing register from a zero; so does a
// misaligned address (nothing is written).
//
// AXI4-Lite: one outstanding write (AW and W taken together, then B) and one outstanding
// read; WSTRB honoured byte by byte on read-write registers. ISR bits toggle on a 1
// written, as XRT's ap_ctrl_hs ISR. SOFT_RESET.RESET pulses soft_reset for one cycle and
// clears the channels' sticky TIMEOUT bits. The interrupt line is GIE & |(IER & ISR).
module vsl_axil_regs #(
    parameter int unsigned NUM_CHAN = 1,
    parameter int NUM_PIPES = 0,  // signed: the comparisons with 0 pipes stay meaningful
    parameter int unsigned LUNS_PER_CHANNEL = 4,
    parameter int unsigned ECC_T = 8,
    parameter int unsigned ACCS = 0,  // accumulators per pipe (CAPS.ACCUMULATORS)
    parameter int NP = (NUM_PIPES > 0) ? NUM_PIPES : 1  // port width only
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
    input  logic [NUM_CHAN-1:0]     chan_rb,
    // pipes (pipe p in bits [64p +: 64], [32p +: 32], [16p +: 16] or [p])
    output logic [NP*64-1:0]        pipe_sq_base,
    output logic [NP*32-1:0]        pipe_sq_size,
    output logic [NP*32-1:0]        pipe_sq_tail,
    output logic [NP*64-1:0]        pipe_cq_base,
    output logic [NP*32-1:0]        pipe_cq_size,
    output logic [NP*32-1:0]        pipe_cq_head,
    output logic [NP*32-1:0]        pipe_poll_gap,
    output logic [NP-1:0]           pipe_enable,
    output logic [NP*16-1:0]        pipe_lun_reset,  // pulses
    input  logic [NP*32-1:0]        pipe_sq_head,
    input  logic [NP*32-1:0]        pipe_cq_tail,
    input  logic [NP*32-1:0]        pipe_completions,
    input  logic [NP-1:0]           pipe_running,
    input  logic [NP-1:0]           pipe_ring_error,
    input  logic [NP-1:0]           pipe_dma_error,
    input  logic [NP-1:0]           pipe_idle,
    // pipe ownership (OWNER .. FENCED registers); claim/renew/release are pulses
    output logic [NP-1:0]           pipe_own_claim,
    output logic [NP*16-1:0]        pipe_own_claim_host,
    output logic [NP-1:0]           pipe_own_claim_force,
    output logic [NP-1:0]           pipe_own_renew,
    output logic [NP-1:0]           pipe_own_release,
    output logic [NP*16-1:0]        pipe_own_arg_gen,
    output logic [NP*32-1:0]        pipe_own_lease,
    input  logic [NP*16-1:0]        pipe_own_host,
    input  logic [NP*16-1:0]        pipe_own_gen,
    input  logic [NP*32-1:0]        pipe_own_lease_left,
    input  logic [NP*2-1:0]         pipe_own_status,   // [0] granted, [1] renewed
    input  logic [NP*32-1:0]        pipe_fenced,
    // The board's sensors (SENSOR_* registers): sampled every 4096 clocks while
    // sensor_present is high; tie sensor_present low where nothing feeds them.
    input  logic                    sensor_present,
    input  logic [31:0]             sensor_temp_mc,
    input  logic [31:0]             sensor_power_mw
);
  localparam logic [1:0] RESP_OKAY = 2'b00, RESP_SLVERR = 2'b10;

  logic        start_q, auto_restart_q, done_q, gie_q;
  logic [2:0]  ier_q, isr_q;
  logic [31:0] scratch_q;
  logic [31:0] sensor_temp_q, sensor_power_q, sensor_seq_q;
  logic [11:0] sensor_div_q;
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

  // Which PIPE block an address falls in (NUM_PIPES if none).
  function automatic int pipe_of(input logic [15:0] a);
    pipe_of = NUM_PIPES;
    for (int p = 0; p < NUM_PIPES; p++) begin
      if (a >= vsl_regmap_pkg::VSL_PIPE_BASE + 16'(p) * vsl_regmap_pkg::VSL_PIPE_STRIDE &&
          a < vsl_regmap_pkg::VSL_PIPE_BASE + 16'(p + 1) * vsl_regmap_pkg::VSL_PIPE_STRIDE) pipe_of = p;
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
  int          rp;
  logic [15:0] rpoff;
  assign rp    = pipe_of(ra);
  assign rpoff = ra - (vsl_regmap_pkg::VSL_PIPE_BASE + 16'(rp) * vsl_regmap_pkg::VSL_PIPE_STRIDE);

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
  int          wp;
  logic [15:0] wpoff;
  assign wp    = pipe_of(wa);
  assign wpoff = wa - (vsl_regmap_pkg::VSL_PIPE_BASE + 16'(wp) * vsl_regmap_pkg::VSL_PIPE_STRIDE);
  // The addressed PIPE register's value with the write's bytes merged in.
  logic [31:0] pw_old, pw_new;
  always_comb begin
    pw_old = 32'd0;
    if (wp < NUM_PIPES) begin
      case (wpoff)
        vsl_regmap_pkg::VSL_PIPE_SQ_BASE_LO: pw_old = pipe_sq_base[64*wp +: 32];
        vsl_regmap_pkg::VSL_PIPE_SQ_BASE_HI: pw_old = pipe_sq_base[64*wp + 32 +: 32];
        vsl_regmap_pkg::VSL_PIPE_SQ_SIZE:    pw_old = pipe_sq_size[32*wp +: 32];
        vsl_regmap_pkg::VSL_PIPE_SQ_TAIL:    pw_old = pipe_sq_tail[32*wp +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_BASE_LO: pw_old = pipe_cq_base[64*wp +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_BASE_HI: pw_old = pipe_cq_base[64*wp + 32 +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_SIZE:    pw_old = pipe_cq_size[32*wp +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_HEAD:    pw_old = pipe_cq_head[32*wp +: 32];
        vsl_regmap_pkg::VSL_PIPE_POLL_GAP:   pw_old = pipe_poll_gap[32*wp +: 32];
        vsl_regmap_pkg::VSL_PIPE_OWN_LEASE:  pw_old = pipe_own_lease[32*wp +: 32];
        default: ;
      endcase
    end
    pw_new = merge(pw_old, s_wdata, s_wstrb);
  end

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
      pipe_sq_base    <= '0;
      pipe_sq_size    <= '0;
      pipe_sq_tail    <= '0;
      pipe_cq_base    <= '0;
      pipe_cq_size    <= '0;
      pipe_cq_head    <= '0;
      pipe_poll_gap   <= {NP{vsl_regmap_pkg::VSL_PIPE_POLL_GAP_RESET}};
      pipe_enable     <= '0;
      pipe_lun_reset  <= '0;
      pipe_own_claim  <= '0;
      pipe_own_claim_host  <= '0;
      pipe_own_claim_force <= '0;
      pipe_own_renew  <= '0;
      pipe_own_release <= '0;
      pipe_own_arg_gen <= '0;
      pipe_own_lease  <= '0;
    end else begin
      soft_reset     <= 1'b0;
      pipe_lun_reset <= '0;
      pipe_own_claim   <= '0;
      pipe_own_renew   <= '0;
      pipe_own_release <= '0;
      isr_q      <= isr_q | irq_events;
      timeout_q  <= timeout_q | chan_timeout_evt;
      if (s_bvalid && s_bready) s_bvalid <= 1'b0;
      if (wr_fire) begin
        s_bvalid <= 1'b1;
        s_bresp  <= RESP_OKAY;
        if (s_awaddr[1:0] != 2'b00) begin
          s_bresp <= RESP_SLVERR;  // misaligned: nothing written
        end else if (wp < NUM_PIPES) begin
          case (wpoff)
            vsl_regmap_pkg::VSL_PIPE_SQ_BASE_LO: pipe_sq_base[64*wp +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_SQ_BASE_HI: pipe_sq_base[64*wp + 32 +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_SQ_SIZE: pipe_sq_size[32*wp +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_SQ_TAIL: pipe_sq_tail[32*wp +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_CQ_BASE_LO: pipe_cq_base[64*wp +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_CQ_BASE_HI: pipe_cq_base[64*wp + 32 +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_CQ_SIZE: pipe_cq_size[32*wp +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_CQ_HEAD: pipe_cq_head[32*wp +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_POLL_GAP: pipe_poll_gap[32*wp +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_PIPE_CTRL:
              if (s_wstrb[0]) pipe_enable <= (pipe_enable & ~(NP'(1) << wp)) | (NP'(s_wdata[0]) << wp);
            vsl_regmap_pkg::VSL_PIPE_LUN_RESET: pipe_lun_reset[16*wp +: 16] <= s_wdata[15:0];
            vsl_regmap_pkg::VSL_PIPE_OWN_CLAIM: begin
              pipe_own_claim                <= NP'(1) << wp;
              pipe_own_claim_host[16*wp +: 16] <= s_wdata[15:0];
              pipe_own_claim_force          <= (pipe_own_claim_force & ~(NP'(1) << wp)) | (NP'(s_wdata[16]) << wp);
            end
            vsl_regmap_pkg::VSL_PIPE_OWN_LEASE: pipe_own_lease[32*wp +: 32] <= pw_new;
            vsl_regmap_pkg::VSL_PIPE_OWN_RENEW: begin
              pipe_own_renew                <= NP'(1) << wp;
              pipe_own_arg_gen[16*wp +: 16] <= s_wdata[15:0];
            end
            vsl_regmap_pkg::VSL_PIPE_OWN_RELEASE: begin
              pipe_own_release              <= NP'(1) << wp;
              pipe_own_arg_gen[16*wp +: 16] <= s_wdata[15:0];
            end
            vsl_regmap_pkg::VSL_PIPE_SQ_HEAD, vsl_regmap_pkg::VSL_PIPE_CQ_TAIL, vsl_regmap_pkg::VSL_PIPE_PIPE_STATUS,
            vsl_regmap_pkg::VSL_PIPE_PIPE_INFO, vsl_regmap_pkg::VSL_PIPE_COMPLETIONS, vsl_regmap_pkg::VSL_PIPE_OWNER,
            vsl_regmap_pkg::VSL_PIPE_OWN_LEASE_LEFT, vsl_regmap_pkg::VSL_PIPE_OWN_STATUS,
            vsl_regmap_pkg::VSL_PIPE_FENCED: ;  // read-only
            default: s_bresp <= RESP_SLVERR;
          endcase
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
            vsl_regmap_pkg::VSL_CTRL_STATUS, vsl_regmap_pkg::VSL_CTRL_SENSOR_TEMP,
            vsl_regmap_pkg::VSL_CTRL_SENSOR_POWER, vsl_regmap_pkg::VSL_CTRL_SENSOR_SEQ: ;  // read-only: ignored
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
    end else if (rp < NUM_PIPES) begin
      case (rpoff)
        vsl_regmap_pkg::VSL_PIPE_SQ_BASE_LO:  rdata = pipe_sq_base[64*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_SQ_BASE_HI:  rdata = pipe_sq_base[64*rp + 32 +: 32];
        vsl_regmap_pkg::VSL_PIPE_SQ_SIZE:     rdata = pipe_sq_size[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_SQ_TAIL:     rdata = pipe_sq_tail[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_SQ_HEAD:     rdata = pipe_sq_head[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_BASE_LO:  rdata = pipe_cq_base[64*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_BASE_HI:  rdata = pipe_cq_base[64*rp + 32 +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_SIZE:     rdata = pipe_cq_size[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_TAIL:     rdata = pipe_cq_tail[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_CQ_HEAD:     rdata = pipe_cq_head[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_PIPE_CTRL:   rdata = {31'd0, pipe_enable[rp]};
        vsl_regmap_pkg::VSL_PIPE_PIPE_STATUS: begin
          rdata[vsl_regmap_pkg::VSL_PIPE_PIPE_STATUS_RUNNING_LSB]    = pipe_running[rp];
          rdata[vsl_regmap_pkg::VSL_PIPE_PIPE_STATUS_RING_ERROR_LSB] = pipe_ring_error[rp];
          rdata[vsl_regmap_pkg::VSL_PIPE_PIPE_STATUS_DMA_ERROR_LSB]  = pipe_dma_error[rp];
          rdata[vsl_regmap_pkg::VSL_PIPE_PIPE_STATUS_IDLE_LSB]       = pipe_idle[rp];
        end
        vsl_regmap_pkg::VSL_PIPE_PIPE_INFO: begin
          rdata[vsl_regmap_pkg::VSL_PIPE_PIPE_INFO_FIRST_CHANNEL_LSB +: 8] = 8'(rp);
          rdata[vsl_regmap_pkg::VSL_PIPE_PIPE_INFO_CHANNELS_LSB +: 8]      = 8'd1;
        end
        vsl_regmap_pkg::VSL_PIPE_COMPLETIONS: rdata = pipe_completions[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_LUN_RESET:   rdata = 32'd0;  // write-only
        vsl_regmap_pkg::VSL_PIPE_POLL_GAP:    rdata = pipe_poll_gap[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_OWNER:       rdata = {pipe_own_gen[16*rp +: 16], pipe_own_host[16*rp +: 16]};
        vsl_regmap_pkg::VSL_PIPE_OWN_CLAIM, vsl_regmap_pkg::VSL_PIPE_OWN_RENEW,
        vsl_regmap_pkg::VSL_PIPE_OWN_RELEASE: rdata = 32'd0;  // write-only
        vsl_regmap_pkg::VSL_PIPE_OWN_LEASE:   rdata = pipe_own_lease[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_OWN_LEASE_LEFT: rdata = pipe_own_lease_left[32*rp +: 32];
        vsl_regmap_pkg::VSL_PIPE_OWN_STATUS:  rdata = {30'd0, pipe_own_status[2*rp +: 2]};
        vsl_regmap_pkg::VSL_PIPE_FENCED:      rdata = pipe_fenced[32*rp +: 32];
        default: rerr = 1'b1;
      endcase
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
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_PIPES_LSB +: 4]             = 4'(NUM_PIPES);
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_CHANNELS_PER_PIPE_LSB +: 4] = NUM_PIPES > 0 ? 4'd1 : 4'(NUM_CHAN);
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_LUNS_PER_CHANNEL_LSB +: 4]  = 4'(LUNS_PER_CHANNEL);
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_ECC_T_LSB +: 5]             = 5'(ECC_T);
          rdata[vsl_regmap_pkg::VSL_CTRL_CAPS_ACCUMULATORS_LSB +: 8]      = 8'(ACCS);
        end
        vsl_regmap_pkg::VSL_CTRL_SCRATCH:    rdata = scratch_q;
        vsl_regmap_pkg::VSL_CTRL_SENSOR_TEMP:  rdata = sensor_temp_q;
        vsl_regmap_pkg::VSL_CTRL_SENSOR_POWER: rdata = sensor_power_q;
        vsl_regmap_pkg::VSL_CTRL_SENSOR_SEQ:   rdata = sensor_seq_q;
        vsl_regmap_pkg::VSL_CTRL_SOFT_RESET: rdata = 32'd0;  // write-only
        vsl_regmap_pkg::VSL_CTRL_STATUS: begin
          rdata[vsl_regmap_pkg::VSL_CTRL_STATUS_RUNNING_LSB] = start_q;
          rdata[vsl_regmap_pkg::VSL_CTRL_STATUS_ERROR_LSB]   = |timeout_q || |(pipe_ring_error | pipe_dma_error);
        end
        default: rerr = 1'b1;
      endcase
    end
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      sensor_div_q   <= 12'd0;
      sensor_temp_q  <= 32'd0;
      sensor_power_q <= 32'd0;
      sensor_seq_q   <= 32'd0;
    end else begin
      sensor_div_q <= sensor_div_q + 12'd1;
      if (sensor_present && sensor_div_q == 12'd0) begin
        sensor_temp_q  <= sensor_temp_mc;
        sensor_power_q <= sensor_power_mw;
        sensor_seq_q   <= sensor_seq_q + 32'd1;
      end
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
