/* tools/cmd_bench.c — `hearsay bench NAME [--json] ...`: dispatch to the benchmarks in bench/. */
#include "tools/commands.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} benches[] = {
    {"step", hs_bench_step, "one training step (forward + backward + SGD) of a model"},
    {"p2p", hs_bench_p2p, "bandwidth and latency of tagged sends between 2 ranks"},
    {"allreduce", hs_bench_allreduce, "hearsay's all-reduce vs MPI_Allreduce on 2/4/8 local ranks"},
    {"gossip", hs_bench_gossip, "one SGP exchange (exp1peer) vs PyTorch+gloo"},
    {"sim", hs_bench_sim, "the virtual-time simulator's cost: scale, overhead, thread counts"},
    {"compress", hs_bench_compress, "compress / decompress GB/s of every compressor beside memcpy"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: hearsay bench NAME [--json] [OPTIONS]   (hearsay bench NAME --help)\n\n"
               "Benchmarks report medians over repetitions; --json prints one JSON object per\n"
               "measurement.\n\nbenchmarks:\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(f, "  %-10s %s\n", benches[i].name, benches[i].help);
}

int hs_cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (!strcmp(argv[1], benches[i].name)) return benches[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "hearsay bench: unknown benchmark '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
