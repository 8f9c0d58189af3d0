dnl HS_CHECK_FUZZ: libFuzzer harnesses (tests/fuzz, `make fuzz`) need clang with the fuzzer,
dnl AddressSanitizer and UndefinedBehaviorSanitizer runtimes (Debian: clang, libclang-rt-14-dev).
dnl FUZZ_CC picks the compiler (default: clang, then clang-14); --disable-fuzz turns it off.
dnl Sets FUZZ_CC, the automake conditional HAVE_FUZZER and, when it is off, HS_FUZZ_WHY.
AC_DEFUN([HS_CHECK_FUZZ], [
  AC_ARG_VAR([FUZZ_CC], [C compiler for the libFuzzer harnesses (default: clang)])
  AC_ARG_ENABLE([fuzz],
    [AS_HELP_STRING([--disable-fuzz], [do not build the libFuzzer harnesses (default: when clang can)])],
    [], [enable_fuzz=auto])
  hs_have_fuzz=no
  HS_FUZZ_WHY=""
  AS_IF([test "x$enable_fuzz" = xno], [HS_FUZZ_WHY="disabled by --disable-fuzz"], [
    AS_IF([test -z "$FUZZ_CC"], [AC_CHECK_PROGS([FUZZ_CC], [clang clang-14])])
    AS_IF([test -z "$FUZZ_CC"], [HS_FUZZ_WHY="no clang found (install clang and libclang-rt-14-dev, or set FUZZ_CC)"], [
      AC_MSG_CHECKING([whether $FUZZ_CC links with -fsanitize=fuzzer,address,undefined])
      hs_fuzz_dir=`mktemp -d 2>/dev/null || echo conftest.fuzz.d`
      mkdir -p "$hs_fuzz_dir"
      cat > "$hs_fuzz_dir/f.c" <<'HS_EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return n > 1 && *d == 1 ? (int)n : 0; }
HS_EOF
      AS_IF([$FUZZ_CC -fsanitize=fuzzer,address,undefined "$hs_fuzz_dir/f.c" -o "$hs_fuzz_dir/f" >&AS_MESSAGE_LOG_FD 2>&1 &&
             "$hs_fuzz_dir/f" -runs=1 >&AS_MESSAGE_LOG_FD 2>&1],
        [hs_have_fuzz=yes; AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         HS_FUZZ_WHY="$FUZZ_CC cannot build and run -fsanitize=fuzzer,address,undefined (install libclang-rt-14-dev)"])
      rm -rf "$hs_fuzz_dir"
    ])
    AS_IF([test "x$hs_have_fuzz" = xno && test "x$enable_fuzz" = xyes],
      [AC_MSG_ERROR([--enable-fuzz given but $HS_FUZZ_WHY])])
  ])
  AC_SUBST([HS_FUZZ_WHY])
  AM_CONDITIONAL([HAVE_FUZZER], [test "x$hs_have_fuzz" = xyes])
])
