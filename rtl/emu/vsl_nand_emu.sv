// vsl_nand_emu: a synthesizable ONFI target (one CE#, LUNS LUNs) for boards without NAND
// (Alveo): it answers the controller's pins the way the dies would, keeps the pages in
// card memory (HBM/DDR) through an AXI4 master, and runs each LUN's array times on its
// own counters, programmable at run time (EMU registers, docs/register-map.md).
//
// Pins: synchronous to clk (the controller's pin engine and this target share the
// kernel clock). A command, address or data-in byte latches on WE# rising with CLE/ALE
// as they were; a data-out byte is on DQ from the cycle RE# falls (combinationally, so
// any tREA setting of 1 cycle or more samples it) and is held until the next fall (EDO
// reads sample it after RE# rises). R/B# is the AND of the LUNs' ready states.
// Commands: RESET FFh, RESET LUN FAh, READ ID 90h (00h: JEDEC ID, 20h: "ONFI"), READ
// PARAMETER PAGE ECh (three copies, built here from the geometry, CRC computed at reset),
// READ STATUS 70h, READ STATUS ENHANCED 78h, READ 00h-30h (00h alone resumes data out
// after a status read), CHANGE READ COLUMN 05h-E0h, PROGRAM 80h-10h, ERASE 60h-D0h, SET
// FEATURES EFh and GET FEATURES EEh (address 01h kept, plus the last other address).
// The same command set and row layout as the co-simulation's C++ target
// (testbench/onfi/onfi_target.h): row = {LUN, block, page}, page in the low bits.
//
// Array: page {lun, block, page} lives at STORE_BASE + index * STRIDE (STRIDE: the page
// and its spare rounded up to 64 bytes); every store access is an aligned 64-byte burst
// (8 beats of 8 bytes), so none crosses 4 KiB. A table on chip holds each block's next
// page to program: pages below it are programmed, the rest read as erased (0xFF, no
// memory access); ERASE resets it (the old bytes stay in memory, unreachable). PROGRAM
// must hit the next page (NAND's in-order rule); any other page fails (status FAIL,
// nothing written). Bytes of the page register not loaded since 80h are stored as 0xFF.
// Reset (and EMU CTRL.FORMAT) clears the table: every block erased. A LUN is busy from
// its confirm command until both its timer (tR/tPROG/tBERS/tRST cycles from the
// registers) has run out and its store access is done, so a slow memory lengthens the
// array time and nothing reads a half-fetched page.
//
// Faults (EMU FAULT): a dead LUN stays busy for ever from its next operation (until the
// bit is cleared and a RESET); the next PROGRAM or ERASE on a LUN can be made to fail.
// Raw bit errors: each 64-bit word fetched from the store has one bit flipped with
// probability FLIP_RATE / 2^32 (xorshift64 seeded by SEED), for the ECC to correct.
// RESET (LUN) during a program's tPROG: the page is stored (again) with its second half
// inverted: a torn page, as a die cut short leaves it. Protocol errors (a command to a busy LUN, data in
// outside PROGRAM, unknown commands, missing address cycles) are counted in ERRORS.
module vsl_nand_emu #(
    parameter int unsigned LUNS = 4,           // power of two
    parameter int unsigned BLOCKS = 16,        // per LUN, power of two
    parameter int unsigned PAGES = 8,          // per block, power of two
    parameter int unsigned DATA_BYTES = 4096,
    parameter int unsigned SPARE_BYTES = 224,
    parameter int unsigned T_R_MAX_US = 25,    // what the parameter page advertises
    parameter int unsigned T_PROG_MAX_US = 200,
    parameter int unsigned T_BERS_MAX_US = 1500
) (
    input  logic        clk,
    input  logic        rst_n,
    // register bus (this instance's EMU block; word index)
    input  logic        reg_we,
    input  logic [4:0]  reg_waddr,
    input  logic [31:0] reg_wdata,
    input  logic [4:0]  reg_raddr,
    output logic [31:0] reg_rdata,
    // ONFI pins (from the controller's channel)
    input  logic        ce_n,
    input  logic        cle,
    input  logic        ale,
    input  logic        we_n,
    input  logic        re_n,
    input  logic [7:0]  dq_o,
    output logic [7:0]  dq_i,
    output logic        rb_n,
    // AXI4 master to the page store
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
    output logic        m_rready
);
  localparam int unsigned PAGE_BYTES = DATA_BYTES + SPARE_BYTES;
  localparam int unsigned STRIDE = ((PAGE_BYTES + 63) / 64) * 64;  // bytes per stored page
  localparam int unsigned RWORDS = STRIDE / 8;                     // page-register words per LUN
  localparam int unsigned BURSTS = STRIDE / 64;
  localparam int unsigned PB = (PAGES > 1) ? $clog2(PAGES) : 1;
  localparam int unsigned BB = (BLOCKS > 1) ? $clog2(BLOCKS) : 1;
  localparam int unsigned LB = (LUNS > 1) ? $clog2(LUNS) : 1;
  localparam int unsigned IW = LB + BB + PB;                       // page index {lun, block, page}
  localparam int unsigned RAW = $clog2(LUNS * RWORDS);
  localparam int unsigned BIW = LB + BB;                           // block index {lun, block}
  localparam int unsigned BRW = $clog2(BURSTS + 1);

  // register word indexes (EMU block, from the register map)
  function automatic logic [4:0] word(input logic [15:0] offset);
    word = 5'(offset >> 2);
  endfunction
  localparam logic [4:0] R_STORE_LO = word(vsl_regmap_pkg::VSL_EMU_STORE_BASE_LO),
                         R_STORE_HI = word(vsl_regmap_pkg::VSL_EMU_STORE_BASE_HI),
                         R_T_R = word(vsl_regmap_pkg::VSL_EMU_T_R), R_T_PROG = word(vsl_regmap_pkg::VSL_EMU_T_PROG),
                         R_T_BERS = word(vsl_regmap_pkg::VSL_EMU_T_BERS), R_T_RST = word(vsl_regmap_pkg::VSL_EMU_T_RST),
                         R_FAULT = word(vsl_regmap_pkg::VSL_EMU_FAULT),
                         R_FLIP_RATE = word(vsl_regmap_pkg::VSL_EMU_FLIP_RATE),
                         R_SEED = word(vsl_regmap_pkg::VSL_EMU_SEED), R_CTRL = word(vsl_regmap_pkg::VSL_EMU_CTRL),
                         R_READS = word(vsl_regmap_pkg::VSL_EMU_READS),
                         R_PROGRAMS = word(vsl_regmap_pkg::VSL_EMU_PROGRAMS),
                         R_ERASES = word(vsl_regmap_pkg::VSL_EMU_ERASES), R_FLIPS = word(vsl_regmap_pkg::VSL_EMU_FLIPS),
                         R_GEOM0 = word(vsl_regmap_pkg::VSL_EMU_GEOMETRY0),
                         R_GEOM1 = word(vsl_regmap_pkg::VSL_EMU_GEOMETRY1),
                         R_ERRORS = word(vsl_regmap_pkg::VSL_EMU_ERRORS);

  // output modes of the data bus
  localparam logic [2:0] O_NONE = 3'd0, O_STATUS = 3'd1, O_ID = 3'd2, O_PARAM = 3'd3,
                         O_FEAT = 3'd4, O_DATA = 3'd5;
  localparam logic [1:0] A_READ = 2'd0, A_PROG = 2'd1, A_ERASE = 2'd2;

  // ---------------------------------------------------------------- registers
  logic [63:0] store_base;
  logic [31:0] t_r, t_prog, t_bers, t_rst, flip_rate, seed;
  logic [LUNS-1:0] dead, fail_prog, fail_erase;
  logic [31:0] n_reads, n_programs, n_erases, n_flips, n_errors;
  logic        store_error, formatting, format_req, seed_load;

  // ---------------------------------------------------------------- LUN state
  logic [32*LUNS-1:0] timer;
  logic [LUNS-1:0]    job_pend, job_write, stuck, fail_bit, erased, torn, busy;
  logic [LUNS-1:0]    in_prog;  // busy with a program its store write belongs to
  logic [IW*LUNS-1:0] job_idx;
  logic [16*LUNS-1:0] job_lo, job_hi, col;

  always_comb begin
    for (int l = 0; l < LUNS; l++) begin
      busy[l] = (timer[32*l +: 32] != 32'd0) || job_pend[l] || stuck[l] || (act_valid && act_lun == LB'(l));
    end
  end

  // ---------------------------------------------------------------- page registers
  // One RAM, RWORDS words per LUN. Port A: the bus (byte writes of data in; word reads
  // for data out). Port B: the store engine (whole words).
  logic [63:0]    preg [LUNS*RWORDS];
  logic           a_we, b_we;
  logic [RAW-1:0] a_addr, b_addr;
  logic [7:0]     a_be;
  logic [63:0]    a_wdata, a_rdata, b_wdata, b_rdata;
  always_ff @(posedge clk) begin
    if (a_we) begin
      for (int i = 0; i < 8; i++) if (a_be[i]) preg[a_addr][8*i +: 8] <= a_wdata[8*i +: 8];
    end
    if (b_we) preg[b_addr] <= b_wdata;
    a_rdata <= preg[a_addr];
    b_rdata <= preg[b_addr];
  end

  // ---------------------------------------------------------------- next-page table
  // (public: a co-simulation keeps it in its card file across processes, as NAND keeps
  // its pages; testbench/cosim/kernel_cosim.h)
  logic [PB:0]    nxt [LUNS*BLOCKS] /*verilator public_flat_rw*/;
  logic           n_we;
  logic [BIW-1:0] n_waddr, n_raddr;
  logic [PB:0]    n_wdata, n_rdata;
  assign n_raddr = {act_lun, act_block};
  always_ff @(posedge clk) begin
    if (n_we) nxt[n_waddr] <= n_wdata;
    n_rdata <= nxt[n_raddr];
  end

  // ---------------------------------------------------------------- parameter page
  // One copy (256 bytes) as the host's encoder writes it (vsl/nand/onfi.cc); the CRC-16
  // (polynomial 8005h, initial 4F4Eh) over bytes 0-253 is computed after reset.
  localparam logic [8*12-1:0] PP_MANUF = "OPENVSL     ";          // 12 ASCII, space padded
  localparam logic [8*20-1:0] PP_MODEL = "ALVEO-EMU           ";  // 20 ASCII, space padded
  localparam logic [31:0] PP_DATA = 32'(DATA_BYTES), PP_SPARE = 32'(SPARE_BYTES), PP_PAGES = 32'(PAGES),
                          PP_BLOCKS = 32'(BLOCKS), PP_TPROG = 32'(T_PROG_MAX_US),
                          PP_TBERS = 32'(T_BERS_MAX_US), PP_TR = 32'(T_R_MAX_US);
  function automatic logic [7:0] pp_byte(input logic [7:0] i);
    int unsigned k;
    k = 32'(i);
    pp_byte = 8'h00;
    if (k == 0) pp_byte = 8'h4F;       // "ONFI"
    else if (k == 1) pp_byte = 8'h4E;
    else if (k == 2) pp_byte = 8'h46;
    else if (k == 3) pp_byte = 8'h49;
    else if (k == 4) pp_byte = 8'h7E;  // revisions 1.0-3.0
    else if (k == 6) pp_byte = 8'h08;  // multiple LUN operations
    else if (k >= 32 && k < 44) pp_byte = PP_MANUF[8*(43 - k) +: 8];
    else if (k >= 44 && k < 64) pp_byte = PP_MODEL[8*(63 - k) +: 8];
    else if (k == 64) pp_byte = 8'h2C;
    else if (k >= 80 && k < 84) pp_byte = PP_DATA[8*(k - 80) +: 8];
    else if (k >= 84 && k < 86) pp_byte = PP_SPARE[8*(k - 84) +: 8];
    else if (k >= 92 && k < 96) pp_byte = PP_PAGES[8*(k - 92) +: 8];
    else if (k >= 96 && k < 100) pp_byte = PP_BLOCKS[8*(k - 96) +: 8];
    else if (k == 100) pp_byte = 8'(LUNS);
    else if (k == 101) pp_byte = 8'h23;  // 2 column, 3 row address cycles
    else if (k == 102) pp_byte = 8'd1;   // SLC
    else if (k == 105) pp_byte = 8'd100; // endurance 100 x 10^3
    else if (k == 106) pp_byte = 8'd3;
    else if (k == 112) pp_byte = 8'd8;   // ECC bits per 512 bytes
    else if (k == 129) pp_byte = 8'h3F;  // SDR timing modes 0-5
    else if (k >= 133 && k < 135) pp_byte = PP_TPROG[8*(k - 133) +: 8];
    else if (k >= 135 && k < 137) pp_byte = PP_TBERS[8*(k - 135) +: 8];
    else if (k >= 137 && k < 139) pp_byte = PP_TR[8*(k - 137) +: 8];
    else if (k == 139) pp_byte = 8'hF4;  // tCCS 500 ns
    else if (k == 140) pp_byte = 8'h01;
  endfunction
  function automatic logic [15:0] crc16_step(input logic [15:0] crc, input logic [7:0] b);
    logic [15:0] c;
    c = crc ^ {b, 8'h00};
    for (int k = 0; k < 8; k++) c = c[15] ? ((c << 1) ^ 16'h8005) : (c << 1);
    crc16_step = c;
  endfunction
  logic [15:0] pp_crc;
  logic [7:0]  crc_pos;
  logic        crc_busy;
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      pp_crc   <= 16'h4F4E;
      crc_pos  <= 8'd0;
      crc_busy <= 1'b1;
    end else if (crc_busy) begin
      pp_crc  <= crc16_step(pp_crc, pp_byte(crc_pos));
      crc_pos <= crc_pos + 8'd1;
      if (crc_pos == 8'd253) crc_busy <= 1'b0;
    end
  end

  // ---------------------------------------------------------------- bus decoder
  logic        we_q, re_q;
  logic        we_rise, re_fall;
  logic [7:0]  cmd;
  logic [39:0] abytes;      // address cycles, first in the low byte
  logic [2:0]  acnt;
  logic [2:0]  out_mode, resume_mode;
  logic [LB-1:0] sel;       // the selected LUN (data out, status)
  logic [9:0]  fpos;        // byte position in ID / parameter / feature output
  logic        id_onfi;
  logic [7:0]  feat_addr;
  logic [31:0] feat01, feat_other, feat_out;
  logic [23:0] feat_in;       // P1..P3 of a SET FEATURES (P4 completes it)
  logic [7:0]  feat_other_addr;
  logic [1:0]  fcnt;
  logic [15:0] pcol, plo, phi;   // program column and the columns loaded since 80h
  logic [7:0]  dq_hold, next_byte;
  // a confirm command's array action, handed to the action stage
  logic        act_valid;
  logic [1:0]  act_kind;
  logic [LB-1:0] act_lun;
  logic [BB-1:0] act_block;
  logic [PB-1:0] act_page;
  logic        act_look;    // the table read for the action is in flight

  assign we_rise = !ce_n && !we_q && we_n;
  assign re_fall = !ce_n && re_q && !re_n;

  // A row address carries 24 bits; the geometry uses the low IW of them.
  /* verilator lint_off UNUSEDSIGNAL */
  function automatic logic [LB-1:0] row_lun(input logic [23:0] row);
    row_lun = row[PB+BB +: LB];
  endfunction
  function automatic logic [BB-1:0] row_block(input logic [23:0] row);
    row_block = row[PB +: BB];
  endfunction
  function automatic logic [PB-1:0] row_page(input logic [23:0] row);
    row_page = row[0 +: PB];
  endfunction
  /* verilator lint_on UNUSEDSIGNAL */

  // The first LUN that is not dead runs target-level operations (parameter page, features).
  logic [LB-1:0] live_lun;
  always_comb begin
    live_lun = '0;
    for (int l = LUNS - 1; l >= 0; l--) if (!dead[l]) live_lun = LB'(l);
  end

  // Data out of the selected LUN's page register: the RAM read of its current column was
  // issued a cycle ago; erased pages read 0xFF, columns past the page 0x00.
  logic [15:0] sel_col;
  logic [2:0]  rd_lane;
  logic        rd_in_page, rd_erased;
  logic [7:0]  data_byte, status_byte, id_byte;
  assign sel_col = col[16*sel +: 16];
  always_ff @(posedge clk) begin
    rd_lane    <= sel_col[2:0];
    rd_in_page <= sel_col < 16'(PAGE_BYTES);
    rd_erased  <= erased[sel];
  end
  assign data_byte   = rd_erased ? 8'hFF : (rd_in_page ? a_rdata[8*rd_lane +: 8] : 8'h00);
  assign status_byte = {1'b1, !busy[sel], !busy[sel], 4'd0, fail_bit[sel]};
  always_comb begin
    case (fpos[2:0])
      3'd0: id_byte = id_onfi ? 8'h4F : 8'h2C;
      3'd1: id_byte = id_onfi ? 8'h4E : 8'hA1;
      3'd2: id_byte = id_onfi ? 8'h46 : 8'h00;
      3'd3: id_byte = id_onfi ? 8'h49 : 8'h15;
      default: id_byte = 8'h00;
    endcase
    if (fpos > 10'd4) id_byte = 8'h00;
  end
  always_comb begin
    case (out_mode)
      O_STATUS: next_byte = status_byte;
      O_ID:     next_byte = id_byte;
      O_PARAM:  next_byte = (fpos >= 10'd768) ? 8'h00 :
                            (fpos[7:0] == 8'd254) ? pp_crc[7:0] :
                            (fpos[7:0] == 8'd255) ? pp_crc[15:8] : pp_byte(fpos[7:0]);
      O_FEAT:   next_byte = (fpos < 10'd4) ? feat_out[8*fpos[1:0] +: 8] : 8'h00;
      O_DATA:   next_byte = data_byte;
      default:  next_byte = 8'h00;
    endcase
  end
  assign dq_i = re_fall ? next_byte : dq_hold;

  // Port A: a data-in byte is written where it lands; otherwise the selected LUN's column
  // is read (for the next data-out byte).
  logic [LB-1:0] prog_lun;
  assign prog_lun = row_lun(abytes[39:16]);
  always_comb begin
    a_we    = we_rise && !cle && !ale && cmd == 8'h80 && acnt == 3'd5 && !busy[prog_lun] && pcol < 16'(STRIDE);
    a_be    = 8'd1 << pcol[2:0];
    a_wdata = {8{dq_o}};
    if (a_we) a_addr = RAW'(prog_lun) * RAW'(RWORDS) + RAW'(pcol[15:3]);
    else      a_addr = RAW'(sel) * RAW'(RWORDS) + RAW'((sel_col < 16'(STRIDE)) ? sel_col[15:3] : 13'd0);
  end

  // ---------------------------------------------------------------- store engine
  typedef enum logic [2:0] {E_IDLE, E_AR, E_R, E_AW, E_WRD, E_W, E_B} estate_e;
  estate_e       es;
  logic [LB-1:0] jl;          // the LUN whose job runs
  logic [LB-1:0] rr;          // round-robin start
  logic [BRW-1:0] burst;
  logic [2:0]    beat;
  logic [63:0]   rng;
  logic [63:0]   flip_mask;
  logic          flip_now;
  logic [63:0]   jaddr;
  logic [15:0]   wcol;        // first column of the word being written
  logic [63:0]   wword;

  assign jaddr = store_base + 64'(job_idx[IW*jl +: IW]) * 64'(STRIDE) + 64'(burst) * 64'd64;
  // xorshift64: one step per fetched word (a plain LFSR's successive states are shifts of
  // each other, which would bunch the flips)
  function automatic logic [63:0] xorshift64(input logic [63:0] x);
    logic [63:0] y;
    y = x ^ (x << 13);
    y = y ^ (y >> 7);
    xorshift64 = y ^ (y << 17);
  endfunction
  assign flip_now  = rng[63:32] < flip_rate;
  assign flip_mask = flip_now ? (64'd1 << rng[5:0]) : 64'd0;
  assign wcol      = 16'({burst, beat}) * 16'd8;
  always_comb begin
    for (int i = 0; i < 8; i++) begin
      wword[8*i +: 8] = ((wcol + 16'(i)) >= job_lo[16*jl +: 16] && (wcol + 16'(i)) < job_hi[16*jl +: 16])
                        ? b_rdata[8*i +: 8] : 8'hFF;
    end
    if (torn[jl] && burst >= BRW'(BURSTS / 2)) wword = ~wword;
  end

  assign m_awaddr  = jaddr;
  assign m_araddr  = jaddr;
  assign m_awlen   = 8'd7;
  assign m_arlen   = 8'd7;
  assign m_awsize  = 3'd3;
  assign m_arsize  = 3'd3;
  assign m_awburst = 2'b01;
  assign m_arburst = 2'b01;
  assign m_awvalid = (es == E_AW);
  assign m_arvalid = (es == E_AR);
  assign m_wvalid  = (es == E_W);
  assign m_wdata   = wword;
  assign m_wstrb   = 8'hFF;
  assign m_wlast   = (beat == 3'd7);
  assign m_bready  = (es == E_B);
  assign m_rready  = (es == E_R);
  assign b_addr    = RAW'(jl) * RAW'(RWORDS) + RAW'({burst, beat});
  assign b_we      = (es == E_R) && m_rvalid;
  assign b_wdata   = m_rdata ^ flip_mask;

  // the next LUN with a job, round-robin from rr
  logic          pick_ok;
  logic [LB-1:0] pick;
  always_comb begin
    pick_ok = 1'b0;
    pick    = rr;
    for (int k = LUNS - 1; k >= 0; k--) begin
      if (job_pend[LB'(32'(rr) + k)]) begin
        pick_ok = 1'b1;
        pick    = LB'(32'(rr) + k);
      end
    end
  end

  // ---------------------------------------------------------------- the one sequential block
  // Register writes, bus decoding, the action stage, timers and the store engine all
  // touch the LUN state, so they share one block; each concern is a section.
  logic [BIW:0] fmt_idx;
  // the LUN a confirm addresses: five address cycles (READ, PROGRAM) or three (ERASE),
  // and the LUN of a three-cycle row whose last cycle is on DQ now (RESET LUN, 78h)
  logic [LB-1:0] lun5, lun3, lun_now;
  assign lun5    = row_lun(abytes[39:16]);
  assign lun3    = row_lun(abytes[23:0]);
  assign lun_now = row_lun({dq_o, abytes[15:0]});
  // the LUNs a RESET (FFh: all) or RESET LUN (FAh, on its last row cycle) resets now
  logic [LUNS-1:0] rst_now;
  always_comb begin
    rst_now = '0;
    if (we_rise && cle && !ale && dq_o == 8'hFF) rst_now = '1;
    else if (we_rise && ale && !cle && cmd == 8'hFA && acnt == 3'd2) rst_now[lun_now] = 1'b1;
  end
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      store_base <= '0; t_r <= vsl_regmap_pkg::VSL_EMU_T_R_RESET; t_prog <= vsl_regmap_pkg::VSL_EMU_T_PROG_RESET;
      t_bers <= vsl_regmap_pkg::VSL_EMU_T_BERS_RESET; t_rst <= vsl_regmap_pkg::VSL_EMU_T_RST_RESET;
      flip_rate <= '0; seed <= vsl_regmap_pkg::VSL_EMU_SEED_RESET; dead <= '0; fail_prog <= '0; fail_erase <= '0;
      n_reads <= '0; n_programs <= '0; n_erases <= '0; n_flips <= '0; n_errors <= '0;
      store_error <= 1'b0; formatting <= 1'b1; format_req <= 1'b0; seed_load <= 1'b1; fmt_idx <= '0;
      timer <= '0; job_pend <= '0; job_write <= '0; stuck <= '0; in_prog <= '0; fail_bit <= '0; erased <= '1; torn <= '0;
      job_idx <= '0; job_lo <= '0; job_hi <= '0; col <= '0;
      we_q <= 1'b1; re_q <= 1'b1; cmd <= 8'h00; abytes <= '0; acnt <= '0; out_mode <= O_NONE;
      resume_mode <= O_DATA; sel <= '0; fpos <= '0; id_onfi <= 1'b0; feat_addr <= '0; feat01 <= '0;
      feat_other <= '0; feat_other_addr <= '0; feat_out <= '0; feat_in <= '0; fcnt <= '0;
      pcol <= '0; plo <= '0; phi <= '0; dq_hold <= '0; rb_n <= 1'b1;
      act_valid <= 1'b0; act_kind <= A_READ; act_lun <= '0; act_block <= '0; act_page <= '0; act_look <= 1'b0;
      n_we <= 1'b0; n_waddr <= '0; n_wdata <= '0;
      es <= E_IDLE; jl <= '0; rr <= '0; burst <= '0; beat <= '0; rng <= 64'h1;
    end else begin
      we_q <= we_n;
      re_q <= re_n;
      rb_n <= !(|busy);
      n_we <= 1'b0;

      // ---- registers
      if (reg_we) begin
        case (reg_waddr)
          R_STORE_LO:  store_base[31:0] <= reg_wdata;
          R_STORE_HI:  store_base[63:32] <= reg_wdata;
          R_T_R:       t_r <= reg_wdata;
          R_T_PROG:    t_prog <= reg_wdata;
          R_T_BERS:    t_bers <= reg_wdata;
          R_T_RST:     t_rst <= reg_wdata;
          R_FAULT: begin
            dead       <= reg_wdata[0 +: LUNS];
            fail_prog  <= reg_wdata[8 +: LUNS];
            fail_erase <= reg_wdata[16 +: LUNS];
          end
          R_FLIP_RATE: flip_rate <= reg_wdata;
          R_SEED: begin
            seed      <= reg_wdata;
            seed_load <= 1'b1;
          end
          R_CTRL: begin
            if (reg_wdata[0]) format_req <= 1'b1;
            if (reg_wdata[1]) store_error <= 1'b0;
            if (reg_wdata[2]) begin
              n_reads <= '0; n_programs <= '0; n_erases <= '0; n_flips <= '0; n_errors <= '0;
            end
          end
          default: ;
        endcase
      end

      // ---- timers
      for (int l = 0; l < LUNS; l++) begin
        if (timer[32*l +: 32] != 32'd0) timer[32*l +: 32] <= timer[32*l +: 32] - 32'd1;
        if (!busy[l]) in_prog[l] <= 1'b0;
      end

      // ---- FORMAT: every block's next page back to 0 (every page erased)
      if (format_req && !formatting) begin
        format_req <= 1'b0;
        formatting <= 1'b1;
        fmt_idx    <= '0;
      end
      if (formatting) begin
        n_we    <= 1'b1;
        n_waddr <= fmt_idx[BIW-1:0];
        n_wdata <= '0;
        fmt_idx <= fmt_idx + 1'b1;
        if (fmt_idx == (BIW+1)'(LUNS * BLOCKS - 1)) formatting <= 1'b0;
      end

      // ---- RESET / RESET LUN: the LUN aborts what it does and resets (tRST); a program
      // cut short in its tPROG leaves its page stored torn
      for (int l = 0; l < LUNS; l++) begin
        if (rst_now[l]) begin
          fail_bit[l] <= 1'b0;
          stuck[l]    <= dead[l];
          timer[32*l +: 32] <= (t_rst == 32'd0) ? 32'd1 : t_rst;
          if (in_prog[l]) begin
            torn[l]      <= 1'b1;
            job_pend[l]  <= 1'b1;
            job_write[l] <= 1'b1;
            in_prog[l]   <= 1'b0;
          end
        end
      end

      // ---- bus: RE# falling (a byte goes out; the position moves on)
      if (re_fall) begin
        dq_hold <= next_byte;
        case (out_mode)
          O_ID, O_PARAM, O_FEAT: if (fpos != 10'h3FF) fpos <= fpos + 10'd1;
          O_DATA: col[16*sel +: 16] <= sel_col + 16'd1;
          default: ;
        endcase
      end

      // ---- bus: WE# rising (a command, address or data-in cycle)
      if (we_rise && cle && !ale) begin
        if (dq_o != 8'hFF) cmd <= dq_o;
        case (dq_o)
          8'hFF: out_mode <= O_NONE;  // RESET: every LUN (rst_now)
          8'h70: begin
            if (out_mode == O_PARAM || out_mode == O_FEAT || out_mode == O_DATA) resume_mode <= out_mode;
            out_mode <= O_STATUS;
          end
          8'h00: begin
            acnt        <= '0;
            out_mode    <= resume_mode;
            resume_mode <= O_DATA;
          end
          8'h30: begin  // READ confirm
            if (acnt < 3'd5) n_errors <= n_errors + 32'd1;
            else begin
              sel <= lun5;
              if (busy[lun5] || act_valid) n_errors <= n_errors + 32'd1;
              else begin
                col[16*lun5 +: 16] <= abytes[15:0];
                fail_bit[lun5]     <= 1'b0;
                stuck[lun5]        <= dead[lun5];
                timer[32*lun5 +: 32] <= (t_r == 32'd0) ? 32'd1 : t_r;
                act_valid <= 1'b1; act_kind <= A_READ; act_lun <= lun5;
                act_block <= row_block(abytes[39:16]); act_page <= row_page(abytes[39:16]);
                n_reads   <= n_reads + 32'd1;
              end
              out_mode <= O_DATA;
            end
          end
          8'hE0: begin  // CHANGE READ COLUMN confirm
            if (acnt >= 3'd2) col[16*sel +: 16] <= abytes[15:0];
            out_mode <= O_DATA;
          end
          8'h80: begin  // PROGRAM: the page register fills from the addressed column
            acnt     <= '0;
            out_mode <= O_NONE;
            plo      <= 16'hFFFF;
            phi      <= 16'h0000;
          end
          8'h10: begin  // PROGRAM confirm
            if (acnt < 3'd5) n_errors <= n_errors + 32'd1;
            else begin
              sel <= lun5;
              if (busy[lun5] || act_valid) n_errors <= n_errors + 32'd1;
              else begin
                fail_bit[lun5] <= 1'b0;
                stuck[lun5]    <= dead[lun5];
                torn[lun5]     <= 1'b0;
                timer[32*lun5 +: 32] <= (t_prog == 32'd0) ? 32'd1 : t_prog;
                job_lo[16*lun5 +: 16] <= plo;
                job_hi[16*lun5 +: 16] <= phi;
                act_valid <= 1'b1; act_kind <= A_PROG; act_lun <= lun5;
                act_block <= row_block(abytes[39:16]); act_page <= row_page(abytes[39:16]);
                n_programs <= n_programs + 32'd1;
              end
            end
          end
          8'hD0: begin  // ERASE confirm (three row cycles)
            if (acnt < 3'd3) n_errors <= n_errors + 32'd1;
            else begin
              sel <= lun3;
              if (busy[lun3] || act_valid) n_errors <= n_errors + 32'd1;
              else begin
                fail_bit[lun3] <= 1'b0;
                stuck[lun3]    <= dead[lun3];
                timer[32*lun3 +: 32] <= (t_bers == 32'd0) ? 32'd1 : t_bers;
                act_valid <= 1'b1; act_kind <= A_ERASE; act_lun <= lun3;
                act_block <= row_block(abytes[23:0]); act_page <= '0;
                n_erases  <= n_erases + 32'd1;
              end
            end
          end
          8'hEE, 8'h78: begin
            if (out_mode == O_PARAM || out_mode == O_FEAT || out_mode == O_DATA) resume_mode <= out_mode;
            acnt     <= '0;
            out_mode <= O_NONE;
          end
          8'hEF: begin
            acnt     <= '0;
            fcnt     <= '0;
            out_mode <= O_NONE;
          end
          8'h05, 8'h60, 8'h90, 8'hEC, 8'hFA: begin
            acnt     <= '0;
            out_mode <= O_NONE;
          end
          default: n_errors <= n_errors + 32'd1;
        endcase
      end else if (we_rise && ale && !cle) begin
        if (acnt < 3'd5) begin
          abytes[8*acnt +: 8] <= dq_o;
          acnt <= acnt + 3'd1;
        end
        case (cmd)
          8'h90: begin
            id_onfi  <= (dq_o == 8'h20);
            fpos     <= '0;
            out_mode <= O_ID;
          end
          8'hEC: begin  // the parameter page: the first live LUN busy tR
            sel      <= live_lun;
            stuck[live_lun] <= dead[live_lun];
            timer[32*live_lun +: 32] <= (t_r == 32'd0) ? 32'd1 : t_r;
            fpos     <= '0;
            out_mode <= O_PARAM;
          end
          8'h80: if (acnt == 3'd1) pcol <= {dq_o, abytes[7:0]};
          8'hEF: feat_addr <= dq_o;
          8'hEE: begin
            feat_out <= (dq_o == 8'h01) ? feat01 : ((dq_o == feat_other_addr) ? feat_other : 32'd0);
            sel      <= live_lun;
            stuck[live_lun] <= dead[live_lun];
            timer[32*live_lun +: 32] <= (t_rst == 32'd0) ? 32'd1 : t_rst;
            fpos     <= '0;
            out_mode <= O_FEAT;
          end
          8'hFA: if (acnt == 3'd2) sel <= lun_now;  // RESET LUN: that LUN alone (rst_now)
          8'h78: if (acnt == 3'd2) begin
            sel      <= row_lun({dq_o, abytes[15:0]});
            out_mode <= O_STATUS;
          end
          default: ;
        endcase
      end else if (we_rise && !ale && !cle) begin
        if (cmd == 8'hEF) begin
          if (fcnt != 2'd3) feat_in[8*fcnt +: 8] <= dq_o;
          fcnt <= fcnt + 2'd1;
          if (fcnt == 2'd3) begin
            if (feat_addr == 8'h01) feat01 <= {dq_o, feat_in[23:0]};
            else begin
              feat_other      <= {dq_o, feat_in[23:0]};
              feat_other_addr <= feat_addr;
            end
            stuck[live_lun] <= dead[live_lun];
            timer[32*live_lun +: 32] <= (t_rst == 32'd0) ? 32'd1 : t_rst;
            sel <= live_lun;
          end
        end else if (cmd == 8'h80 && acnt == 3'd5 && !busy[prog_lun]) begin
          if (pcol < plo) plo <= pcol;
          if (pcol + 16'd1 > phi) phi <= pcol + 16'd1;
          pcol <= pcol + 16'd1;
        end else begin
          n_errors <= n_errors + 32'd1;
        end
      end

      // ---- action stage: a confirm's table lookup, then its decision
      if (act_valid && !act_look && !formatting && !n_we) begin
        act_look <= 1'b1;  // the table word is read at this edge
      end else if (act_look) begin
        act_look  <= 1'b0;
        act_valid <= 1'b0;
        case (act_kind)
          A_READ: begin
            if (32'(act_page) < 32'(n_rdata)) begin
              erased[act_lun]   <= 1'b0;
              job_pend[act_lun] <= 1'b1;
              job_write[act_lun] <= 1'b0;
              job_idx[IW*act_lun +: IW] <= {act_lun, act_block, act_page};
            end else begin
              erased[act_lun] <= 1'b1;
            end
          end
          A_PROG: begin
            if (fail_prog[act_lun]) begin
              fail_prog[act_lun] <= 1'b0;
              fail_bit[act_lun]  <= 1'b1;
            end else if (32'(act_page) != 32'(n_rdata)) begin
              fail_bit[act_lun] <= 1'b1;  // programmed already, or out of order
            end else begin
              n_we    <= 1'b1;
              n_waddr <= {act_lun, act_block};
              n_wdata <= n_rdata + 1'b1;
              erased[act_lun]    <= 1'b0;
              in_prog[act_lun]   <= 1'b1;
              job_pend[act_lun]  <= 1'b1;
              job_write[act_lun] <= 1'b1;
              job_idx[IW*act_lun +: IW] <= {act_lun, act_block, act_page};
            end
          end
          default: begin  // A_ERASE
            if (fail_erase[act_lun]) begin
              fail_erase[act_lun] <= 1'b0;
              fail_bit[act_lun]   <= 1'b1;
            end else begin
              n_we    <= 1'b1;
              n_waddr <= {act_lun, act_block};
              n_wdata <= '0;
            end
          end
        endcase
      end

      // ---- store engine
      if (seed_load) begin
        rng      <= xorshift64(xorshift64({32'h9E3779B9, seed}));
        seed_load <= 1'b0;
      end
      case (es)
        E_IDLE: if (pick_ok) begin
          jl    <= pick;
          rr    <= pick + 1'b1;
          burst <= '0;
          beat  <= '0;
          es    <= job_write[pick] ? E_AW : E_AR;
        end
        E_AR: if (m_arready) begin
          beat <= '0;
          es   <= E_R;
        end
        E_R: if (m_rvalid) begin
          if (m_rresp != 2'b00) store_error <= 1'b1;
          rng <= xorshift64(rng);
          if (flip_now) n_flips <= n_flips + 32'd1;
          beat <= beat + 3'd1;
          if (m_rlast) begin
            if (burst == BRW'(BURSTS - 1)) begin
              job_pend[jl] <= 1'b0;
              es <= E_IDLE;
            end else begin
              burst <= burst + 1'b1;
              es    <= E_AR;
            end
          end
        end
        E_AW: if (m_awready) begin
          beat <= '0;
          es   <= E_WRD;
        end
        E_WRD: es <= E_W;  // the word's RAM read
        E_W: if (m_wready) begin
          beat <= beat + 3'd1;
          es   <= (beat == 3'd7) ? E_B : E_WRD;
        end
        E_B: if (m_bvalid) begin
          if (m_bresp != 2'b00) store_error <= 1'b1;
          beat <= '0;
          if (burst == BRW'(BURSTS - 1)) begin
            job_pend[jl] <= 1'b0;
            torn[jl]     <= 1'b0;
            es <= E_IDLE;
          end else begin
            burst <= burst + 1'b1;
            es    <= E_AW;
          end
        end
        default: es <= E_IDLE;
      endcase
    end
  end

  // ---------------------------------------------------------------- register reads
  always_comb begin
    case (reg_raddr)
      R_STORE_LO:  reg_rdata = store_base[31:0];
      R_STORE_HI:  reg_rdata = store_base[63:32];
      R_T_R:       reg_rdata = t_r;
      R_T_PROG:    reg_rdata = t_prog;
      R_T_BERS:    reg_rdata = t_bers;
      R_T_RST:     reg_rdata = t_rst;
      R_FAULT:     reg_rdata = 32'(dead) | (32'(fail_prog) << 8) | (32'(fail_erase) << 16);
      R_FLIP_RATE: reg_rdata = flip_rate;
      R_SEED:      reg_rdata = seed;
      R_CTRL:      reg_rdata = 32'(formatting || format_req) | (32'(store_error) << 1) | (32'(busy) << 8);
      R_READS:     reg_rdata = n_reads;
      R_PROGRAMS:  reg_rdata = n_programs;
      R_ERASES:    reg_rdata = n_erases;
      R_FLIPS:     reg_rdata = n_flips;
      R_GEOM0:     reg_rdata = 32'(BLOCKS) | (32'(LUNS) << 24);
      R_GEOM1:     reg_rdata = 32'(PAGES) | (32'(STRIDE) << 16);
      R_ERRORS:    reg_rdata = n_errors;
      default:     reg_rdata = 32'd0;
    endcase
  end
endmodule
