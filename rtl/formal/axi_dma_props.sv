// Formal properties of vsl_axi_dma, a pipe's AXI4 master (docs/formal.md).
//
// Environment: reset low in the first cycle only; commands follow the module's contract
// (8-byte aligned address, at least one word); the AXI slave answers only what was asked
// (R beats only while a read burst is outstanding, RLAST on its last beat; B only after a
// write burst's last W beat), with any timing and any response code; buffer data free.
// One property per run (`PROP):
//   1 AR_STABLE       ARVALID, once high, holds with ARADDR/ARLEN until ARREADY
//   2 AW_STABLE       AWVALID, once high, holds with AWADDR/AWLEN until AWREADY
//   3 W_STABLE        WVALID, once high, holds with WDATA/WLAST/WSTRB until WREADY
//   4 NO_4K_CROSSING  no burst crosses a 4 KiB boundary
//   5 AT_MOST_16      no burst is longer than 16 beats
//   6 ONE_BURST       at most one burst (read or write) outstanding
//   7 WLAST_EXACT     WLAST is high exactly on a write burst's last beat
//   8 DONE_ONCE       one done per command, never one without a command
//   9 WORDS_EXACT     a command's bursts move exactly the words it asked for
//  10 IN_RANGE        every burst (read or write) lies inside its command's range
//                     [addr, addr + 8 * words): the DMA never touches host memory
//                     it was not given
//  11 BUF_IN_RANGE    the buffer is written only by a read command, each word once, in
//                     order, at the command's buffer address plus the words before it
//                     (never more words than asked)
`ifndef PROP
`define PROP 1
`endif
module axi_dma_props (
    input logic        clk,
    input logic        cmd_valid,
    input logic        cmd_write,
    input logic [63:0] cmd_addr,
    input logic [15:0] cmd_words,
    input logic [3:0]  cmd_buf,
    input logic [63:0] buf_rdata,
    input logic        m_awready, m_wready, m_bvalid, m_arready, m_rlast, m_rvalid,
    input logic [1:0]  m_bresp, m_rresp,
    input logic [63:0] m_rdata
);
  logic started = 1'b0;
  always_ff @(posedge clk) started <= 1'b1;
  wire rst_n = started;

  logic cmd_ready, done, done_err, buf_we, m_awvalid, m_wlast, m_wvalid, m_bready, m_arvalid, m_rready;
  logic [3:0] buf_raddr, buf_waddr;
  logic [63:0] buf_wdata, m_awaddr, m_wdata, m_araddr;
  logic [7:0] m_awlen, m_arlen, m_wstrb;
  logic [2:0] m_awsize, m_arsize;
  logic [1:0] m_awburst, m_arburst;
  vsl_axi_dma #(.BUF_AW(4), .MAX_BEATS(16)) dut (
      .clk, .rst_n, .cmd_valid, .cmd_ready, .cmd_write, .cmd_addr, .cmd_words, .cmd_buf, .done, .done_err,
      .buf_raddr, .buf_rdata, .buf_we, .buf_waddr, .buf_wdata, .m_awaddr, .m_awlen, .m_awsize, .m_awburst,
      .m_awvalid, .m_awready, .m_wdata, .m_wstrb, .m_wlast, .m_wvalid, .m_wready, .m_bresp, .m_bvalid, .m_bready,
      .m_araddr, .m_arlen, .m_arsize, .m_arburst, .m_arvalid, .m_arready, .m_rdata, .m_rresp, .m_rlast, .m_rvalid,
      .m_rready);

  // --- monitors ---
  wire cmd_take = started && cmd_valid && cmd_ready;
  wire ar_take = m_arvalid && m_arready, aw_take = m_awvalid && m_awready;
  wire r_beat = m_rvalid && m_rready, w_beat = m_wvalid && m_wready, b_take = m_bvalid && m_bready;
  logic [8:0] r_left = 9'd0;     // beats of the outstanding read burst still to come
  logic [8:0] w_left = 9'd0;     // W beats of the outstanding write burst still to send
  logic       b_due = 1'b0;      // a write burst sent all its beats, its B not yet taken
  logic       w_open = 1'b0;     // a write burst's address was taken
  logic [1:0] cmds = 2'd0;       // commands taken, not yet done
  logic [16:0] moved = 17'd0;    // words of the current command's bursts so far
  logic [15:0] asked = 16'd0;    // words the current command asked for
  logic [63:0] base = 64'd0;     // the current command's address
  logic [3:0]  buf_base = 4'd0;  // its buffer word
  logic        cmd_wr = 1'b0;    // it is a write (the DMA reads the buffer)
  logic [16:0] wrote = 17'd0;    // buffer words it has written
  logic [1:0] bursts = 2'd0;     // bursts of the current command (saturating)
  logic ar_q = 1'b0, aw_q = 1'b0, w_q = 1'b0;
  logic [63:0] araddr_q = 64'd0, awaddr_q = 64'd0, wdata_q = 64'd0;
  logic [7:0] arlen_q = 8'd0, awlen_q = 8'd0, wstrb_q = 8'd0;
  logic wlast_q = 1'b0;
  always_ff @(posedge clk) begin
    if (ar_take) r_left <= {1'b0, m_arlen} + 9'd1;
    else if (r_beat && r_left != 9'd0) r_left <= r_left - 9'd1;
    if (aw_take) begin
      w_left <= {1'b0, m_awlen} + 9'd1;
      w_open <= 1'b1;
    end else if (w_beat && w_left != 9'd0) begin
      w_left <= w_left - 9'd1;
      if (w_left == 9'd1) b_due <= 1'b1;
    end
    if (b_take) begin
      b_due <= 1'b0;
      w_open <= 1'b0;
    end
    cmds <= cmds + (cmd_take ? 2'd1 : 2'd0) - (done ? 2'd1 : 2'd0);
    if (cmd_take) bursts <= 2'd0;
    else if ((ar_take || aw_take) && bursts != 2'd3) bursts <= bursts + 2'd1;
    if (cmd_take) begin
      moved <= 17'd0;
      asked <= cmd_words;
      base  <= cmd_addr;
      buf_base <= cmd_buf;
      cmd_wr <= cmd_write;
      wrote <= 17'd0;
    end else begin
      if (buf_we) wrote <= wrote + 17'd1;
      if (ar_take) moved <= moved + {9'd0, m_arlen} + 17'd1;
      if (aw_take) moved <= moved + {9'd0, m_awlen} + 17'd1;
    end
    ar_q <= m_arvalid && !m_arready; aw_q <= m_awvalid && !m_awready; w_q <= m_wvalid && !m_wready;
    araddr_q <= m_araddr; awaddr_q <= m_awaddr; wdata_q <= m_wdata; arlen_q <= m_arlen; awlen_q <= m_awlen;
    wstrb_q <= m_wstrb; wlast_q <= m_wlast;
  end

  // --- environment (combinational) ---
  always @* begin
    if (started) begin
      assume (!cmd_valid || (cmd_addr[2:0] == 3'd0 && cmd_words != 16'd0));
      // The range does not wrap past the top of the address space (the host maps none).
      assume (!cmd_valid || {1'b0, cmd_addr} + {46'd0, cmd_words, 3'b000} <= 65'h1_0000_0000_0000_0000);
      assume (!m_rvalid || r_left != 9'd0);
      assume (!m_rvalid || m_rlast == (r_left == 9'd1));
      assume (!m_bvalid || b_due);
    end
  end

  function automatic logic crosses(input logic [63:0] a, input logic [7:0] len);
    crosses = ({1'b0, a[11:0]} + (({5'd0, len} + 13'd1) << 3)) > 13'd4096;
  endfunction

  // A burst of len+1 beats at `a` inside [base, base + 8 * asked), in 65 bits (no wrap).
  function automatic logic inside(input logic [63:0] a, input logic [7:0] len);
    inside = a >= base &&
             {1'b0, a} + {54'd0, ({1'b0, len} + 9'd1), 3'b000} <= {1'b0, base} + {46'd0, asked, 3'b000};
  endfunction

  logic [11:0] ok;
  always_comb begin
    ok = '1;
    ok[1] = !ar_q || (m_arvalid && m_araddr == araddr_q && m_arlen == arlen_q);
    ok[2] = !aw_q || (m_awvalid && m_awaddr == awaddr_q && m_awlen == awlen_q);
    ok[3] = !w_q || (m_wvalid && m_wdata == wdata_q && m_wlast == wlast_q && m_wstrb == wstrb_q);
    ok[4] = !(m_arvalid && crosses(m_araddr, m_arlen)) && !(m_awvalid && crosses(m_awaddr, m_awlen));
    ok[5] = !(m_arvalid && m_arlen > 8'd15) && !(m_awvalid && m_awlen > 8'd15);
    ok[6] = !(m_arvalid && (r_left != 9'd0 || w_open)) && !(m_awvalid && (r_left != 9'd0 || w_open));
    ok[7] = !m_wvalid || (w_left != 9'd0 && m_wlast == (w_left == 9'd1));
    ok[8] = cmds <= 2'd1 && !(done && cmds == 2'd0);
    ok[9] = !done || moved == {1'b0, asked};
    ok[10] = !(m_arvalid && !(cmds != 2'd0 && inside(m_araddr, m_arlen))) &&
             !(m_awvalid && !(cmds != 2'd0 && inside(m_awaddr, m_awlen)));
    ok[11] = !buf_we || (cmds != 2'd0 && !cmd_wr && wrote < {1'b0, asked} && buf_waddr == buf_base + wrote[3:0]);
  end
`ifndef COVER
  always @* if (started) assert (ok[`PROP]);
`else
  logic [11:0] hit;
  always_comb begin
    hit = '0;
    hit[1] = ar_q;
    hit[2] = aw_q;
    hit[3] = w_q;
    hit[4] = m_arvalid && m_araddr[11:3] == 9'h1FE && m_arlen == 8'd1;  // a burst that ends at the line
    hit[5] = m_awvalid && m_awlen == 8'd15;
    hit[6] = m_arvalid && moved != 17'd0;  // a second burst of one command
    hit[7] = w_beat && m_wlast && w_left == 9'd1 && awlen_q != 8'd0;
    hit[8] = done && cmds == 2'd1;
    hit[9] = done && bursts >= 2'd2;  // a command of several bursts
    // A write burst, not the command's first, that ends exactly at the range's end.
    hit[10] = m_awvalid && moved != 17'd0 &&
              {1'b0, m_awaddr} + {54'd0, ({1'b0, m_awlen} + 9'd1), 3'b000} == {1'b0, base} + {46'd0, asked, 3'b000};
    hit[11] = buf_we && bursts >= 2'd2 && wrote + 17'd1 == {1'b0, asked};  // the last word, in a later burst
  end
  always @* if (started) assert (!hit[`PROP]);
`endif
endmodule
