// vsl_axi_dma: one pipe's AXI4 master (64-bit addresses, 64-bit data), moving whole
// 64-bit words between device memory and the pipe's page buffer.
//
// Contract: one command at a time (cmd_valid/cmd_ready, then one `done` pulse). The
// memory address must be 8-byte aligned; `cmd_words` words (>= 1) move between memory
// at cmd_addr and buffer words from cmd_buf. Bursts are INCR, 8-byte beats, at most
// MAX_BEATS long and never cross a 4 KiB boundary (the AXI rule). One burst is
// outstanding at a time. A burst answered with SLVERR/DECERR still runs to its end (the
// protocol needs every beat) and the command ends with done_err set.
//
// The buffer read port has one cycle of latency (a block RAM): write beats are read ahead
// into a two-word queue, so a burst goes out at one beat per cycle while WREADY stays high.
module vsl_axi_dma #(
    parameter int unsigned BUF_AW = 12,     // buffer word address bits
    parameter int unsigned MAX_BEATS = 16
) (
    input  logic              clk,
    input  logic              rst_n,
    input  logic              cmd_valid,
    output logic              cmd_ready,
    input  logic              cmd_write,   // 1: buffer -> memory; 0: memory -> buffer
    input  logic [63:0]       cmd_addr,
    input  logic [15:0]       cmd_words,
    input  logic [BUF_AW-1:0] cmd_buf,
    output logic              done,
    output logic              done_err,
    // page buffer
    output logic [BUF_AW-1:0] buf_raddr,
    input  logic [63:0]       buf_rdata,
    output logic              buf_we,
    output logic [BUF_AW-1:0] buf_waddr,
    output logic [63:0]       buf_wdata,
    // AXI4 master
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
  typedef enum logic [2:0] {D_IDLE, D_PLAN, D_AR, D_R, D_AW, D_W, D_B} state_e;
  state_e            state;
  logic              write_q, err_q;
  logic [63:0]       addr_q;
  logic [15:0]       left_q;    // words not yet in a burst
  logic [BUF_AW-1:0] buf_q;     // buffer word of the next beat
  logic [8:0]        beats_q;   // beats in the current burst
  logic [8:0]        beat_q;    // beats done in it
  // Write beats: a two-word queue in front of W, filled by reads issued a cycle ahead.
  logic [63:0]       q0, q1;
  logic [1:0]        wcnt, cnt_next;
  logic              pend;       // a buffer read issued last cycle: its word is on buf_rdata
  logic [8:0]        rd_left;    // beats of the burst not yet read from the buffer
  logic              pop, issue;
  assign pop      = (state == D_W) && wcnt != 2'd0 && m_wready;
  assign cnt_next = wcnt - {1'b0, pop} + {1'b0, pend};
  assign issue    = (state == D_W) && rd_left != 9'd0 && cnt_next <= 2'd1;

  // Beats of the next burst: at most MAX_BEATS, what is left, and up to the 4 KiB line.
  logic [9:0]  to_line;
  logic [15:0] plan;
  assign to_line = 10'd512 - {1'b0, addr_q[11:3]};
  always_comb begin
    plan = left_q;
    if (plan > 16'(MAX_BEATS)) plan = 16'(MAX_BEATS);
    if (plan > {6'd0, to_line}) plan = {6'd0, to_line};
  end

  assign cmd_ready = (state == D_IDLE);
  assign m_awaddr  = addr_q;
  assign m_araddr  = addr_q;
  assign m_awlen   = 8'(beats_q - 9'd1);
  assign m_arlen   = 8'(beats_q - 9'd1);
  assign m_awsize  = 3'd3;
  assign m_arsize  = 3'd3;
  assign m_awburst = 2'b01;
  assign m_arburst = 2'b01;
  assign m_awvalid = (state == D_AW);
  assign m_arvalid = (state == D_AR);
  assign m_rready  = (state == D_R);
  assign m_bready  = (state == D_B);
  assign m_wstrb   = 8'hFF;
  assign m_wvalid  = (state == D_W) && wcnt != 2'd0;
  assign m_wdata   = q0;
  assign m_wlast   = (beat_q == beats_q - 9'd1);
  assign buf_raddr = buf_q;
  assign buf_we    = (state == D_R) && m_rvalid;
  assign buf_waddr = buf_q;
  assign buf_wdata = m_rdata;

  logic unused;
  assign unused = ^cmd_addr[2:0];  // aligned by contract

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      state     <= D_IDLE;
      write_q   <= 1'b0;
      err_q     <= 1'b0;
      addr_q    <= 64'd0;
      left_q    <= 16'd0;
      buf_q     <= '0;
      beats_q   <= 9'd0;
      beat_q    <= 9'd0;
      q0        <= 64'd0;
      q1        <= 64'd0;
      wcnt      <= 2'd0;
      pend      <= 1'b0;
      rd_left   <= 9'd0;
      done      <= 1'b0;
      done_err  <= 1'b0;
    end else begin
      done <= 1'b0;
      case (state)
        D_IDLE: if (cmd_valid) begin
          write_q <= cmd_write;
          addr_q  <= {cmd_addr[63:3], 3'b000};
          left_q  <= cmd_words;
          buf_q   <= cmd_buf;
          err_q   <= 1'b0;
          state   <= D_PLAN;
        end
        D_PLAN: begin
          if (left_q == 16'd0) begin
            done     <= 1'b1;
            done_err <= err_q;
            state    <= D_IDLE;
          end else begin
            beats_q <= plan[8:0];
            beat_q  <= 9'd0;
            left_q  <= left_q - plan;
            state   <= write_q ? D_AW : D_AR;
          end
        end
        D_AR: if (m_arready) state <= D_R;
        D_R: if (m_rvalid) begin
          if (m_rresp != 2'b00) err_q <= 1'b1;
          buf_q  <= buf_q + 1'b1;
          beat_q <= beat_q + 9'd1;
          if (m_rlast || beat_q == beats_q - 9'd1) begin
            addr_q <= addr_q + {52'd0, beats_q, 3'b000};
            state  <= D_PLAN;
          end
        end
        D_AW: if (m_awready) begin
          state   <= D_W;
          wcnt    <= 2'd0;
          pend    <= 1'b0;
          rd_left <= beats_q;
        end
        D_W: begin
          if (pop) begin
            q0     <= q1;
            beat_q <= beat_q + 9'd1;
          end
          if (pend) begin
            if (wcnt - {1'b0, pop} == 2'd0) q0 <= buf_rdata;
            else q1 <= buf_rdata;
          end
          wcnt <= cnt_next;
          pend <= issue;
          if (issue) begin
            buf_q   <= buf_q + 1'b1;
            rd_left <= rd_left - 9'd1;
          end
          if (pop && beat_q == beats_q - 9'd1) state <= D_B;
        end
        default: if (m_bvalid) begin  // D_B
          if (m_bresp != 2'b00) err_q <= 1'b1;
          addr_q <= addr_q + {52'd0, beats_q, 3'b000};
          state  <= D_PLAN;
        end
      endcase
    end
  end
endmodule
