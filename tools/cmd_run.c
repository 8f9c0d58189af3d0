/* tools/cmd_run.c — PLACEHOLDER while under construction; replaced by the real command. */
#include "tools/commands.h"
#include <stdio.h>
int hs_cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "hearsay run: not built yet\n");
    return 1;
}
