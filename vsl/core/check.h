// VSL_CHECK: a contract that holds in every build; a violation is a programming error in
// the caller, reported on stderr before the process aborts. (C++17-clean.)
#pragma once

#include <cstdio>
#include <cstdlib>

#define VSL_CHECK(cond, msg)                                                            \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", __FILE__, __LINE__, #cond, msg); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
