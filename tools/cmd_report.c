/*
 * tools/cmd_report.c — `hearsay report DIR`: the tables and PNG plots of a run directory
 * (`hearsay train --out` / `hearsay sim --out`) or of a study directory holding such runs.
 *
 * The work is done by experiments/report.py (mode `dir`), run under Debian's python3, which has
 * matplotlib. The script is found in the source tree of the build (a binary run from its build
 * tree) or under $(pkgdatadir), where `make install` puts it; --script overrides both. This file
 * only checks what it can name precisely (the directory, the script, the interpreter and
 * matplotlib) and then replaces itself with the script, whose exit status becomes ours.
 */
#include "config.h"
#include "hearsay/common.h"
#include "tools/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPORT_MAX_ARGS 64

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hearsay report DIR [--target-loss X] [--runs] [--python PATH] [--script "
            "PATH]\n\n"
            "Tables and PNG plots of one run directory (hearsay train/sim --out DIR) or of a\n"
            "study directory (run directories below it, e.g. experiments/out/ethernet).\n\n"
            "  run directory: DIR/report.md (summary, per-rank time split, bytes, push-sum\n"
            "      weights, staleness) and DIR/report-*.png: loss and accuracy versus time and\n"
            "      iterations, consensus distance, push-sum weights, staleness, time per rank\n"
            "  study directory: DIR/report.md and DIR/runs.csv (one row per run) and, per folder\n"
            "      of runs, report-loss_vs_time*.png and report-loss_vs_iterations*.png\n\n"
            "  --target-loss X  time to this test loss (default: each run's own --target-loss)\n"
            "  --runs           study directory: also the report of every run in it\n"
            "  --python PATH    the interpreter (default /usr/bin/python3, Debian's, which has\n"
            "                   matplotlib; else python3 on PATH)\n"
            "  --script PATH    report.py to run (default: the source tree's, else the installed\n"
            "                   one)\n");
}

/* report.py: the source tree this binary was built from, then the installed copy. */
static const char *report_script(void)
{
    static const char *candidates[] = {HS_SRCDIR "/experiments/report.py",
                                       HS_PKGDATADIR "/report.py"};
    for (size_t i = 0; i < HS_ARRAY_LEN(candidates); i++)
        if (access(candidates[i], R_OK) == 0) return candidates[i];
    return NULL;
}

/* The first executable python3 among /usr/bin/python3 and PATH's. */
static const char *find_python(char *buf, size_t cap)
{
    if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && (size_t)snprintf(buf, cap, "%.*s/python3", (int)n, path) < cap &&
            access(buf, X_OK) == 0)
            return buf;
        path += n + (path[n] == ':');
    }
    return NULL;
}

/* 0 when `python -c 'import matplotlib'` succeeds. */
static int has_matplotlib(const char *python)
{
    pid_t pid = fork();
    if (pid < 0) return HS_ERR(-errno, "fork failed: %s", strerror(errno));
    if (pid == 0) {
        execl(python, python, "-c", "import matplotlib", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return HS_ERR(-errno, "waitpid failed: %s", strerror(errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    return HS_ERR(-ENOENT,
                  "%s cannot import matplotlib (Debian: apt-get install python3-matplotlib; or "
                  "give --python PATH of an interpreter that has it)",
                  python);
}

int hs_cmd_report(int argc, char **argv)
{
    const char *dir = NULL, *python = NULL, *script = NULL;
    const char *pass[REPORT_MAX_ARGS];
    int npass = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (npass + 2 > REPORT_MAX_ARGS) {
            fprintf(stderr, "hearsay report: too many options (at most %d)\n", REPORT_MAX_ARGS);
            return 2;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--python") || !strcmp(a, "--script") || !strcmp(a, "--target-loss")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hearsay report: %s needs a value\n\n", a);
                usage(stderr);
                return 2;
            }
            if (!strcmp(a, "--python"))
                python = argv[++i];
            else if (!strcmp(a, "--script"))
                script = argv[++i];
            else {
                char *end = NULL;
                double x = strtod(argv[i + 1], &end);
                if (end == argv[i + 1] || *end || !(x > 0)) {
                    fprintf(stderr,
                            "hearsay report: --target-loss expects a positive number, got "
                            "'%s'\n",
                            argv[i + 1]);
                    return 2;
                }
                pass[npass++] = a;
                pass[npass++] = argv[++i];
            }
        } else if (!strcmp(a, "--runs")) {
            pass[npass++] = a;
        } else if (a[0] == '-') {
            fprintf(stderr, "hearsay report: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else if (dir) {
            fprintf(stderr, "hearsay report: one directory at a time ('%s', then '%s')\n", dir, a);
            return 2;
        } else {
            dir = a;
        }
    }
    if (!dir) {
        fprintf(stderr, "hearsay report: no directory given\n\n");
        usage(stderr);
        return 2;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "hearsay report: %s: %s\n", dir, strerror(errno));
        return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "hearsay report: %s is not a directory (give a run directory, hearsay train "
                "--out DIR, or a study directory holding run directories)\n",
                dir);
        return 2;
    }
    if (!script) {
        script = report_script();
        if (!script) {
            fprintf(stderr,
                    "hearsay report: report.py not found (looked for %s/experiments/report.py "
                    "and %s/report.py); give --script PATH\n",
                    HS_SRCDIR, HS_PKGDATADIR);
            return 1;
        }
    } else if (access(script, R_OK) != 0) {
        fprintf(stderr, "hearsay report: --script %s: %s\n", script, strerror(errno));
        return 2;
    }
    char pbuf[4096];
    if (!python) {
        python = find_python(pbuf, sizeof pbuf);
        if (!python) {
            fprintf(stderr, "hearsay report: no python3 found (looked for /usr/bin/python3 and "
                            "python3 on PATH); Debian: apt-get install python3-matplotlib\n");
            return 1;
        }
    } else if (access(python, X_OK) != 0) {
        fprintf(stderr, "hearsay report: --python %s: %s\n", python, strerror(errno));
        return 2;
    }
    if (has_matplotlib(python) < 0) {
        fprintf(stderr, "hearsay report: %s\n", hs_last_error());
        return 1;
    }
    const char *args[REPORT_MAX_ARGS + 8];
    int n = 0;
    args[n++] = python;
    args[n++] = script;
    args[n++] = "dir";
    args[n++] = dir;
    for (int i = 0; i < npass; i++) args[n++] = pass[i];
    args[n] = NULL;
    fflush(stdout);
    execv(python, (char *const *)args);
    fprintf(stderr, "hearsay report: cannot run %s: %s\n", python, strerror(errno));
    return 1;
}
