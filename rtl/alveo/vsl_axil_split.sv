// vsl_axil_split: one AXI4-Lite slave in front of two register spaces: the controller's
// AXI4-Lite slave (m_*) for offsets below EMU_BASE, and a plain register bus for the
// emulators' EMU blocks from EMU_BASE (NUM_EMU blocks of EMU_STRIDE bytes, EMU_WORDS
// registers each).
//
// One write and one read in flight at a time (each waits for its response), which is all
// a host's register accesses need. A write is taken once both its address and data are
// there. Bus writes are one-cycle pulses; bus reads are combinational (bus_rdata for
// bus_raddr), registered here. Errors answer SLVERR: an EMU offset past the block's last
// register or past the last block, and a partial-strobe write to an EMU register (they
// are whole 32-bit values). The controller's answers pass through unchanged.
module vsl_axil_split #(
    parameter logic [15:0] EMU_BASE = 16'h2000,
    parameter int unsigned EMU_STRIDE = 128,
    parameter int unsigned NUM_EMU = 2,
    parameter int unsigned EMU_WORDS = 17
) (
    input  logic        clk,
    input  logic        rst_n,
    // upstream (the host)
    input  logic [15:0] s_awaddr,
    input  logic        s_awvalid,
    output logic        s_awready,
    input  logic [31:0] s_wdata,
    input  logic [3:0]  s_wstrb,
    input  logic        s_wvalid,
    output logic        s_wready,
    output logic [1:0]  s_bresp,
    output logic        s_bvalid,
    input  logic        s_bready,
    input  logic [15:0] s_araddr,
    input  logic        s_arvalid,
    output logic        s_arready,
    output logic [31:0] s_rdata,
    output logic [1:0]  s_rresp,
    output logic        s_rvalid,
    input  logic        s_rready,
    // downstream: the controller
    output logic [15:0] m_awaddr,
    output logic        m_awvalid,
    input  logic        m_awready,
    output logic [31:0] m_wdata,
    output logic [3:0]  m_wstrb,
    output logic        m_wvalid,
    input  logic        m_wready,
    input  logic [1:0]  m_bresp,
    input  logic        m_bvalid,
    output logic        m_bready,
    output logic [15:0] m_araddr,
    output logic        m_arvalid,
    input  logic        m_arready,
    input  logic [31:0] m_rdata,
    input  logic [1:0]  m_rresp,
    input  logic        m_rvalid,
    output logic        m_rready,
    // downstream: the emulators' register bus (byte offsets)
    output logic        bus_we,
    output logic [15:0] bus_waddr,
    output logic [31:0] bus_wdata,
    output logic [15:0] bus_raddr,
    input  logic [31:0] bus_rdata
);
  localparam logic [1:0] OKAY = 2'b00, SLVERR = 2'b10;
  localparam logic [15:0] EMU_END = EMU_BASE + 16'(EMU_STRIDE * NUM_EMU);

  function automatic logic is_emu(input logic [15:0] a);
    is_emu = a >= EMU_BASE;
  endfunction
  // an EMU offset that names a register
  function automatic logic emu_ok(input logic [15:0] a);
    logic [15:0] rel;
    rel = (a - EMU_BASE) % 16'(EMU_STRIDE);
    emu_ok = a < EMU_END && rel < 16'(EMU_WORDS * 4);
  endfunction

  typedef enum logic [1:0] {W_IDLE, W_FWD, W_RESP} wstate_e;
  typedef enum logic [1:0] {R_IDLE, R_FWD, R_EMU, R_RESP} rstate_e;
  wstate_e     ws;
  rstate_e     rs;
  logic        aw_sent, w_sent;
  logic [15:0] waddr, raddr;
  logic [31:0] wdata;
  logic [3:0]  wstrb;

  assign s_awready = (ws == W_IDLE) && s_awvalid && s_wvalid;
  assign s_wready  = s_awready;
  assign s_bvalid  = (ws == W_RESP);
  assign m_awaddr  = waddr;
  assign m_wdata   = wdata;
  assign m_wstrb   = wstrb;
  assign m_awvalid = (ws == W_FWD) && !aw_sent;
  assign m_wvalid  = (ws == W_FWD) && !w_sent;
  assign m_bready  = (ws == W_FWD) && aw_sent && w_sent;
  assign bus_waddr = waddr;
  assign bus_wdata = wdata;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      ws <= W_IDLE; aw_sent <= 1'b0; w_sent <= 1'b0; waddr <= '0; wdata <= '0; wstrb <= '0;
      s_bresp <= OKAY; bus_we <= 1'b0;
    end else begin
      bus_we <= 1'b0;
      case (ws)
        W_IDLE: if (s_awready) begin
          waddr <= s_awaddr;
          wdata <= s_wdata;
          wstrb <= s_wstrb;
          if (is_emu(s_awaddr)) begin
            if (emu_ok(s_awaddr) && s_wstrb == 4'hF) begin
              bus_we  <= 1'b1;
              s_bresp <= OKAY;
            end else begin
              s_bresp <= SLVERR;
            end
            ws <= W_RESP;
          end else begin
            aw_sent <= 1'b0;
            w_sent  <= 1'b0;
            ws      <= W_FWD;
          end
        end
        W_FWD: begin
          if (m_awvalid && m_awready) aw_sent <= 1'b1;
          if (m_wvalid && m_wready) w_sent <= 1'b1;
          if (m_bready && m_bvalid) begin
            s_bresp <= m_bresp;
            ws      <= W_RESP;
          end
        end
        default: if (s_bready) ws <= W_IDLE;  // W_RESP
      endcase
    end
  end

  assign s_arready = (rs == R_IDLE);
  assign s_rvalid  = (rs == R_RESP);
  assign m_araddr  = raddr;
  logic ar_sent;
  assign m_arvalid = (rs == R_FWD) && !ar_sent;
  assign m_rready  = (rs == R_FWD) && ar_sent;
  assign bus_raddr = raddr;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      rs <= R_IDLE; raddr <= '0; ar_sent <= 1'b0; s_rdata <= '0; s_rresp <= OKAY;
    end else begin
      case (rs)
        R_IDLE: if (s_arvalid) begin
          raddr   <= s_araddr;
          ar_sent <= 1'b0;
          rs      <= is_emu(s_araddr) ? R_EMU : R_FWD;
        end
        R_FWD: begin
          if (m_arvalid && m_arready) ar_sent <= 1'b1;
          if (m_rready && m_rvalid) begin
            s_rdata <= m_rdata;
            s_rresp <= m_rresp;
            rs      <= R_RESP;
          end
        end
        R_EMU: begin
          s_rdata <= emu_ok(raddr) ? bus_rdata : 32'd0;
          s_rresp <= emu_ok(raddr) ? OKAY : SLVERR;
          rs      <= R_RESP;
        end
        default: if (s_rready) rs <= R_IDLE;  // R_RESP
      endcase
    end
  end
endmodule
