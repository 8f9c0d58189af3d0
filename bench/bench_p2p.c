/* bench/bench_p2p.c — PLACEHOLDER while under construction; replaced by the real benchmark. */
#include "tools/commands.h"
#include <stdio.h>
int hs_bench_p2p(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "hearsay bench p2p: not built yet\n");
    return 1;
}
