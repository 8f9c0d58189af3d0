/* tools/main.c — the `hearsay` binary: the command (tools/hearsay.c) with the built-in
 * algorithms. A program with algorithms of its own registers them, then calls hs_cli_main the
 * same way (tests/algo_example.c). */
#include "tools/commands.h"

int main(int argc, char **argv)
{
    return hs_cli_main(argc, argv);
}
