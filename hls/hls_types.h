// The HLS types every kernel includes: the vendor's headers in an HLS build
// (__SYNTHESIS__ defined by Vitis HLS), the project's own stand-ins (hls/compat/)
// everywhere else: C-simulation, the software card and RTL co-simulation through DPI-C.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#ifdef __SYNTHESIS__
#include <ap_int.h>
#include <hls_stream.h>
#else
#include "hls/compat/ap_int.h"
#include "hls/compat/hls_stream.h"
#endif
