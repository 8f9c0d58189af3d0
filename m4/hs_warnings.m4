dnl AX_HS_WARNINGS: -Wall -Wextra always; -Werror with --enable-werror (CI turns it on).
AC_DEFUN([AX_HS_WARNINGS], [
  AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors (default: no; CI: yes)])],
    [], [enable_werror=no])
  HS_WARN_CFLAGS="-Wall -Wextra -Wno-unused-parameter -Wno-format-truncation"
  AS_IF([test "x$enable_werror" = xyes], [HS_WARN_CFLAGS="$HS_WARN_CFLAGS -Werror"])
  AC_SUBST([HS_WARN_CFLAGS])
])
