// Abstract blocks under vsl_pipe for its formal harness (rtl/formal/pipe_props.sv,
// docs/formal.md): same module names and ports as the real channel, DMA and ECC, read in
// their place. Each keeps the handshake its real block is proved (or built) to keep and
// leaves everything else free: the undriven `f_*` wires are free inputs in every cycle
// (the runner's `setundef -anyseq`). That is a superset of what the real blocks do, so a
// property of the pipe's bookkeeping proved over them holds over the real ones.

// The channel (vsl_onfi_channel: the sequencer over the pin engine). One request at a
// time (onfi_seq ONE_RESPONSE): taken when none is open, answered once after any delay
// with any status and any timeout; data bytes out and in at any time while it is open.
// The pins are constant: the pipe's harness does not look at them.
module vsl_onfi_channel (
    input  logic        clk,
    input  logic        rst_n,
    input  logic [31:0] timing0,
    input  logic [31:0] timing1,
    input  logic [31:0] timing2,
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
  logic       f_resp, f_dout, f_din_ready, f_timeout;
  logic [7:0] f_status, f_byte;
  logic       open;
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) open <= 1'b0;
    else if (req_valid && req_ready) open <= 1'b1;
    else if (resp_valid) open <= 1'b0;
  end
  assign req_ready    = !open;
  assign resp_valid   = open && f_resp;
  assign resp_status  = f_status;
  assign resp_timeout = f_timeout;
  assign dout_valid   = open && f_dout;
  assign dout_data    = f_byte;
  assign din_ready    = open && f_din_ready;
  assign busy         = open;
  assign {ce_n, cle, ale, we_n, re_n, wp_n, dq_o, dq_oe} = {1'b1, 1'b0, 1'b0, 1'b1, 1'b1, 1'b1, 8'd0, 1'b0};
  logic unused;
  assign unused = ^{timing0, timing1, timing2, rb_timeout, req_op, req_row, req_col, req_len, din_data, din_valid,
                    dq_i, rb_n};
endmodule

// The DMA (vsl_axi_dma: axi_dma DONE_ONCE, BUF_IN_RANGE). One command at a time, done once
// after any delay, with or without an error; a read command (memory to buffer) writes any
// words of the buffer with any data while it runs, a write command none.
module vsl_axi_dma #(
    parameter int unsigned BUF_AW = 12,
    parameter int unsigned MAX_BEATS = 16
) (
    input  logic              clk,
    input  logic              rst_n,
    input  logic              cmd_valid,
    output logic              cmd_ready,
    input  logic              cmd_write,
    input  logic [63:0]       cmd_addr,
    input  logic [15:0]       cmd_words,
    input  logic [BUF_AW-1:0] cmd_buf,
    output logic              done,
    output logic              done_err,
    output logic [BUF_AW-1:0] buf_raddr,
    input  logic [63:0]       buf_rdata,
    output logic              buf_we,
    output logic [BUF_AW-1:0] buf_waddr,
    output logic [63:0]       buf_wdata,
    output logic [63:0]       m_awaddr,
    output logic [7:0]        m_awlen,
    output logic [2:0]        m_awsize,
    output logic [1:0]        m_awburst,
    output logic              m_awvalid,
    input  logic              m_awready,
    output logic [63:0]       m_wdata,
    output logic [7:0]        m_wstrb,
    output logic              m_wlast,
    output logic              m_wvalid,
    input  logic              m_wready,
    input  logic [1:0]        m_bresp,
    input  logic              m_bvalid,
    output logic              m_bready,
    output logic [63:0]       m_araddr,
    output logic [7:0]        m_arlen,
    output logic [2:0]        m_arsize,
    output logic [1:0]        m_arburst,
    output logic              m_arvalid,
    input  logic              m_arready,
    input  logic [63:0]       m_rdata,
    input  logic [1:0]        m_rresp,
    input  logic              m_rlast,
    input  logic              m_rvalid,
    output logic              m_rready
);
  logic              f_done, f_err, f_we;
  logic [BUF_AW-1:0] f_waddr;
  logic [63:0]       f_wdata;
  logic              busy, writing;
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      busy <= 1'b0;
      writing <= 1'b0;
    end else if (cmd_valid && cmd_ready) begin
      busy <= 1'b1;
      writing <= cmd_write;
    end else if (done) begin
      busy <= 1'b0;
    end
  end
  assign cmd_ready = !busy;
  assign done      = busy && f_done;
  assign done_err  = f_err;
  assign buf_we    = busy && !writing && f_we;
  assign buf_waddr = f_waddr;
  assign buf_wdata = f_wdata;
  assign buf_raddr = '0;
  assign {m_awaddr, m_awlen, m_awsize, m_awburst, m_awvalid, m_wdata, m_wstrb, m_wlast, m_wvalid, m_bready} = '0;
  assign {m_araddr, m_arlen, m_arsize, m_arburst, m_arvalid, m_rready} = '0;
  logic unused;
  assign unused = ^{cmd_addr, cmd_words, cmd_buf, buf_rdata, m_awready, m_wready, m_bresp, m_bvalid, m_arready,
                    m_rdata, m_rresp, m_rlast, m_rvalid};
endmodule

// The ECC engine: done at any time after a start, with any result and any corrections
// (the real one is a DPI model in simulation and a BCH core in hardware; the pipe's
// bookkeeping does not depend on what it computes).
module vsl_ecc #(
    parameter int ID = 0
) (
    input  logic        clk,
    input  logic        rst_n,
    input  logic        start,
    input  logic        decode,
    input  logic [15:0] data_bytes,
    input  logic [15:0] meta_bytes,
    input  logic [15:0] spare_bytes,
    input  logic        in_valid,
    input  logic [63:0] in_word,
    input  logic [3:0]  in_nbytes,
    input  logic        in_last,
    output logic        fix_valid,
    output logic [15:0] fix_addr,
    output logic [7:0]  fix_data,
    output logic        done,
    output logic [15:0] corrected,
    output logic        uncorrectable
);
  logic        f_done, f_fix, f_unc;
  logic [15:0] f_addr, f_corr;
  logic [7:0]  f_data;
  logic        running;
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) running <= 1'b0;
    else if (start) running <= 1'b1;
    else if (done) running <= 1'b0;
  end
  assign done          = running && f_done;
  assign fix_valid     = running && f_fix;
  assign fix_addr      = f_addr;
  assign fix_data      = f_data;
  assign corrected     = f_corr;
  assign uncorrectable = f_unc;
  logic unused;
  assign unused = ^{decode, data_bytes, meta_bytes, spare_bytes, in_valid, in_word, in_nbytes, in_last, ID};
endmodule
