dnl HS_CHECK_MPI: optional Open MPI for start-up under mpirun and as benchmark reference.
dnl --with-mpi (must exist), --without-mpi, default: auto-detect.
AC_DEFUN([HS_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi], [use MPI for start-up under mpirun and benchmark references (default: auto)])],
    [], [with_mpi=auto])
  hs_have_mpi=no
  AS_IF([test "x$with_mpi" != xno], [
    PKG_CHECK_MODULES([MPI], [ompi-c], [hs_have_mpi=yes],
      [PKG_CHECK_MODULES([MPI], [mpi-c], [hs_have_mpi=yes], [hs_have_mpi=no])])
    AS_IF([test "x$hs_have_mpi" = xno && test "x$with_mpi" = xyes],
      [AC_MSG_ERROR([--with-mpi given but no MPI found by pkg-config (ompi-c / mpi-c): install libopenmpi-dev])])
  ])
  AS_IF([test "x$hs_have_mpi" = xyes], [AC_DEFINE([HS_HAVE_MPI], [1], [Define to 1 when built with MPI])],
        [AC_DEFINE([HS_HAVE_MPI], [0], [Define to 1 when built with MPI])])
  AM_CONDITIONAL([HAVE_MPI], [test "x$hs_have_mpi" = xyes])
])
