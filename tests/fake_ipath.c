/*
 * tests/fake_ipath.c — an LD_PRELOAD stand-in for libinfinipath's constructor, for
 * tests/test_start_signals.sh: in a hearsay worker (HS_RANK set, /proc/self/exe a hearsay
 * binary) it installs SIGINT and SIGTERM handlers that leave a FILE.btr in the working
 * directory and call exit(1) inside the handler, as libinfinipath's do, and then takes a while
 * (a large library loading), announcing it with loading-RANK-PID in the working directory.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void on_stop(int sig)
{
    char name[64];
    snprintf(name, sizeof name, "fake-ipath-%d.btr", (int)getpid());
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
    (void)sig;
    exit(1); /* what libinfinipath's handler does: atexit handlers from a signal handler */
}

__attribute__((constructor)) static void fake_ipath_init(void)
{
    const char *rank = getenv("HS_RANK");
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (!rank || n <= 0) return;
    exe[n] = '\0';
    const char *b = strrchr(exe, '/');
    b = b ? b + 1 : exe;
    if (strcmp(b, "hearsay") != 0 && strcmp(b, "lt-hearsay") != 0) return;
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    char name[64];
    snprintf(name, sizeof name, "loading-%s-%d", rank, (int)getpid());
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
    struct timespec ts = {1, 500000000}; /* 1.5 s of "loading", resumed after a signal */
    while (nanosleep(&ts, &ts) != 0) continue;
}
