# cmake -DIN=file -DOUT=file.cc -DNAME=symbol -DNAMESPACE=ns -P EmbedText.cmake
# Writes a C++ source defining `const char* const NAMESPACE::NAME` with the text of IN,
# as raw string literals split below compilers' literal limits. The delimiter must not
# occur in the text (checked).
file(READ "${IN}" text)
string(FIND "${text}" ")vslembed\"" bad)
if(NOT bad EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )vslembed\"")
endif()
string(LENGTH "${text}" len)
set(out "// Generated from ${IN} by cmake/EmbedText.cmake: edit that file, not this one.\n")
string(APPEND out "namespace ${NAMESPACE} {\nextern const char* const ${NAME};\nconst char* const ${NAME} =\n")
set(pos 0)
while(pos LESS len)
  string(SUBSTRING "${text}" ${pos} 8000 chunk)
  string(APPEND out "R\"vslembed(${chunk})vslembed\"\n")
  math(EXPR pos "${pos} + 8000")
endwhile()
string(APPEND out ";\n}  // namespace ${NAMESPACE}\n")
file(WRITE "${OUT}.tmp" "${out}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
