/* tools/cmd_train.c — PLACEHOLDER while under construction; replaced by the real command. */
#include "tools/commands.h"
#include <stdio.h>
int hs_cmd_train(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "hearsay train: not built yet\n");
    return 1;
}
