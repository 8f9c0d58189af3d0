/* bench/bench_step.c — PLACEHOLDER while under construction; replaced by the real benchmark. */
#include "tools/commands.h"
#include <stdio.h>
int hs_bench_step(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "hearsay bench step: not built yet\n");
    return 1;
}
