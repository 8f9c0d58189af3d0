/*
 * topologies/edgelist.c — graphs on disk: the edge-list format read by file:PATH and
 * written by hs_topo_write_edges, and Graphviz output.
 *
 * Edge-list format, one item per line; '#' starts a comment, blank lines are ignored:
 *   n N            optional: the number of ranks (must match n when both are given)
 *   SRC DST        rank SRC sends to rank DST
 *   SRC DST W      ... with mixing weight W (then every edge must carry a weight)
 *   I I W          rank I keeps weight W (weighted files only; default 1 - sum of out-weights)
 * Ranks are 0 .. 65535 (the largest job); a line has at most 1023 characters and a file at most
 * TOPO_EDGE_FILE_MAX bytes (256 MiB; /dev/zero and other endless inputs stop there).
 */
#include "topologies/topo_internal.h"

#include "hearsay/common.h"
#include "hearsay/file.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct file_edge {
    int src, dst, line;
    double w;
} file_edge_t;

static int cmp_edge(const void *a, const void *b)
{
    const file_edge_t *x = a, *y = b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    return x->line - y->line;
}

/* Parse a rank number; returns 0 or -EINVAL. */
static int parse_rank(const char *tok, long *v)
{
    char *end;
    errno = 0;
    *v = strtol(tok, &end, 10);
    return (errno || end == tok || *end || *v < 0 || *v >= TOPO_MAX_N) ? -EINVAL : 0;
}

int topo_read_edge_file(const char *path, int n, topo_gen_t *g)
{
    FILE *f = NULL;
    HS_TRY(hs_file_fopen_read(&f, path, "edge list", TOPO_EDGE_FILE_MAX));
    file_edge_t *edges = NULL;
    long len = 0, cap = 0, bytes = 0;
    int rc = 0, lineno = 0, weighted = -1, header_n = 0, max_rank = -1, nself = 0;
    char line[1024];
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > TOPO_EDGE_FILE_MAX) {
        rc = HS_ERR(-EFBIG, "%s: %lld bytes, above the %ld-byte bound for edge lists", path,
                    (long long)st.st_size, TOPO_EDGE_FILE_MAX);
        goto out;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t l = strlen(line);
        bytes += (long)l;
        if (!strchr(line, '\n') && !feof(f)) { /* also a NUL byte: strlen stops there */
            rc = HS_ERR(-EINVAL, "%s:%d: line too long (or not text)", path, lineno);
            goto out;
        }
        if (bytes > TOPO_EDGE_FILE_MAX) {
            rc = HS_ERR(-EFBIG, "%s: more than the %ld-byte bound for edge lists", path,
                        TOPO_EDGE_FILE_MAX);
            goto out;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *tok[4], *save = NULL;
        int nt = 0;
        for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (nt == 4) break;
            tok[nt++] = t;
        }
        if (nt == 0) continue;
        if (!strcmp(tok[0], "n")) {
            long v;
            if (nt != 2 || hs_parse_long(tok[1], 2, TOPO_MAX_N, "n", &v) < 0) {
                rc = HS_ERR(-EINVAL, "%s:%d: expected 'n N' with N in [2, %d]", path, lineno,
                            TOPO_MAX_N);
                goto out;
            }
            header_n = (int)v;
            continue;
        }
        long s, d;
        double w = NAN;
        if (nt < 2 || nt > 3 || parse_rank(tok[0], &s) < 0 || parse_rank(tok[1], &d) < 0) {
            rc = HS_ERR(-EINVAL, "%s:%d: expected 'SRC DST [WEIGHT]' with ranks in [0, %d]", path,
                        lineno, TOPO_MAX_N - 1);
            goto out;
        }
        if (nt == 3) {
            char *end;
            w = strtod(tok[2], &end);
            if (*end || !isfinite(w) || w < 0 || w > 1) {
                rc = HS_ERR(-EINVAL, "%s:%d: weight '%s' is not a number in [0, 1]", path, lineno,
                            tok[2]);
                goto out;
            }
        }
        if (s == d && nt == 2) {
            rc =
                HS_ERR(-EINVAL, "%s:%d: self loop %ld -> %ld without a weight", path, lineno, s, d);
            goto out;
        }
        if (s != d) {
            if (weighted < 0) weighted = nt == 3;
            if (weighted != (nt == 3)) {
                rc = HS_ERR(-EINVAL, "%s:%d: either every edge has a weight or none has", path,
                            lineno);
                goto out;
            }
        } else {
            nself++;
        }
        if (len == cap) {
            cap = cap ? 2 * cap : 256;
            file_edge_t *ne = realloc(edges, sizeof *ne * (size_t)cap);
            if (!ne) {
                rc = HS_ERR(-ENOMEM, "out of memory reading '%s'", path);
                goto out;
            }
            edges = ne;
        }
        edges[len++] = (file_edge_t){(int)s, (int)d, lineno, w};
        max_rank = (int)HS_MAX(max_rank, HS_MAX(s, d));
    }
    if (ferror(f)) {
        rc = HS_ERR(-EIO, "error reading '%s'", path);
        goto out;
    }
    if (len - nself == 0) {
        rc = HS_ERR(-EINVAL, "%s: no edges", path);
        goto out;
    }
    if (nself && weighted == 0) {
        rc = HS_ERR(-EINVAL, "%s: self weights given but the edges have no weights", path);
        goto out;
    }
    if (header_n && n && header_n != n) {
        rc = HS_ERR(-EINVAL, "%s: the file says n = %d, but n = %d was asked for", path, header_n,
                    n);
        goto out;
    }
    if (!n) n = header_n ? header_n : max_rank + 1;
    if (max_rank >= n) {
        for (long k = 0; k < len; k++)
            if (HS_MAX(edges[k].src, edges[k].dst) >= n) {
                rc = HS_ERR(-EINVAL, "%s:%d: rank %d is out of range for n = %d", path,
                            edges[k].line, HS_MAX(edges[k].src, edges[k].dst), n);
                goto out;
            }
    }
    if (n < 2) {
        rc = HS_ERR(-EINVAL, "%s: a graph needs at least 2 ranks (n = %d)", path, n);
        goto out;
    }
    qsort(edges, (size_t)len, sizeof *edges, cmp_edge);
    for (long k = 1; k < len; k++)
        if (edges[k].src == edges[k - 1].src && edges[k].dst == edges[k - 1].dst) {
            rc = HS_ERR(-EINVAL, "%s:%d: duplicate edge %d -> %d (first on line %d)", path,
                        edges[k].line, edges[k].src, edges[k].dst, edges[k - 1].line);
            goto out;
        }
    topo_edges_t *e = calloc(1, sizeof *e);
    if (!e) {
        rc = HS_ERR(-ENOMEM, "out of memory reading '%s'", path);
        goto out;
    }
    g->steps = e;
    g->nsteps = 1;
    g->expect_deg = -1;
    g->undirected = 0;
    g->has_weights = weighted == 1;
    g->file_n = n;
    if (g->has_weights) {
        g->self_w = hs_malloc(sizeof(double) * (size_t)n, "self weights");
        if (!g->self_w) {
            rc = -ENOMEM;
            goto out;
        }
        for (int i = 0; i < n; i++) g->self_w[i] = NAN;
    }
    for (long k = 0; k < len && rc == 0; k++) {
        if (edges[k].src == edges[k].dst)
            g->self_w[edges[k].src] = edges[k].w;
        else
            rc = topo_edges_add(e, edges[k].src, edges[k].dst, edges[k].w);
    }
