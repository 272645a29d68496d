// ONFI constants shared by the channel engine, its sequencer and the testbench.
// A package of named constants: a module uses the few it needs, so unused ones are
// expected (the one lint waiver here, scoped to this package).
/* verilator lint_off UNUSEDPARAM */
package vsl_onfi_pkg;
  // vsl_onfi_phy op kinds
  localparam logic [2:0] OP_CMD     = 3'd0;
  localparam logic [2:0] OP_ADDR    = 3'd1;
  localparam logic [2:0] OP_DIN     = 3'd2;
  localparam logic [2:0] OP_DOUT    = 3'd3;
  localparam logic [2:0] OP_WAIT    = 3'd4;
  localparam logic [2:0] OP_WAIT_RB = 3'd5;
  localparam logic [2:0] OP_CE      = 3'd6;
  // OP_WAIT selectors (op_byte)
  localparam logic [7:0] WAIT_WHR = 8'd0;
  localparam logic [7:0] WAIT_ADL = 8'd1;
  localparam logic [7:0] WAIT_WB  = 8'd2;
  localparam logic [7:0] WAIT_RR  = 8'd3;
  // ONFI commands
  localparam logic [7:0] CMD_READ_1            = 8'h00;
  localparam logic [7:0] CMD_READ_2            = 8'h30;
  localparam logic [7:0] CMD_CHANGE_READ_COL_1 = 8'h05;
  localparam logic [7:0] CMD_CHANGE_READ_COL_2 = 8'hE0;
  localparam logic [7:0] CMD_PROGRAM_1         = 8'h80;
  localparam logic [7:0] CMD_PROGRAM_2         = 8'h10;
  localparam logic [7:0] CMD_ERASE_1           = 8'h60;
  localparam logic [7:0] CMD_ERASE_2           = 8'hD0;
  localparam logic [7:0] CMD_READ_STATUS       = 8'h70;
  localparam logic [7:0] CMD_READ_STATUS_ENH   = 8'h78;
  localparam logic [7:0] CMD_READ_ID           = 8'h90;
  localparam logic [7:0] CMD_READ_PARAM_PAGE   = 8'hEC;
  localparam logic [7:0] CMD_GET_FEATURES      = 8'hEE;
  localparam logic [7:0] CMD_SET_FEATURES      = 8'hEF;
  localparam logic [7:0] CMD_RESET             = 8'hFF;
  localparam logic [7:0] CMD_RESET_LUN         = 8'hFA;
endpackage
/* verilator lint_on UNUSEDPARAM */
