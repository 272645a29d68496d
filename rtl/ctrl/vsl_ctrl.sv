// vsl_ctrl: the NAND controller of one FPGA: the AXI4-Lite register block, NUM_PIPES
// pipes (vsl_pipe), each with its own channel of four LUNs, ECC engine, page buffer and
// AXI4 master, and one interrupt line. Pipe p drives CHAN p and its ONFI pins are
// channel p's; its AXI4 master is the p-th slice of the m_* vectors (64-bit address and
// data per pipe), so a platform may map each pipe to its own memory bank.
//
// AP_CTRL.START and PIPE_CTRL.ENABLE together run a pipe. SOFT_RESET resets the pipes
// and channels (ring indices go back to 0; the registers keep their values): a host
// reinitialises its rings after it. The interrupt sources are each pipe's completions and
// errors (a LUN timeout, an AXI error response, a bad ring).
module vsl_ctrl #(
    parameter int unsigned NUM_PIPES = 2,
    parameter int unsigned LUNS = 4,
    parameter int unsigned BUF_WORDS = 2304,
    parameter int unsigned ACCS = 16  // page-sized XOR accumulators per pipe (FlashBack parity, copies)
) (
    input  logic                   clk,
    input  logic                   rst_n,
    // AXI4-Lite slave (registers)
    input  logic [15:0]            s_awaddr,
    input  logic                   s_awvalid,
    output logic                   s_awready,
    input  logic [31:0]            s_wdata,
    input  logic [3:0]             s_wstrb,
    input  logic                   s_wvalid,
    output logic                   s_wready,
    output logic [1:0]             s_bresp,
    output logic                   s_bvalid,
    input  logic                   s_bready,
    input  logic [15:0]            s_araddr,
    input  logic                   s_arvalid,
    output logic                   s_arready,
    output logic [31:0]            s_rdata,
    output logic [1:0]             s_rresp,
    output logic                   s_rvalid,
    input  logic                   s_rready,
    output logic                   irq,
    // AXI4 masters, pipe p in slice p
    output logic [NUM_PIPES*64-1:0] m_awaddr,
    output logic [NUM_PIPES*8-1:0]  m_awlen,
    output logic [NUM_PIPES*3-1:0]  m_awsize,
    output logic [NUM_PIPES*2-1:0]  m_awburst,
    output logic [NUM_PIPES-1:0]    m_awvalid,
    input  logic [NUM_PIPES-1:0]    m_awready,
    output logic [NUM_PIPES*64-1:0] m_wdata,
    output logic [NUM_PIPES*8-1:0]  m_wstrb,
    output logic [NUM_PIPES-1:0]    m_wlast,
    output logic [NUM_PIPES-1:0]    m_wvalid,
    input  logic [NUM_PIPES-1:0]    m_wready,
    input  logic [NUM_PIPES*2-1:0]  m_bresp,
    input  logic [NUM_PIPES-1:0]    m_bvalid,
    output logic [NUM_PIPES-1:0]    m_bready,
    output logic [NUM_PIPES*64-1:0] m_araddr,
    output logic [NUM_PIPES*8-1:0]  m_arlen,
    output logic [NUM_PIPES*3-1:0]  m_arsize,
    output logic [NUM_PIPES*2-1:0]  m_arburst,
    output logic [NUM_PIPES-1:0]    m_arvalid,
    input  logic [NUM_PIPES-1:0]    m_arready,
    input  logic [NUM_PIPES*64-1:0] m_rdata,
    input  logic [NUM_PIPES*2-1:0]  m_rresp,
    input  logic [NUM_PIPES-1:0]    m_rlast,
    input  logic [NUM_PIPES-1:0]    m_rvalid,
    output logic [NUM_PIPES-1:0]    m_rready,
    // ONFI pins, channel p in slice p
    output logic [NUM_PIPES-1:0]    ce_n,
    output logic [NUM_PIPES-1:0]    cle,
    output logic [NUM_PIPES-1:0]    ale,
    output logic [NUM_PIPES-1:0]    we_n,
    output logic [NUM_PIPES-1:0]    re_n,
    output logic [NUM_PIPES-1:0]    wp_n,
    output logic [NUM_PIPES*8-1:0]  dq_o,
    output logic [NUM_PIPES-1:0]    dq_oe,
    input  logic [NUM_PIPES*8-1:0]  dq_i,
    input  logic [NUM_PIPES-1:0]    rb_n,
    // The board's sensors (SYSMON die temperature, board power) for the SENSOR_*
    // registers; sensor_present low where nothing feeds them (docs/register-map.md).
    input  logic                    sensor_present,
    input  logic [31:0]             sensor_temp_mc,
    input  logic [31:0]             sensor_power_mw
);
  logic [NUM_PIPES*32-1:0] timing0, timing1, timing2, rb_timeout;
  logic [NUM_PIPES*64-1:0] sq_base, cq_base;
  logic [NUM_PIPES*32-1:0] sq_size, sq_tail, cq_size, cq_head, poll_gap, sq_head, cq_tail, completions;
  logic [NUM_PIPES*16-1:0] lun_reset;
  logic [NUM_PIPES-1:0]    enable, running, ring_error, dma_error, pipe_idle, cq_event, err_event, chan_busy;
  logic                    ap_start, soft_reset, pipe_rst_n;
  logic [NUM_PIPES-1:0]    own_claim, own_claim_force, own_renew, own_release;
  logic [NUM_PIPES*16-1:0] own_claim_host, own_arg_gen, own_host, own_gen;
  logic [NUM_PIPES*32-1:0] own_lease, own_lease_left, fenced;
  logic [NUM_PIPES*2-1:0]  own_status;
  logic [2:0]              irq_events;

  // SOFT_RESET resets pipes and channels; the registers keep their values.
  assign pipe_rst_n = rst_n && !soft_reset;
  always_comb begin
    irq_events = 3'd0;
    for (int p = 0; p < NUM_PIPES && p < 2; p++) irq_events[p] = cq_event[p];
    irq_events[2] = |err_event;
  end

  vsl_axil_regs #(.NUM_CHAN(NUM_PIPES), .NUM_PIPES(NUM_PIPES), .LUNS_PER_CHANNEL(LUNS), .ECC_T(8), .ACCS(ACCS)) regs (
      .clk, .rst_n,
      .s_awaddr, .s_awvalid, .s_awready, .s_wdata, .s_wstrb, .s_wvalid, .s_wready,
      .s_bresp, .s_bvalid, .s_bready, .s_araddr, .s_arvalid, .s_arready,
      .s_rdata, .s_rresp, .s_rvalid, .s_rready,
      .ap_start, .idle(&pipe_idle), .soft_reset, .irq, .irq_events,
      .chan_timing0(timing0), .chan_timing1(timing1), .chan_timing2(timing2), .chan_rb_timeout(rb_timeout),
      .chan_busy, .chan_timeout_evt(err_event), .chan_rb(rb_n),
      .pipe_sq_base(sq_base), .pipe_sq_size(sq_size), .pipe_sq_tail(sq_tail), .pipe_cq_base(cq_base),
      .pipe_cq_size(cq_size), .pipe_cq_head(cq_head), .pipe_poll_gap(poll_gap), .pipe_enable(enable),
      .pipe_lun_reset(lun_reset), .pipe_sq_head(sq_head), .pipe_cq_tail(cq_tail),
      .pipe_completions(completions), .pipe_running(running), .pipe_ring_error(ring_error),
      .pipe_dma_error(dma_error), .pipe_idle(pipe_idle),
      .pipe_own_claim(own_claim), .pipe_own_claim_host(own_claim_host), .pipe_own_claim_force(own_claim_force),
      .pipe_own_renew(own_renew), .pipe_own_release(own_release), .pipe_own_arg_gen(own_arg_gen),
      .pipe_own_lease(own_lease), .pipe_own_host(own_host), .pipe_own_gen(own_gen),
      .pipe_own_lease_left(own_lease_left), .pipe_own_status(own_status), .pipe_fenced(fenced),
      .sensor_present, .sensor_temp_mc, .sensor_power_mw
  );

  for (genvar p = 0; p < NUM_PIPES; p++) begin : g_pipe
    vsl_pipe #(.LUNS(LUNS), .BUF_WORDS(BUF_WORDS), .ACCS(ACCS)) pipe (
        .clk, .rst_n(pipe_rst_n),
        .run(ap_start && enable[p]),
        .sq_base(sq_base[64*p +: 64]), .sq_size(sq_size[32*p +: 32]), .sq_tail(sq_tail[32*p +: 32]),
        .cq_base(cq_base[64*p +: 64]), .cq_size(cq_size[32*p +: 32]), .cq_head(cq_head[32*p +: 32]),
        .poll_gap(poll_gap[32*p +: 32]), .lun_reset(lun_reset[16*p +: LUNS]),
        .own_claim(own_claim[p]), .own_claim_host(own_claim_host[16*p +: 16]),
        .own_claim_force(own_claim_force[p]), .own_renew(own_renew[p]), .own_release(own_release[p]),
        .own_arg_gen(own_arg_gen[16*p +: 16]), .own_lease(own_lease[32*p +: 32]),
        .own_host(own_host[16*p +: 16]), .own_gen(own_gen[16*p +: 16]),
        .own_lease_left(own_lease_left[32*p +: 32]), .own_granted(own_status[2*p]),
        .own_renewed(own_status[2*p+1]), .fenced(fenced[32*p +: 32]),
        .sq_head(sq_head[32*p +: 32]), .cq_tail(cq_tail[32*p +: 32]), .completions(completions[32*p +: 32]),
        .running(running[p]), .ring_error(ring_error[p]), .dma_error(dma_error[p]), .idle(pipe_idle[p]),
        .cq_event(cq_event[p]), .error_event(err_event[p]),
        .timing0(timing0[32*p +: 32]), .timing1(timing1[32*p +: 32]), .timing2(timing2[32*p +: 32]),
        .rb_timeout(rb_timeout[32*p +: 32]), .chan_busy(chan_busy[p]),
        .m_awaddr(m_awaddr[64*p +: 64]), .m_awlen(m_awlen[8*p +: 8]), .m_awsize(m_awsize[3*p +: 3]),
        .m_awburst(m_awburst[2*p +: 2]), .m_awvalid(m_awvalid[p]), .m_awready(m_awready[p]),
        .m_wdata(m_wdata[64*p +: 64]), .m_wstrb(m_wstrb[8*p +: 8]), .m_wlast(m_wlast[p]),
        .m_wvalid(m_wvalid[p]), .m_wready(m_wready[p]), .m_bresp(m_bresp[2*p +: 2]), .m_bvalid(m_bvalid[p]),
        .m_bready(m_bready[p]), .m_araddr(m_araddr[64*p +: 64]), .m_arlen(m_arlen[8*p +: 8]),
        .m_arsize(m_arsize[3*p +: 3]), .m_arburst(m_arburst[2*p +: 2]), .m_arvalid(m_arvalid[p]),
        .m_arready(m_arready[p]), .m_rdata(m_rdata[64*p +: 64]), .m_rresp(m_rresp[2*p +: 2]),
        .m_rlast(m_rlast[p]), .m_rvalid(m_rvalid[p]), .m_rready(m_rready[p]),
        .ce_n(ce_n[p]), .cle(cle[p]), .ale(ale[p]), .we_n(we_n[p]), .re_n(re_n[p]), .wp_n(wp_n[p]),
        .dq_o(dq_o[8*p +: 8]), .dq_oe(dq_oe[p]), .dq_i(dq_i[8*p +: 8]), .rb_n(rb_n[p])
    );
  end

  logic unused;
  assign unused = ^{lun_reset, ring_error};
endmodule