out:
    if (rc < 0) hs_error_prefix("graph 'file:%s'", path);
    free(edges);
    fclose(f);
    return rc;
}

int hs_topo_write_edges(const hs_topo_t *topo, long t, int with_weights, FILE *f)
{
    if (t < 0) return HS_ERR(-EINVAL, "topology '%s': iteration %ld < 0", topo->spec, t);
    topo_step_t scratch = {0};
    const topo_step_t *st = topo_get_step(topo, t, &scratch);
    if (!st) return -ENOMEM;
    fprintf(f, "# hearsay topology '%s', iteration %ld: SRC DST%s\n", topo->spec, t,
            with_weights ? " WEIGHT (I I W: weight kept)" : "");
    fprintf(f, "n %d\n", topo->n);
    for (int i = 0; i < topo->n; i++) {
        if (with_weights) fprintf(f, "%d %d %.17g\n", i, i, st->self_w[i]);
        for (int k = st->out_ptr[i]; k < st->out_ptr[i + 1]; k++) {
            if (with_weights)
                fprintf(f, "%d %d %.17g\n", i, st->out_idx[k], st->out_w[k]);
            else
                fprintf(f, "%d %d\n", i, st->out_idx[k]);
        }
    }
    topo_step_free(&scratch);
    if (ferror(f)) return HS_ERR(-EIO, "error writing the edge list of '%s'", topo->spec);
    return 0;
}

int hs_topo_write_dot(const hs_topo_t *topo, FILE *f)
{
    static const char *colors[] = {"black",  "red",    "blue",  "darkgreen",
                                   "orange", "purple", "brown", "cyan4"};
    int steps = topo->period ? topo->period : 1;
    int undirected = topo->undirected && steps == 1;
    fprintf(f, "%s \"%s\" {\n  layout=circo;\n  node [shape=circle];\n",
            undirected ? "graph" : "digraph", topo->spec);
    if (topo->period == 0) fprintf(f, "  // random schedule: iteration 0 only\n");
    for (int s = 0; s < steps; s++) {
        topo_step_t scratch = {0};
        const topo_step_t *st = topo_get_step(topo, s, &scratch);
        if (!st) return -ENOMEM;
        for (int i = 0; i < topo->n; i++)
            for (int k = st->out_ptr[i]; k < st->out_ptr[i + 1]; k++) {
                int j = st->out_idx[k];
                if (undirected && j < i) continue;
                fprintf(f, "  %d %s %d", i, undirected ? "--" : "->", j);
                if (steps > 1)
                    fprintf(f, " [label=\"t%d\", color=%s]", s, colors[s % HS_ARRAY_LEN(colors)]);
                fprintf(f, ";\n");
            }
        topo_step_free(&scratch);
    }
    fprintf(f, "}\n");
    if (ferror(f)) return HS_ERR(-EIO, "error writing the Graphviz file of '%s'", topo->spec);
    return 0;
}
