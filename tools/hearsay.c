/* tools/hearsay.c — the `hearsay` command: dispatches to subcommands. */
#include "config.h"
#include "tools/commands.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"train", hs_cmd_train, "train a model (one worker, or one rank of a distributed run)"},
    {"run", hs_cmd_run, "start N local workers: hearsay run -n N -- hearsay train ..."},
    {"topo", hs_cmd_topo, "build, analyse and compare peer graphs"},
    {"bench", hs_cmd_bench, "benchmarks: step, p2p, allreduce, gossip (hearsay bench --help)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: hearsay COMMAND [OPTIONS]   (hearsay COMMAND --help for details)\n\n"
               "Decentralized (gossip) training of neural networks.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n  --version  print the version and the enabled backends\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
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
