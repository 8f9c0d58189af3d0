/* tools/cmd_trace.c — `hearsay trace merge OUT IN...`: the timeline's parts into one file. */
#include "hearsay/common.h"
#include "hearsay/trace.h"
#include "tools/commands.h"

#include <stdio.h>
#include <string.h>

static const char trace_usage[] =
    "usage: hearsay trace merge OUT PART...\n"
    "\n"
    "Merge the parts a run with --trace FILE left (FILE.rank0, FILE.rank1, ...: rank 0 merges\n"
    "them itself when it can see them all) into OUT, one Chrome trace-event JSON file for\n"
    "Perfetto (ui.perfetto.dev) or chrome://tracing. A single part converts that rank alone.\n"
    "See docs/timeline.md.\n";

int hs_cmd_trace(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(trace_usage, stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "merge") != 0) {
        fprintf(stderr, "hearsay trace: expected 'merge OUT PART...'%s%s%s\n\n%s",
                argc >= 2 ? " (not '" : "", argc >= 2 ? argv[1] : "", argc >= 2 ? "')" : "",
                trace_usage);
        return 2;
    }
    if (argc < 4) {
        fprintf(stderr, "hearsay trace merge: expected an output file and at least one part\n\n%s",
                trace_usage);
        return 2;
    }
    long unpaired = 0;
    if (hs_trace_merge(argv[2], (const char *const *)&argv[3], argc - 3, &unpaired) < 0) {
        fprintf(stderr, "hearsay trace merge: %s\n", hs_last_error());
        return 1;
    }
    return 0;
}
