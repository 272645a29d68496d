// vsl_ecc (synthesizable): the controller's ECC engine in RTL: binary BCH over GF(2^13),
// t = 8, 512-byte codewords, bit-exact with the hls/ codec (hls/bch.h) and with the DPI-C
// simulation model (rtl/ecc/vsl_ecc.sv, the same ports and the same module name: a build
// takes one of the two files). Layout and protocol: see vsl_ecc.sv.
//
// Encode: message words (8 bytes a cycle) run through a 104-bit LFSR (the byte step of
//   hls/bch_impl.h, eight per cycle); codeword c's remainder is its parity. After
//   in_last: one fix write per spare byte behind the metadata (parity bytes of codeword
//   0, 1, ..., then zeroes), then done. Bytes missing before the parity (a short
//   message) count as 0xFF, as in the model.
// Decode: the page as sensed, one byte per in_valid (the pipe feeds it from the bus).
//   Each byte is kept in a local RAM (the fix writes carry corrected values) and runs
//   through the LFSR; codeword c's remainder is then XORed with its received parity and
//   its zero bits counted. After in_last, codeword by codeword: a zero remainder is clean;
//   at most t zero bits is an erased codeword (every byte not 0xFF written back as 0xFF);
//   otherwise the odd syndromes from the remainder's bits (104 cycles), the even ones by
//   squaring, inversionless Berlekamp-Massey (2t iterations of two cycles; its locator is
//   the codec's scaled by a constant, with the same roots), and a Chien search 8
//   positions a cycle, stopping at the L-th root. A locator of degree above t or with
//   fewer roots inside the codeword leaves the codeword as received (uncorrectable);
//   otherwise each error bit is a read-modify-write of the local RAM and a fix write. A
//   page of more than MAX_CW codewords, or whose parity does not fit its spare, is not
//   protected (decode reports uncorrectable), as in the model.
// Timing (200 MHz): encode adds the spare's fix writes (~104 cycles) after the last word;
//   a clean page's decode ends a few cycles after its last byte; a codeword with errors
//   costs ~104 + 40 + n/8 cycles (~0.9k, 4.5 us) plus two cycles per error bit.
// Named vsl_ecc like the DPI model it replaces (a build picks one file).
/* verilator lint_off DECLFILENAME */
module vsl_ecc #(
    /* verilator lint_off UNUSEDPARAM */
    parameter int ID = 0,                 // unused here (the DPI model keeps instances apart)
    /* verilator lint_on UNUSEDPARAM */
    parameter int unsigned MAX_BYTES = 8192,  // page + spare the local RAM holds
    parameter int unsigned MAX_CW = 8         // codewords per page (8: 4 KiB pages)
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
  localparam int unsigned R = 104;        // parity bits (13 t)
  localparam int unsigned PB = 13;        // parity bytes per codeword
  localparam int unsigned CW = 512;       // codeword data bytes
  localparam int unsigned T = 8;
  localparam int unsigned RAW = $clog2(MAX_BYTES);
  localparam int unsigned MW = (MAX_CW > 1) ? $clog2(MAX_CW) : 1;  // remainder RAM address
  localparam int unsigned CWW = 5;  // codeword counters (up to 31: past MAX_CW without wrapping)
  localparam int unsigned NL = 2 * T + 1;  // locator coefficients kept during BM (degree <= 2t)

  // ---------------------------------------------------------------- the LFSR (hls Step)
  // One message byte: s <- s * x^8 + byte * x^R mod g(x).
  function automatic logic [R-1:0] lfsr_byte(input logic [R-1:0] s, input logic [7:0] b);
    logic [R-1:0] r;
    r = s;
    for (int i = 7; i >= 0; i--) begin
      if (r[R-1] ^ b[i]) r = {r[R-2:0], 1'b0} ^ vsl_bch_pkg::BCH_GEN_LOW;
      else               r = {r[R-2:0], 1'b0};
    end
    lfsr_byte = r;
  endfunction

  // ---------------------------------------------------------------- local page RAM
  logic [7:0]     ram [MAX_BYTES];
  logic           ram_we;
  logic [RAW-1:0] ram_waddr, ram_raddr;
  logic [7:0]     ram_wdata, ram_rdata;
  always_ff @(posedge clk) begin
    if (ram_we) ram[ram_waddr] <= ram_wdata;
    ram_rdata <= ram[ram_raddr];
  end

  always_ff @(posedge clk) begin
    if (rem_we) rem_ram[rem_wa] <= rem_wd;
    rem_rd <= rem_ram[rem_ra];
  end

  // ---------------------------------------------------------------- state
  typedef enum logic [4:0] {
    S_IDLE, S_STREAM, S_PAD, S_ENC_FIX, S_NEXT_CW, S_ERASED, S_SYN, S_SQUARE, S_BM_D, S_BM_U, S_CHIEN0,
    S_CHIEN, S_FIX_RD, S_FIX_WAIT, S_FIX_WR, S_DONE, S_ENC_LOAD, S_LOAD
  } state_e;
  state_e      st;
  logic        dec;
  logic [15:0] mbytes, sbytes, parity_at;
  logic [MW-1:0] last_cw;                // ncw - 1 (the RAM slot of the last codeword)
  logic [4:0]  ncw;                      // codewords on the page
  logic        bad_geom;
  logic [15:0] pos;                      // stream byte offset (message and spare)
  logic [R-1:0] s;                       // the running LFSR
  // per codeword: its remainder (decode, parity XORed in) or its parity (encode), in a
  // small RAM; `cur` holds the one being worked on, `par` collects a codeword's received
  // parity bytes
  logic [R-1:0]   rem_ram [MAX_CW];
  logic           rem_we;
  logic [MW-1:0]  rem_wa, rem_ra;
  logic [R-1:0]   rem_wd, rem_rd, cur, par;
  logic [5*MAX_CW-1:0] zc;               // per codeword: zero bits (saturating at 31)
  logic [CWW-1:0] cw;                    // codeword of the stream position / being decoded
  logic [9:0]  cw_pos;                   // byte within the codeword's message
  logic [3:0]  pk;                       // parity byte within its codeword
  logic [CWW-1:0] pc;                    // codeword of the parity byte
  logic [15:0] fix_j;                    // encode: spare byte index behind the metadata
  logic [15:0] corr;
  logic        unc;
  // decode of one codeword
  logic [15:0] cw_base, cw_len;          // its message bytes in the page, and their count
  logic [15:0] scan;                     // erased fill: message byte, then parity bytes
  logic [6:0]  bit_i;                    // syndromes: remainder bit
  logic [13*8-1:0] pw;                   // alpha^(i j) for odd j (slot (j-1)/2)
  logic [13*2*T-1:0] syn;                // S_1..S_2t (slot j-1)
  logic [13*NL-1:0] sw;                  // iBM step n: slot i holds S_(n+1-i) (0 below S_1)
  logic [3:0]  sq;                       // even syndrome being squared
  logic [13*NL-1:0] lam, prv;            // locator and the previous one (iBM), x^0 first
  logic [12:0] gam, dsc;                 // iBM gamma and the discrepancy of this step
  logic [4:0]  bm_n, bm_l, bm_shift;
  logic [15:0] ch_d, ch_n;               // Chien: first position of this cycle, positions
  logic [13*T-1:0] term;                 // Chien terms lambda_k alpha^(-d k), k = 1..t
  logic [16*T-1:0] roots;                // root positions found, the latest in slot 0
  logic [3:0]  found, fx;                // roots found; fix being applied
  logic [15:0] fx_byte;                 // the byte of the error bit being fixed
  logic [RAW-1:0] fx_addr;
  assign fx_addr = fx_byte[RAW-1:0];
  assign last_cw = MW'(ncw - 5'd1);
  logic [7:0]  fx_mask;

  // the remainder RAM is read for the parity being streamed or encoded (pc), else for
  // the codeword being decoded (cw)
  assign rem_ra = MW'((st == S_STREAM || st == S_ENC_LOAD || st == S_ENC_FIX) ? pc : cw);

  assign ram_raddr = (st == S_ERASED) ? RAW'(scan < cw_len ? cw_base + scan : parity_at + 16'(PB) * 16'(cw) + scan - cw_len)
                                      : fx_addr;

  // a codeword's zero-bit count plus those of byte b, saturating at 31 (only <= t matters)
  function automatic logic [4:0] sat_add(input logic [4:0] z, input logic [7:0] b);
    logic [5:0] sum;
    sum = {1'b0, z} + 6'(8 - $countones(b));
    sat_add = (sum > 6'd31) ? 5'd31 : sum[4:0];
  endfunction

  // alpha^j for the odd syndrome j = 2k + 1 of slot k
  function automatic logic [12:0] odd_alpha(input int k);
    odd_alpha = vsl_bch_pkg::alpha_pow(13'(2 * k + 1));
  endfunction

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      st <= S_IDLE; dec <= 1'b0; mbytes <= '0; sbytes <= '0; parity_at <= '0; ncw <= '0;
      bad_geom <= 1'b0; pos <= '0; s <= '0; zc <= '0; cur <= '0; par <= '0; sw <= '0;
      rem_we <= 1'b0; rem_wa <= '0; rem_wd <= '0; cw <= '0; cw_pos <= '0; pk <= '0; pc <= '0;
      fix_j <= '0; corr <= '0; unc <= 1'b0; cw_base <= '0; cw_len <= '0; scan <= '0; bit_i <= '0; pw <= '0;
      syn <= '0; sq <= '0; lam <= '0; prv <= '0; gam <= '0; dsc <= '0; bm_n <= '0; bm_l <= '0; bm_shift <= '0;
      ch_d <= '0; ch_n <= '0; term <= '0; roots <= '0; found <= '0; fx <= '0; fx_byte <= '0; fx_mask <= '0;
      ram_we <= 1'b0; ram_waddr <= '0; ram_wdata <= '0;
      fix_valid <= 1'b0; fix_addr <= '0; fix_data <= '0; done <= 1'b0; corrected <= '0; uncorrectable <= 1'b0;
    end else begin
      ram_we    <= 1'b0;
      rem_we    <= 1'b0;
      fix_valid <= 1'b0;
      done      <= 1'b0;
      if (start) begin
        dec       <= decode;
        mbytes    <= meta_bytes;
        sbytes    <= spare_bytes;
        parity_at <= data_bytes + meta_bytes;
        ncw       <= 5'(data_bytes >> 9);
        bad_geom  <= data_bytes[8:0] != 9'd0 || data_bytes == 16'd0 || (data_bytes >> 9) > 16'(MAX_CW) ||
                     32'(data_bytes) + 32'(meta_bytes) + 32'(PB) * 32'(data_bytes[15:9]) >
                         32'(data_bytes) + 32'(spare_bytes) ||
                     32'(data_bytes) + 32'(spare_bytes) > 32'(MAX_BYTES);
        pos <= '0; s <= '0; zc <= '0; cw <= '0; cw_pos <= '0; pk <= '0; pc <= '0; par <= '0;
        corr <= '0; unc <= 1'b0;
        st <= S_STREAM;
      end else begin
        case (st)
          // ---- the page streams in
          S_STREAM: if (in_valid) begin
            if (!dec) begin : enc_word
              // encode: up to 8 message bytes; codeword boundaries fall on whole words
              // (512-byte codewords, metadata a multiple of 8)
              logic [R-1:0] x;
              x = s;
              for (int k = 0; k < 8; k++) begin
                if (4'(k) < in_nbytes && pos + 16'(k) < parity_at) x = lfsr_byte(x, in_word[8*k +: 8]);
              end
              pos    <= pos + 16'(in_nbytes);
              cw_pos <= cw_pos + 10'(in_nbytes);
              if (cw_pos + 10'(in_nbytes) >= 10'(CW) && cw + 5'd1 < ncw && !bad_geom) begin
                rem_we <= 1'b1;  // a full codeword that is not the last
                rem_wa <= MW'(cw);
                rem_wd <= x;
                s      <= '0;
                cw     <= cw + 1'b1;
                cw_pos <= cw_pos + 10'(in_nbytes) - 10'(CW);
              end else begin
                s <= x;
              end
              if (in_last) st <= (pos + 16'(in_nbytes) < parity_at) ? S_PAD : S_ENC_LOAD;
              if (in_last && pos + 16'(in_nbytes) >= parity_at && !bad_geom) begin
                rem_we <= 1'b1;
                rem_wa <= last_cw;
                rem_wd <= x;
                fix_j  <= '0;
              end
            end else begin : dec_byte
              // decode: one byte
              logic [7:0] b;
              b = in_word[7:0];
              ram_we    <= pos < 16'(MAX_BYTES);
              ram_waddr <= RAW'(pos);
              ram_wdata <= b;
              pos <= pos + 16'd1;
              if (!bad_geom && pos < parity_at) begin : msg_byte
                logic [R-1:0] x;
                x = lfsr_byte(s, b);
                zc[5*cw +: 5] <= sat_add(zc[5*cw +: 5], b);
                if (pos + 16'd1 == parity_at) begin  // the last message byte: the last codeword
                  rem_we <= 1'b1;
                  rem_wa <= MW'(cw);
                  rem_wd <= x;
                  s <= '0;
                end else if (cw_pos == 10'(CW - 1) && cw + 5'd1 < ncw) begin
                  rem_we <= 1'b1;
                  rem_wa <= MW'(cw);
                  rem_wd <= x;
                  s      <= '0;
                  cw     <= cw + 1'b1;
                  cw_pos <= '0;
                end else begin
                  s      <= x;
                  cw_pos <= cw_pos + 10'd1;
                end
              end else if (!bad_geom && pos < parity_at + 16'(PB) * 16'(ncw)) begin
                // parity byte pk of codeword pc (hls LoadParity); with its 13th the
                // codeword's remainder (read from the RAM at pc) gets them all
                if (pk == 4'(PB - 1)) begin
                  rem_we <= 1'b1;
                  rem_wa <= MW'(pc);
                  rem_wd <= rem_rd ^ {par[R-1:8], b};
                  par    <= '0;
                end else begin
                  par <= par | (R'(b) << (R - 8 - 8 * 32'(pk)));
                end
                zc[5*pc +: 5] <= sat_add(zc[5*pc +: 5], b);
                if (pk == 4'(PB - 1)) begin
                  pk <= '0;
                  pc <= pc + 1'b1;
                end else begin
                  pk <= pk + 4'd1;
                end
              end
              if (in_last) begin
                cw <= '0;
                unc <= bad_geom;
                st <= bad_geom ? S_DONE : S_NEXT_CW;
              end
            end
          end
          // ---- encode: a short message padded with 0xFF up to the parity
          S_PAD: begin : pad
            logic [R-1:0] x;
            x = s;
            for (int k = 0; k < 8; k++) if (pos + 16'(k) < parity_at) x = lfsr_byte(x, 8'hFF);
            pos <= pos + 16'd8;
            cw_pos <= cw_pos + 10'd8;
            if (cw_pos + 10'd8 >= 10'(CW) && cw + 5'd1 < ncw && pos + 16'd8 < parity_at && !bad_geom) begin
              rem_we <= 1'b1;
              rem_wa <= MW'(cw);
              rem_wd <= x;
              s      <= '0;
              cw     <= cw + 1'b1;
              cw_pos <= cw_pos + 10'd8 - 10'(CW);
            end else begin
              s <= x;
            end
            if (pos + 16'd8 >= parity_at) begin
              rem_we <= !bad_geom;
              rem_wa <= last_cw;
              rem_wd <= x;
              fix_j <= '0;
              st <= S_ENC_LOAD;
            end
          end
          // ---- encode: the spare behind the metadata, a byte a cycle
          // the RAM reads codeword pc's parity at the edge that leaves this state, once a
          // write still in flight (the last codeword's) has landed
          S_ENC_LOAD: if (!rem_we) st <= S_ENC_FIX;
          S_ENC_FIX: begin : enc_fix
            logic [R-1:0] p;
            if (bad_geom || fix_j >= sbytes - mbytes) begin
              st <= S_DONE;
            end else begin
              p = (pk == 4'd0) ? rem_rd : cur;
              cur       <= p << 8;
              fix_valid <= 1'b1;
              fix_addr  <= parity_at + fix_j;
              fix_data  <= (fix_j < 16'(PB) * 16'(ncw)) ? p[R-1 -: 8] : 8'h00;
              fix_j     <= fix_j + 16'd1;
              if (pk == 4'(PB - 1)) begin
                pk <= '0;
                pc <= pc + 1'b1;
                st <= S_ENC_LOAD;
              end else begin
                pk <= pk + 4'd1;
              end
            end
          end
          // ---- decode, codeword by codeword
          S_NEXT_CW: if (!rem_we) begin  // (a remainder write in flight lands first)
            if (cw >= ncw) begin
              st <= S_DONE;
            end else begin
              cw_base <= 16'(cw) * 16'(CW);
              cw_len  <= (cw + 5'd1 == ncw) ? 16'(CW) + mbytes : 16'(CW);
              st      <= S_LOAD;  // the RAM reads the codeword's remainder at this edge
            end
          end
          S_LOAD: begin
            cur <= rem_rd;
              if (rem_rd == '0) begin
                st <= S_NEXT_CW;
                cw <= cw + 1'b1;  // clean
              end else if (zc[5*cw +: 5] <= 5'(T)) begin
                corr <= corr + 16'(zc[5*cw +: 5]);
                scan <= '0;
                st   <= S_ERASED;
              end else begin
                bit_i <= '0;
                syn   <= '0;
                for (int k = 0; k < 8; k++) pw[13*k +: 13] <= 13'd1;
                st <= S_SYN;
              end
          end
          // erased: every byte of message and parity that is not 0xFF becomes 0xFF (the RAM
          // read of `scan` lands a cycle later: scan runs one ahead)
          S_ERASED: begin
            if (scan != 16'd0 && ram_rdata != 8'hFF) begin
              fix_valid <= 1'b1;
              fix_addr  <= (scan - 16'd1 < cw_len) ? cw_base + scan - 16'd1
                                                   : parity_at + 16'(PB) * 16'(cw) + scan - 16'd1 - cw_len;
              fix_data  <= 8'hFF;
            end
            if (scan == cw_len + 16'(PB)) begin
              cw <= cw + 1'b1;
              st <= S_NEXT_CW;
            end else begin
              scan <= scan + 16'd1;
            end
          end
          // odd syndromes: S_j ^= alpha^(i j) for each set remainder bit i
          S_SYN: begin
            for (int k = 0; k < 8; k++) begin
              if (cur[bit_i]) syn[13*(2*k) +: 13] <= syn[13*(2*k) +: 13] ^ pw[13*k +: 13];
              pw[13*k +: 13] <= vsl_bch_pkg::gf_mul(pw[13*k +: 13], odd_alpha(k));
            end
            if (bit_i == 7'(R - 1)) begin
              sq <= 4'd1;
              st <= S_SQUARE;
            end else begin
              bit_i <= bit_i + 7'd1;
            end
          end
          // even syndromes S_2j = S_j^2 in four rounds (S_4 needs S_2, S_8 S_4, S_16 S_8);
          // then iBM starts at step 0 with the window S_1
          S_SQUARE: begin
            case (sq)
              4'd1: begin
                syn[13*1 +: 13]  <= vsl_bch_pkg::gf_mul(syn[13*0 +: 13], syn[13*0 +: 13]);  // S2
                syn[13*5 +: 13]  <= vsl_bch_pkg::gf_mul(syn[13*2 +: 13], syn[13*2 +: 13]);  // S6
                syn[13*9 +: 13]  <= vsl_bch_pkg::gf_mul(syn[13*4 +: 13], syn[13*4 +: 13]);  // S10
                syn[13*13 +: 13] <= vsl_bch_pkg::gf_mul(syn[13*6 +: 13], syn[13*6 +: 13]);  // S14
              end
              4'd2: begin
                syn[13*3 +: 13]  <= vsl_bch_pkg::gf_mul(syn[13*1 +: 13], syn[13*1 +: 13]);  // S4
                syn[13*11 +: 13] <= vsl_bch_pkg::gf_mul(syn[13*5 +: 13], syn[13*5 +: 13]);  // S12
              end
              4'd3: syn[13*7 +: 13]  <= vsl_bch_pkg::gf_mul(syn[13*3 +: 13], syn[13*3 +: 13]);   // S8
              default: syn[13*15 +: 13] <= vsl_bch_pkg::gf_mul(syn[13*7 +: 13], syn[13*7 +: 13]); // S16
            endcase
            if (sq == 4'd4) begin
              lam <= '0;
              prv <= '0;
              lam[12:0] <= 13'd1;
              prv[12:0] <= 13'd1;
              sw  <= '0;
              sw[12:0] <= syn[12:0];
              gam <= 13'd1;
              bm_n <= '0;
              bm_l <= '0;
              bm_shift <= 5'd1;
              st <= S_BM_D;
            end else begin
              sq <= sq + 4'd1;
            end
          end
          // iBM, step n: the discrepancy d = sum_i lambda_i S_(n+1-i)
          S_BM_D: begin : bm_d
            logic [12:0] d;
            d = '0;
            for (int i = 0; i < NL; i++) d = d ^ vsl_bch_pkg::gf_mul(lam[13*i +: 13], sw[13*i +: 13]);
            dsc <= d;
            st  <= S_BM_U;
          end
          // lambda <- gamma lambda + d x^shift prev; on a length change prev <- old lambda
          S_BM_U: begin
            if (dsc == 13'd0) begin
              bm_shift <= bm_shift + 5'd1;
            end else begin
              for (int i = 0; i < NL; i++) begin : bm_u
                logic [12:0] v;
                v = vsl_bch_pkg::gf_mul(gam, lam[13*i +: 13]);
                if (i >= 32'(bm_shift)) v = v ^ vsl_bch_pkg::gf_mul(dsc, prv[13*(i - 32'(bm_shift)) +: 13]);
                lam[13*i +: 13] <= v;
              end
              if (2 * 32'(bm_l) <= 32'(bm_n)) begin
                prv      <= lam;
                bm_l     <= bm_n + 5'd1 - bm_l;
                gam      <= dsc;
                bm_shift <= 5'd1;
              end else begin
                bm_shift <= bm_shift + 5'd1;
              end
            end
            sw <= {sw[13*(NL-1)-1:0], (bm_n < 5'(2 * T - 1)) ? syn[13*(bm_n + 5'd1) +: 13] : 13'd0};
            if (bm_n == 5'(2 * T - 1)) begin
              st <= S_CHIEN0;  // lambda and L settle at this edge
            end else begin
              bm_n <= bm_n + 5'd1;
              st   <= S_BM_D;
            end
          end
          // the locator's degree decides; the Chien terms start at lambda_k (d = 0)
          S_CHIEN0: begin
            if (bm_l > 5'(T)) begin
              unc <= 1'b1;
              cw  <= cw + 1'b1;
              st  <= S_NEXT_CW;
            end else begin
              term  <= lam[13 +: 13*T];
              ch_d  <= '0;
              ch_n  <= 16'd8 * cw_len + 16'(R);
              found <= '0;
              st    <= S_CHIEN;
            end
          end
          // Chien: lambda(alpha^-d) for d = ch_d .. ch_d + 7
          S_CHIEN: begin : chien
            logic [3:0] f;
            logic [16*T-1:0] rts;
            f = found;
            rts = roots;
            for (int p = 0; p < 8; p++) begin : chien_pos
              logic [12:0] sum;
              sum = lam[12:0];
              for (int k = 1; k <= T; k++) begin
                sum = sum ^ vsl_bch_pkg::gf_mul(term[13*(k-1) +: 13], vsl_bch_pkg::alpha_pow(13'((8191 - (k * p) % 8191) % 8191)));
              end
              if (sum == 13'd0 && ch_d + 16'(p) < ch_n && 5'(f) < bm_l) begin
                rts = {rts[16*(T-1)-1:0], ch_d + 16'(p)};
                f = f + 4'd1;
              end
            end
            found <= f;
            roots <= rts;
            for (int k = 1; k <= T; k++) begin
              term[13*(k-1) +: 13] <= vsl_bch_pkg::gf_mul(term[13*(k-1) +: 13], vsl_bch_pkg::alpha_pow(13'((8191 - (8 * k) % 8191) % 8191)));
            end
            ch_d <= ch_d + 16'd8;
            if (5'(f) == bm_l || ch_d + 16'd8 >= ch_n) begin
              fx <= 4'd0;
              if (5'(f) != bm_l) begin
                unc <= 1'b1;  // roots missing, or outside the codeword
                cw  <= cw + 1'b1;
                st  <= S_NEXT_CW;
              end else begin
                corr <= corr + 16'(bm_l);
                st   <= S_FIX_RD;
              end
            end
          end
          // each error bit: read its byte (the RAM holds fixes already made), then write
          S_FIX_RD: begin : fix_rd
            logic [15:0] d, bitpos, a;
            if (fx == found) begin
              cw <= cw + 1'b1;
              st <= S_NEXT_CW;
            end else begin
              d = roots[15:0];
              roots <= roots >> 16;
              if (d < 16'(R)) begin
                bitpos = 16'(R - 1) - d;
                a = parity_at + 16'(PB) * 16'(cw) + (bitpos >> 3);
              end else begin
                bitpos = ch_n - 16'd1 - d;
                a = cw_base + (bitpos >> 3);
              end
              fx_byte <= a;
              fx_mask <= 8'h80 >> bitpos[2:0];
              st <= S_FIX_WAIT;
            end
          end
          S_FIX_WAIT: st <= S_FIX_WR;  // the RAM reads the byte at this edge
          S_FIX_WR: begin
            ram_we    <= 1'b1;
            ram_waddr <= fx_addr;
            ram_wdata <= ram_rdata ^ fx_mask;
            fix_valid <= 1'b1;
            fix_addr  <= fx_byte;
            fix_data  <= ram_rdata ^ fx_mask;
            fx <= fx + 4'd1;
            st <= S_FIX_RD;
          end
          S_DONE: begin
            done          <= 1'b1;
            corrected     <= corr;
            uncorrectable <= dec && unc;
            st            <= S_IDLE;
          end
          default: ;  // S_IDLE
        endcase
      end
    end
  end
endmodule
/* verilator lint_on DECLFILENAME */
