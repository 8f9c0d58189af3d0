/* tools/cmd_topo.c — PLACEHOLDER while under construction; replaced by the real command. */
#include "tools/commands.h"
#include <stdio.h>
int hs_cmd_topo(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "hearsay topo: not built yet\n");
    return 1;
}
