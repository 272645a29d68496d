// vsl_kernel: the Vitis RTL kernel for Alveo cards: the controller of one FPGA
// (vsl_ctrl: registers, two pipes, ECC, DMA) with a synthesizable NAND emulator
// (vsl_nand_emu) on each pipe's ONFI pins, since an Alveo card has no NAND. The pins stay
// inside the kernel; the emulators keep their pages in card memory (HBM or DDR) through
// their own AXI4 masters.
//
// Interfaces, named as Vitis expects of an RTL kernel (rtl/alveo/package_xo.tcl):
//   s_axi_control   AXI4-Lite, 16-bit addresses: the whole register map. Offsets below
//                   0x2000 reach the controller, the EMU blocks (0x2000 + 0x80 p) the
//                   emulators (vsl_axil_split).
//   m_axi_pipe0/1   each pipe's DMA master: its rings and bounce buffers (kernel
//                   arguments pipe0_ring/pipe1_ring = PIPE p SQ_BASE, 64-bit)
//   m_axi_store0/1  each emulator's page store (arguments store0/store1 = EMU p
//                   STORE_BASE, 64-bit)
//   interrupt       the controller's interrupt line (ap_ctrl_hs-style GIE/IER/ISR)
// The kernel is user-managed: the host drives it through xrt::ip register access and
// its own ring protocol (vsl/hw/ctrl_pipe.h), never through xrt::run.
module vsl_kernel #(
    parameter int unsigned LUNS = 4,
    parameter int unsigned BLOCKS = 16,
    parameter int unsigned PAGES = 8,
    parameter int unsigned DATA_BYTES = 4096,
    parameter int unsigned SPARE_BYTES = 224
) (
    // clock and active-low reset (ap_rst_n also erases the emulated NAND)
    input  logic         ap_clk,
    input  logic         ap_rst_n,
    // s_axi_control: the register map (docs/register-map.md), controller and emulators
    input  logic [15:0]  s_axi_control_awaddr,
    input  logic         s_axi_control_awvalid,
    output logic         s_axi_control_awready,
    input  logic [31:0]  s_axi_control_wdata,
    input  logic [3:0]   s_axi_control_wstrb,
    input  logic         s_axi_control_wvalid,
    output logic         s_axi_control_wready,
    output logic [1:0]   s_axi_control_bresp,
    output logic         s_axi_control_bvalid,
    input  logic         s_axi_control_bready,
    input  logic [15:0]  s_axi_control_araddr,
    input  logic         s_axi_control_arvalid,
    output logic         s_axi_control_arready,
    output logic [31:0]  s_axi_control_rdata,
    output logic [1:0]   s_axi_control_rresp,
    output logic         s_axi_control_rvalid,
    input  logic         s_axi_control_rready,
    // m_axi_pipe0: pipe 0's rings and data buffers (argument pipe0_ring)
    output logic [63:0]  m_axi_pipe0_awaddr,
    output logic [7:0]   m_axi_pipe0_awlen,
    output logic [2:0]   m_axi_pipe0_awsize,
    output logic [1:0]   m_axi_pipe0_awburst,
    output logic         m_axi_pipe0_awvalid,
    input  logic         m_axi_pipe0_awready,
    output logic [63:0]  m_axi_pipe0_wdata,
    output logic [7:0]   m_axi_pipe0_wstrb,
    output logic         m_axi_pipe0_wlast,
    output logic         m_axi_pipe0_wvalid,
    input  logic         m_axi_pipe0_wready,
    input  logic [1:0]   m_axi_pipe0_bresp,
    input  logic         m_axi_pipe0_bvalid,
    output logic         m_axi_pipe0_bready,
    output logic [63:0]  m_axi_pipe0_araddr,
    output logic [7:0]   m_axi_pipe0_arlen,
    output logic [2:0]   m_axi_pipe0_arsize,
    output logic [1:0]   m_axi_pipe0_arburst,
    output logic         m_axi_pipe0_arvalid,
    input  logic         m_axi_pipe0_arready,
    input  logic [63:0]  m_axi_pipe0_rdata,
    input  logic [1:0]   m_axi_pipe0_rresp,
    input  logic         m_axi_pipe0_rlast,
    input  logic         m_axi_pipe0_rvalid,
    output logic         m_axi_pipe0_rready,
    // m_axi_pipe1: pipe 1's rings and data buffers (argument pipe1_ring)
    output logic [63:0]  m_axi_pipe1_awaddr,
    output logic [7:0]   m_axi_pipe1_awlen,
    output logic [2:0]   m_axi_pipe1_awsize,
    output logic [1:0]   m_axi_pipe1_awburst,
    output logic         m_axi_pipe1_awvalid,
    input  logic         m_axi_pipe1_awready,
    output logic [63:0]  m_axi_pipe1_wdata,
    output logic [7:0]   m_axi_pipe1_wstrb,
    output logic         m_axi_pipe1_wlast,
    output logic         m_axi_pipe1_wvalid,
    input  logic         m_axi_pipe1_wready,
    input  logic [1:0]   m_axi_pipe1_bresp,
    input  logic         m_axi_pipe1_bvalid,
    output logic         m_axi_pipe1_bready,
    output logic [63:0]  m_axi_pipe1_araddr,
    output logic [7:0]   m_axi_pipe1_arlen,
    output logic [2:0]   m_axi_pipe1_arsize,
    output logic [1:0]   m_axi_pipe1_arburst,
    output logic         m_axi_pipe1_arvalid,
    input  logic         m_axi_pipe1_arready,
    input  logic [63:0]  m_axi_pipe1_rdata,
    input  logic [1:0]   m_axi_pipe1_rresp,
    input  logic         m_axi_pipe1_rlast,
    input  logic         m_axi_pipe1_rvalid,
    output logic         m_axi_pipe1_rready,
    // m_axi_store0: pipe 0's emulated NAND pages (argument store0)
    output logic [63:0]  m_axi_store0_awaddr,
    output logic [7:0]   m_axi_store0_awlen,
    output logic [2:0]   m_axi_store0_awsize,
    output logic [1:0]   m_axi_store0_awburst,
    output logic         m_axi_store0_awvalid,
    input  logic         m_axi_store0_awready,
    output logic [63:0]  m_axi_store0_wdata,
    output logic [7:0]   m_axi_store0_wstrb,
    output logic         m_axi_store0_wlast,
    output logic         m_axi_store0_wvalid,
    input  logic         m_axi_store0_wready,
    input  logic [1:0]   m_axi_store0_bresp,
    input  logic         m_axi_store0_bvalid,
    output logic         m_axi_store0_bready,
    output logic [63:0]  m_axi_store0_araddr,
    output logic [7:0]   m_axi_store0_arlen,
    output logic [2:0]   m_axi_store0_arsize,
    output logic [1:0]   m_axi_store0_arburst,
    output logic         m_axi_store0_arvalid,
    input  logic         m_axi_store0_arready,
    input  logic [63:0]  m_axi_store0_rdata,
    input  logic [1:0]   m_axi_store0_rresp,
    input  logic         m_axi_store0_rlast,
    input  logic         m_axi_store0_rvalid,
    output logic         m_axi_store0_rready,
    // m_axi_store1: pipe 1's emulated NAND pages (argument store1)
    output logic [63:0]  m_axi_store1_awaddr,
    output logic [7:0]   m_axi_store1_awlen,
    output logic [2:0]   m_axi_store1_awsize,
    output logic [1:0]   m_axi_store1_awburst,
    output logic         m_axi_store1_awvalid,
    input  logic         m_axi_store1_awready,
    output logic [63:0]  m_axi_store1_wdata,
    output logic [7:0]   m_axi_store1_wstrb,
    output logic         m_axi_store1_wlast,
    output logic         m_axi_store1_wvalid,
    input  logic         m_axi_store1_wready,
    input  logic [1:0]   m_axi_store1_bresp,
    input  logic         m_axi_store1_bvalid,
    output logic         m_axi_store1_bready,
    output logic [63:0]  m_axi_store1_araddr,
    output logic [7:0]   m_axi_store1_arlen,
    output logic [2:0]   m_axi_store1_arsize,
    output logic [1:0]   m_axi_store1_arburst,
    output logic         m_axi_store1_arvalid,
    input  logic         m_axi_store1_arready,
    input  logic [63:0]  m_axi_store1_rdata,
    input  logic [1:0]   m_axi_store1_rresp,
    input  logic         m_axi_store1_rlast,
    input  logic         m_axi_store1_rvalid,
    output logic         m_axi_store1_rready,
    // Vitis names the kernel's interrupt port `interrupt`.
    /* verilator lint_off SYMRSVDWORD */
    output logic         interrupt
    /* verilator lint_on SYMRSVDWORD */
);
  localparam int unsigned NUM_PIPES = 2;

  // The controller's AXI4 masters are packed vectors, pipe p in slice p.
  logic [127:0] c_awaddr;
  logic [15:0] c_awlen;
  logic [5:0] c_awsize;
  logic [3:0] c_awburst;
  logic [1:0] c_awvalid;
  logic [127:0] c_wdata;
  logic [15:0] c_wstrb;
  logic [1:0] c_wlast;
  logic [1:0] c_wvalid;
  logic [1:0] c_bready;
  logic [127:0] c_araddr;
  logic [15:0] c_arlen;
  logic [5:0] c_arsize;
  logic [3:0] c_arburst;
  logic [1:0] c_arvalid;
  logic [1:0] c_rready;
  logic [1:0] c_awready;
  logic [1:0] c_wready;
  logic [3:0] c_bresp;
  logic [1:0] c_bvalid;
  logic [1:0] c_arready;
  logic [127:0] c_rdata;
  logic [3:0] c_rresp;
  logic [1:0] c_rlast;
  logic [1:0] c_rvalid;
  assign m_axi_pipe0_awaddr = c_awaddr[63:0];
  assign m_axi_pipe1_awaddr = c_awaddr[127:64];
  assign m_axi_pipe0_awlen = c_awlen[7:0];
  assign m_axi_pipe1_awlen = c_awlen[15:8];
  assign m_axi_pipe0_awsize = c_awsize[2:0];
  assign m_axi_pipe1_awsize = c_awsize[5:3];
  assign m_axi_pipe0_awburst = c_awburst[1:0];
  assign m_axi_pipe1_awburst = c_awburst[3:2];
  assign m_axi_pipe0_awvalid = c_awvalid[0];
  assign m_axi_pipe1_awvalid = c_awvalid[1];
  assign m_axi_pipe0_wdata = c_wdata[63:0];
  assign m_axi_pipe1_wdata = c_wdata[127:64];
  assign m_axi_pipe0_wstrb = c_wstrb[7:0];
  assign m_axi_pipe1_wstrb = c_wstrb[15:8];
  assign m_axi_pipe0_wlast = c_wlast[0];
  assign m_axi_pipe1_wlast = c_wlast[1];
  assign m_axi_pipe0_wvalid = c_wvalid[0];
  assign m_axi_pipe1_wvalid = c_wvalid[1];
  assign m_axi_pipe0_bready = c_bready[0];
  assign m_axi_pipe1_bready = c_bready[1];
  assign m_axi_pipe0_araddr = c_araddr[63:0];
  assign m_axi_pipe1_araddr = c_araddr[127:64];
  assign m_axi_pipe0_arlen = c_arlen[7:0];
  assign m_axi_pipe1_arlen = c_arlen[15:8];
  assign m_axi_pipe0_arsize = c_arsize[2:0];
  assign m_axi_pipe1_arsize = c_arsize[5:3];
  assign m_axi_pipe0_arburst = c_arburst[1:0];
  assign m_axi_pipe1_arburst = c_arburst[3:2];
  assign m_axi_pipe0_arvalid = c_arvalid[0];
  assign m_axi_pipe1_arvalid = c_arvalid[1];
  assign m_axi_pipe0_rready = c_rready[0];
  assign m_axi_pipe1_rready = c_rready[1];
  assign c_awready = {m_axi_pipe1_awready, m_axi_pipe0_awready};
  assign c_wready = {m_axi_pipe1_wready, m_axi_pipe0_wready};
  assign c_bresp = {m_axi_pipe1_bresp, m_axi_pipe0_bresp};
  assign c_bvalid = {m_axi_pipe1_bvalid, m_axi_pipe0_bvalid};
  assign c_arready = {m_axi_pipe1_arready, m_axi_pipe0_arready};
  assign c_rdata = {m_axi_pipe1_rdata, m_axi_pipe0_rdata};
  assign c_rresp = {m_axi_pipe1_rresp, m_axi_pipe0_rresp};
  assign c_rlast = {m_axi_pipe1_rlast, m_axi_pipe0_rlast};
  assign c_rvalid = {m_axi_pipe1_rvalid, m_axi_pipe0_rvalid};

  // s_axi_control split: controller registers, or the emulators' register bus.
  logic [15:0] c_awaddr_l, c_araddr_l;
  logic        c_awvalid_l, c_awready_l, c_wvalid_l, c_wready_l, c_bvalid_l, c_bready_l;
  logic        c_arvalid_l, c_arready_l, c_rvalid_l, c_rready_l;
  logic [31:0] c_wdata_l, c_rdata_l;
  logic [3:0]  c_wstrb_l;
  logic [1:0]  c_bresp_l, c_rresp_l;
  logic        emu_we;
  logic [15:0] emu_waddr, emu_raddr;
  logic [31:0] emu_wdata, emu_rdata, emu_rdata0, emu_rdata1;

  vsl_axil_split #(
      .EMU_BASE(vsl_regmap_pkg::VSL_EMU_BASE), .EMU_STRIDE(32'(vsl_regmap_pkg::VSL_EMU_STRIDE)),
      .NUM_EMU(vsl_regmap_pkg::VSL_EMU_COUNT), .EMU_WORDS(32'(vsl_regmap_pkg::VSL_EMU_ERRORS) / 4 + 1)
  ) split (
      .clk(ap_clk), .rst_n(ap_rst_n),
      .s_awaddr(s_axi_control_awaddr), .s_awvalid(s_axi_control_awvalid), .s_awready(s_axi_control_awready),
      .s_wdata(s_axi_control_wdata), .s_wstrb(s_axi_control_wstrb), .s_wvalid(s_axi_control_wvalid),
      .s_wready(s_axi_control_wready), .s_bresp(s_axi_control_bresp), .s_bvalid(s_axi_control_bvalid),
      .s_bready(s_axi_control_bready), .s_araddr(s_axi_control_araddr), .s_arvalid(s_axi_control_arvalid),
      .s_arready(s_axi_control_arready), .s_rdata(s_axi_control_rdata), .s_rresp(s_axi_control_rresp),
      .s_rvalid(s_axi_control_rvalid), .s_rready(s_axi_control_rready),
      .m_awaddr(c_awaddr_l), .m_awvalid(c_awvalid_l), .m_awready(c_awready_l), .m_wdata(c_wdata_l),
      .m_wstrb(c_wstrb_l), .m_wvalid(c_wvalid_l), .m_wready(c_wready_l), .m_bresp(c_bresp_l),
      .m_bvalid(c_bvalid_l), .m_bready(c_bready_l), .m_araddr(c_araddr_l), .m_arvalid(c_arvalid_l),
      .m_arready(c_arready_l), .m_rdata(c_rdata_l), .m_rresp(c_rresp_l), .m_rvalid(c_rvalid_l),
      .m_rready(c_rready_l),
      .bus_we(emu_we), .bus_waddr(emu_waddr), .bus_wdata(emu_wdata), .bus_raddr(emu_raddr), .bus_rdata(emu_rdata)
  );
  assign emu_rdata = emu_raddr[7] ? emu_rdata1 : emu_rdata0;

  // ONFI pins between the controller and the emulators, channel p in slice p.
  logic [NUM_PIPES-1:0]   ce_n, cle, ale, we_n, re_n, wp_n, dq_oe, rb_n;
  logic [NUM_PIPES*8-1:0] dq_o, dq_i;

  vsl_ctrl #(.NUM_PIPES(NUM_PIPES), .LUNS(LUNS)) ctrl (
      .clk(ap_clk), .rst_n(ap_rst_n),
      .s_awaddr(c_awaddr_l), .s_awvalid(c_awvalid_l), .s_awready(c_awready_l), .s_wdata(c_wdata_l),
      .s_wstrb(c_wstrb_l), .s_wvalid(c_wvalid_l), .s_wready(c_wready_l), .s_bresp(c_bresp_l),
      .s_bvalid(c_bvalid_l), .s_bready(c_bready_l), .s_araddr(c_araddr_l), .s_arvalid(c_arvalid_l),
      .s_arready(c_arready_l), .s_rdata(c_rdata_l), .s_rresp(c_rresp_l), .s_rvalid(c_rvalid_l),
      .s_rready(c_rready_l), .irq(interrupt),
      .m_awaddr(c_awaddr), .m_awlen(c_awlen), .m_awsize(c_awsize), .m_awburst(c_awburst), .m_awvalid(c_awvalid), .m_wdata(c_wdata), .m_wstrb(c_wstrb), .m_wlast(c_wlast),
        .m_wvalid(c_wvalid), .m_bready(c_bready), .m_araddr(c_araddr), .m_arlen(c_arlen), .m_arsize(c_arsize), .m_arburst(c_arburst), .m_arvalid(c_arvalid), .m_rready(c_rready),
        .m_awready(c_awready), .m_wready(c_wready), .m_bresp(c_bresp), .m_bvalid(c_bvalid), .m_arready(c_arready), .m_rdata(c_rdata), .m_rresp(c_rresp), .m_rlast(c_rlast), .m_rvalid(c_rvalid),
      .ce_n, .cle, .ale, .we_n, .re_n, .wp_n, .dq_o, .dq_oe, .dq_i, .rb_n,
      // An Alveo kernel has no sensor pins: the platform reports board temperature and
      // power to the host through XRT, so SENSOR_SEQ reads 0 here.
      .sensor_present(1'b0), .sensor_temp_mc(32'd0), .sensor_power_mw(32'd0)
  );

  vsl_nand_emu #(.LUNS(LUNS), .BLOCKS(BLOCKS), .PAGES(PAGES), .DATA_BYTES(DATA_BYTES), .SPARE_BYTES(SPARE_BYTES)) emu0 (
      .clk(ap_clk), .rst_n(ap_rst_n),
      .reg_we(emu_we && !emu_waddr[7]), .reg_waddr(emu_waddr[6:2]), .reg_wdata(emu_wdata),
      .reg_raddr(emu_raddr[6:2]), .reg_rdata(emu_rdata0),
      .ce_n(ce_n[0]), .cle(cle[0]), .ale(ale[0]), .we_n(we_n[0]), .re_n(re_n[0]), .dq_o(dq_o[7:0]),
      .dq_i(dq_i[7:0]), .rb_n(rb_n[0]),
      .m_awaddr(m_axi_store0_awaddr), .m_awlen(m_axi_store0_awlen), .m_awsize(m_axi_store0_awsize), .m_awburst(m_axi_store0_awburst), .m_awvalid(m_axi_store0_awvalid), .m_wdata(m_axi_store0_wdata),
        .m_wstrb(m_axi_store0_wstrb), .m_wlast(m_axi_store0_wlast), .m_wvalid(m_axi_store0_wvalid), .m_bready(m_axi_store0_bready), .m_araddr(m_axi_store0_araddr), .m_arlen(m_axi_store0_arlen),
        .m_arsize(m_axi_store0_arsize), .m_arburst(m_axi_store0_arburst), .m_arvalid(m_axi_store0_arvalid), .m_rready(m_axi_store0_rready),
        .m_awready(m_axi_store0_awready), .m_wready(m_axi_store0_wready), .m_bresp(m_axi_store0_bresp), .m_bvalid(m_axi_store0_bvalid), .m_arready(m_axi_store0_arready),
        .m_rdata(m_axi_store0_rdata), .m_rresp(m_axi_store0_rresp), .m_rlast(m_axi_store0_rlast), .m_rvalid(m_axi_store0_rvalid)
  );
  vsl_nand_emu #(.LUNS(LUNS), .BLOCKS(BLOCKS), .PAGES(PAGES), .DATA_BYTES(DATA_BYTES), .SPARE_BYTES(SPARE_BYTES)) emu1 (
      .clk(ap_clk), .rst_n(ap_rst_n),
      .reg_we(emu_we && emu_waddr[7]), .reg_waddr(emu_waddr[6:2]), .reg_wdata(emu_wdata),
      .reg_raddr(emu_raddr[6:2]), .reg_rdata(emu_rdata1),
      .ce_n(ce_n[1]), .cle(cle[1]), .ale(ale[1]), .we_n(we_n[1]), .re_n(re_n[1]), .dq_o(dq_o[15:8]),
      .dq_i(dq_i[15:8]), .rb_n(rb_n[1]),
      .m_awaddr(m_axi_store1_awaddr), .m_awlen(m_axi_store1_awlen), .m_awsize(m_axi_store1_awsize), .m_awburst(m_axi_store1_awburst), .m_awvalid(m_axi_store1_awvalid), .m_wdata(m_axi_store1_wdata),
        .m_wstrb(m_axi_store1_wstrb), .m_wlast(m_axi_store1_wlast), .m_wvalid(m_axi_store1_wvalid), .m_bready(m_axi_store1_bready), .m_araddr(m_axi_store1_araddr), .m_arlen(m_axi_store1_arlen),
        .m_arsize(m_axi_store1_arsize), .m_arburst(m_axi_store1_arburst), .m_arvalid(m_axi_store1_arvalid), .m_rready(m_axi_store1_rready),
        .m_awready(m_axi_store1_awready), .m_wready(m_axi_store1_wready), .m_bresp(m_axi_store1_bresp), .m_bvalid(m_axi_store1_bvalid), .m_arready(m_axi_store1_arready),
        .m_rdata(m_axi_store1_rdata), .m_rresp(m_axi_store1_rresp), .m_rlast(m_axi_store1_rlast), .m_rvalid(m_axi_store1_rvalid)
  );

  // WP# is held high by the controller and DQ's output enable only matters on a real
  // bidirectional bus; the emulators need neither.
  logic unused;
  assign unused = ^{wp_n, dq_oe, emu_raddr[15:8], emu_raddr[1:0], emu_waddr[15:8], emu_waddr[1:0]};
endmodule
