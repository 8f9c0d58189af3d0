/* tools/hearsay.c — the `hearsay` command: dispatches to subcommands (hs_cli_main; the
 * binary's main is tools/main.c). */
#include "config.h"
#include "hearsay/env.h"
#include "tools/commands.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"train", hs_cmd_train, "train a model (one worker, or one rank of a distributed run)"},
    {"sim", hs_cmd_sim, "run hearsay train on N simulated ranks in virtual time"},
    {"run", hs_cmd_run, "start N local workers: hearsay run -n N -- hearsay train ..."},
    {"topo", hs_cmd_topo, "build, analyse and compare peer graphs"},
    {"report", hs_cmd_report, "tables and PNG plots of a run or study directory"},
    {"trace", hs_cmd_trace, "merge a --trace run's parts: hearsay trace merge OUT PART..."},
    {"bench", hs_cmd_bench, "benchmarks: step, p2p, allreduce, gossip, sim (hearsay bench --help)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: hearsay COMMAND [OPTIONS]   (hearsay COMMAND --help for details)\n\n"
               "Decentralized (gossip) training of neural networks.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n  --version   print the version and the enabled backends\n"
               "  --help-env  list the environment variables hearsay reads (HS_*, HEARSAY_*)\n");
}

/* hearsay --help-env: the table of util/env.c, one variable per line. */
static void usage_env(FILE *f)
{
    size_t n;
    const hs_env_var_t *t = hs_env_table(&n);
    fprintf(f, "Environment variables read by hearsay (flags, where a command has one, override "
               "them).\nAn empty value counts as unset.\n\n");
    fprintf(f, "%-20s %-7s %-8s %s\n", "variable", "type", "default", "meaning");
    for (size_t i = 0; i < n; i++) {
        char range[64] = "";
        if (t[i].type == HS_ENV_INT || t[i].type == HS_ENV_SIZE)
            snprintf(range, sizeof range, " [%.0f .. %.0f]", t[i].lo, t[i].hi);
        else if (t[i].type == HS_ENV_DOUBLE)
            snprintf(range, sizeof range, " [%g .. %g]", t[i].lo, t[i].hi);
        fprintf(f, "%-20s %-7s %-8s %s%s\n", t[i].name, hs_env_type_name(t[i].type),
                t[i].def ? t[i].def : "-", t[i].help, range);
    }
    fprintf(f, "\nAlso honoured: libfabric's FI_* (e.g. FI_TCP_IFACE, FI_SHM_DISABLE_CMA), "
               "OMPI_COMM_WORLD_* / PMI* under mpirun,\nSLURM_PROCID / SLURM_NTASKS under srun "
               "(docs/launch.md, docs/transport.md).\n");
}

int hs_cli_main(int argc, char **argv)
{
    /* libinfinipath (psm, linked in through libfabric) installs SIGINT and SIGTERM handlers in
     * its constructor that call exit(1) inside the handler: hearsay train told to stop exited 1
     * instead of dying of the signal (so `hearsay run` exited 1, not 130/143), ran atexit
     * handlers and stdio flushes from a signal handler (a deadlock when the signal lands in
     * printf). Hearsay never opens psm: the default actions come back here (hearsay run
     * installs its own). */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    /* Started by hearsay run with the stop signals blocked (tools/cmd_run.c stop_signals): a
     * stop that came while the libraries loaded is pending, and now ends the rank by its
     * default action, with no library's handler run and nothing left behind. */
    const char *ss = getenv("HS_START_SIGNALS");
    if (ss && !strcmp(ss, "blocked")) {
        unsetenv("HS_START_SIGNALS");
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGHUP);
        sigprocmask(SIG_UNBLOCK, &stop, NULL);
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--help-env")) {
        usage_env(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("hearsay %s (CUDA backend: %s, MPI start-up: %s)\n", PACKAGE_VERSION,
               HS_HAVE_CUDA ? "built" : "not built", HS_HAVE_MPI ? "built" : "not built");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "hearsay: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
