/*
 * tools/cmd_topo.c — `hearsay topo`: build, analyse and compare peer graphs.
 *
 *   hearsay topo --graph exp --n 32                  summary and per-rank peer table
 *   hearsay topo --compare ring,exp,exp1peer,torus,complete --n 64
 *   hearsay topo --graph torus:8x8 --n 64 --dot torus.dot --json
 */
#include "tools/commands.h"

#include "hearsay/common.h"
#include "hearsay/file.h"
#include "hearsay/topology.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct topo_cli {
    const char *graph, *compare, *dot, *edges;
    long n, seed, model_params, sim_iters, iters, ranks_per_host;
    double target;
    hs_topo_mixing_t mixing;
    int json, no_table;
} topo_cli_t;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: hearsay topo (--graph SPEC | --compare SPEC,SPEC,...) --n N [options]\n\n"
        "Build, check and analyse peer graphs: degrees, diameter, spectral gap of the\n"
        "mixing matrix, predicted and simulated push-sum iterations to consensus.\n\n"
        "  --graph SPEC          one graph: summary and per-rank peers and weights\n"
        "  --compare LIST        comma-separated specs: one row per graph\n"
        "  --n N                 number of ranks (optional for file:PATH)\n"
        "  --seed S              seed of random graphs and schedules (default 1)\n"
        "  --ranks-per-host R    hosts of R ranks for 'hier' (default: hier's argument)\n"
        "  --mixing M            auto | uniform | metropolis | file (default auto)\n"
        "  --model-params P      floats per message, for bytes per iteration (default 1000000)\n"
        "  --target E            relative consensus error to reach (default 1e-6)\n"
        "  --sim-iters M         cap on simulated push-sum iterations (default 20000)\n"
        "  --iters K             random schedule: iterations shown in the table (default 2)\n"
        "  --no-table            --graph: the summary only\n"
        "  --dot FILE            --graph: write Graphviz\n"
        "  --edges FILE          --graph: write the edge list (with weights) of iteration 0\n"
        "  --json                machine-readable output\n\n"
        "graph specs (the same wherever a graph is named):\n%s",
        hs_topo_spec_help());
}

/* "--flag value" or "--flag=value": returns the value or NULL when `a` is not this flag. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag, int *missing)
{
    size_t len = strlen(flag);
    if (strncmp(argv[*i], flag, len)) return NULL;
    if (argv[*i][len] == '=') return argv[*i] + len + 1;
    if (argv[*i][len] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int parse_args(int argc, char **argv, topo_cli_t *c)
{
    memset(c, 0, sizeof *c);
    c->seed = 1;
    c->model_params = 1000000;
    c->sim_iters = 20000;
    c->iters = 2;
    c->target = 1e-6;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int missing = 0;
        const char *a = argv[i];
        if (!strcmp(a, "--json"))
            c->json = 1;
        else if (!strcmp(a, "--no-table"))
            c->no_table = 1;
        else if ((v = flag_value(argc, argv, &i, "--graph", &missing)))
            c->graph = v;
        else if ((v = flag_value(argc, argv, &i, "--compare", &missing)))
            c->compare = v;
        else if ((v = flag_value(argc, argv, &i, "--dot", &missing)))
            c->dot = v;
        else if ((v = flag_value(argc, argv, &i, "--edges", &missing)))
            c->edges = v;
        else if ((v = flag_value(argc, argv, &i, "--n", &missing)))
            HS_TRY(hs_parse_long(v, 2, 65536, "--n", &c->n));
        else if ((v = flag_value(argc, argv, &i, "--seed", &missing)))
            HS_TRY(hs_parse_long(v, 0, __LONG_MAX__, "--seed", &c->seed));
        else if ((v = flag_value(argc, argv, &i, "--ranks-per-host", &missing)))
            HS_TRY(hs_parse_long(v, 1, 65536, "--ranks-per-host", &c->ranks_per_host));
        else if ((v = flag_value(argc, argv, &i, "--model-params", &missing)))
            HS_TRY(hs_parse_long(v, 0, __LONG_MAX__ / 8, "--model-params", &c->model_params));
        else if ((v = flag_value(argc, argv, &i, "--sim-iters", &missing)))
            HS_TRY(hs_parse_long(v, 0, 100000000, "--sim-iters", &c->sim_iters));
        else if ((v = flag_value(argc, argv, &i, "--iters", &missing)))
            HS_TRY(hs_parse_long(v, 1, 1000, "--iters", &c->iters));
        else if ((v = flag_value(argc, argv, &i, "--target", &missing)))
            HS_TRY(hs_parse_double(v, 1e-15, 0.5, "--target", &c->target));
        else if ((v = flag_value(argc, argv, &i, "--mixing", &missing))) {
            if (!strcmp(v, "auto"))
                c->mixing = HS_TOPO_MIX_AUTO;
            else if (!strcmp(v, "uniform"))
                c->mixing = HS_TOPO_MIX_UNIFORM;
            else if (!strcmp(v, "metropolis") || !strcmp(v, "mh"))
                c->mixing = HS_TOPO_MIX_METROPOLIS;
            else if (!strcmp(v, "file"))
                c->mixing = HS_TOPO_MIX_FILE;
            else
                return HS_ERR(-EINVAL,
                              "--mixing: '%s' is not one of auto, uniform, metropolis, file", v);
        } else if (missing) {
            return HS_ERR(-EINVAL, "%s needs a value", a);
        } else {
            return HS_ERR(-EINVAL, "unknown option '%s'", a);
        }
        if (missing) return HS_ERR(-EINVAL, "%s needs a value", a);
    }
    if (!c->graph == !c->compare)
        return HS_ERR(-EINVAL, "give exactly one of --graph or --compare");
    if (c->compare && (c->dot || c->edges))
        return HS_ERR(-EINVAL, "--dot and --edges take one graph (--graph)");
    if (!c->n && !(c->graph && !strncmp(c->graph, "file:", 5)))
        return HS_ERR(-EINVAL, "--n is required (the number of ranks)");
    return 0;
}

static int make_topo(const topo_cli_t *c, const char *spec, hs_topo_t **t)
{
    hs_topo_opts_t o = {.ranks_per_host = (int)c->ranks_per_host, .mixing = c->mixing};
    return hs_topo_create(t, spec, (int)c->n, (uint64_t)c->seed, &o);
}

static void analysis_opts(const topo_cli_t *c, hs_topo_analysis_opts_t *o)
{
    hs_topo_analysis_defaults(o);
    o->target = c->target;
    o->model_params = c->model_params;
    o->sim_max_iters = c->sim_iters;
    o->sim_seed = (uint64_t)c->seed;
}

static const char *mixing_name(hs_topo_mixing_t m)
{
    return m == HS_TOPO_MIX_METROPOLIS ? "metropolis" : m == HS_TOPO_MIX_FILE ? "file" : "uniform";
}

/* JSON number: null for NaN and infinities. */
static void jnum(FILE *f, const char *key, double v, int last)
{
    if (isfinite(v))
        fprintf(f, "\"%s\": %.10g%s", key, v, last ? "" : ", ");
    else
        fprintf(f, "\"%s\": null%s", key, last ? "" : ", ");
}

static void json_report(FILE *f, const hs_topo_t *t, const hs_topo_report_t *r)
{
    fprintf(f, "{\"spec\": \"%s\", \"n\": %d, \"period\": %d, \"window\": %d, \"mixing\": \"%s\", ",
            hs_topo_spec(t), r->n, r->period, r->window, mixing_name(hs_topo_mixing(t)));
    fprintf(f, "\"undirected\": %s, \"doubly_stochastic\": %s, \"diameter\": %d, ",
            r->undirected ? "true" : "false", r->doubly_stochastic ? "true" : "false", r->diameter);
    jnum(f, "out_deg_min", r->out_deg_min, 0);
    jnum(f, "out_deg_mean", r->out_deg_mean, 0);
    jnum(f, "out_deg_max", r->out_deg_max, 0);
    jnum(f, "in_deg_min", r->in_deg_min, 0);
    jnum(f, "in_deg_max", r->in_deg_max, 0);
    jnum(f, "lambda2", r->lambda2, 0);
    jnum(f, "gap_per_iter", r->gap_step, 0);
    jnum(f, "predicted_iters", r->predicted_iters, 0);
    jnum(f, "measured_rate", r->measured_rate, 0);
    jnum(f, "measured_iters", r->measured_iters, 0);
    fprintf(f, "\"measured_extrapolated\": %s, ", r->measured_extrapolated ? "true" : "false");
    jnum(f, "msgs_per_iter", r->msgs_per_iter, 0);
    jnum(f, "bytes_per_iter", r->bytes_per_iter, 1);
    fprintf(f, "}");
}

static void fmt_iters(char *buf, size_t cap, double v, int approx)
{
    if (!isfinite(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%s%.0f", approx ? "~" : "", v);
}

static void print_summary(const hs_topo_t *t, const hs_topo_report_t *r, const topo_cli_t *c)
{
    char pred[32], meas[32];
    fmt_iters(pred, sizeof pred, r->predicted_iters, 0);
    fmt_iters(meas, sizeof meas, r->measured_iters, r->measured_extrapolated);
    printf("graph %s: n = %d, %s, %s, mixing %s (%s)\n", hs_topo_spec(t), r->n,
           r->period == 0   ? "random schedule"
           : r->period == 1 ? "static"
                            : "time-varying",
           r->undirected ? "undirected" : "directed", mixing_name(hs_topo_mixing(t)),
           r->doubly_stochastic ? "doubly stochastic" : "column-stochastic");
    if (r->period > 1) printf("  period          %d iterations\n", r->period);
    if (r->period == 0) printf("  analysed over   %d drawn iterations\n", r->window);
    printf("  out-degree      mean %.3g, min %.0f, max %.0f\n", r->out_deg_mean, r->out_deg_min,
           r->out_deg_max);
    printf("  in-degree       mean %.3g, min %.0f, max %.0f\n", r->in_deg_mean, r->in_deg_min,
           r->in_deg_max);
    printf("  diameter        %d hops%s\n", r->diameter,
           r->period > 1    ? " (union over the period)"
           : r->period == 0 ? " (union over the window)"
                            : "");
    printf("  |lambda2|       %.6g%s\n", r->lambda2,
           r->period > 1    ? " (product over the period)"
           : r->period == 0 ? " (product over the window)"
                            : "");
    printf("  spectral gap    %.6g per iteration\n", r->gap_step);
    printf("  to consensus    %s iterations predicted, %s measured (error %g, push-sum on random "
           "vectors; fitted contraction %.6g per iteration)\n",
           pred, meas, c->target, r->measured_rate);
    printf("  traffic         %.3g messages, %.4g MB per rank per iteration (%ld floats + 8 B "
           "weight per message)\n",
           r->msgs_per_iter, r->bytes_per_iter / 1e6, c->model_params);
}

static void print_list(const int *a, int n)
{
    int used = 0;
    for (int k = 0; k < n; k++) used += printf("%s%d", k ? "," : "", a[k]);
    if (n == 0) used = printf("-");
    printf("%*s", used < 28 ? 28 - used : 1, "");
}

static int print_table(const hs_topo_t *t, const topo_cli_t *c, FILE *jf)
{
    int n = hs_topo_n(t), T = hs_topo_period(t), rc = 0;
    int steps = T ? T : (int)c->iters;
    int cap = HS_MAX(hs_topo_max_out_degree(t), hs_topo_max_in_degree(t)) + 1;
    int *out = malloc(sizeof(int) * (size_t)cap), *in = malloc(sizeof(int) * (size_t)cap);
    double *w = malloc(sizeof(double) * (size_t)cap), *win = malloc(sizeof(double) * (size_t)cap);
    if (!out || !in || !w || !win) {
        rc = HS_ERR(-ENOMEM, "out of memory");
        goto out;
    }
    if (!jf)
        printf("\n%4s %5s  %-28s%-14s%-8s %s\n", "iter", "rank", "out-peers", "share each", "kept",
               "in-peers");
    else
        fprintf(jf, ", \"steps\": [");
    for (int s = 0; s < steps; s++) {
        if (jf) fprintf(jf, "%s[", s ? ", " : "");
        for (int i = 0; i < n; i++) {
            int no, ni;
            double self;
            if ((rc = hs_topo_out_peers(t, s, i, out, w, cap, &no, &self)) < 0) goto out;
            if ((rc = hs_topo_in_peers(t, s, i, in, win, cap, &ni)) < 0) goto out;
            if (jf) {
                fprintf(jf, "%s{\"rank\": %d, \"out\": [", i ? ", " : "", i);
                for (int k = 0; k < no; k++) fprintf(jf, "%s%d", k ? ", " : "", out[k]);
                fprintf(jf, "], \"weights\": [");
                for (int k = 0; k < no; k++) fprintf(jf, "%s%.17g", k ? ", " : "", w[k]);
                fprintf(jf, "], \"self\": %.17g, \"in\": [", self);
                for (int k = 0; k < ni; k++) fprintf(jf, "%s%d", k ? ", " : "", in[k]);
                fprintf(jf, "]}");
                continue;
            }
            int same = 1;
            for (int k = 1; k < no; k++) same &= fabs(w[k] - w[0]) < 1e-15;
            printf("%4d %5d  ", s, i);
            print_list(out, no);
            if (no == 0)
                printf("%-14s", "-");
            else if (same)
                printf("%-14.6g", w[0]);
            else
                printf("%-14s", "varies");
            printf("%-8.4g ", self);
            for (int k = 0; k < ni; k++) printf("%s%d", k ? "," : "", in[k]);
            printf("\n");
        }
        if (jf) fprintf(jf, "]");
    }
    if (jf) fprintf(jf, "]");
out:
    free(out);
    free(in);
    free(w);
    free(win);
    return rc;
}

static int write_file(const char *path, const hs_topo_t *t, int dot)
{
    hs_wfile_t w;
    HS_TRY(hs_wfile_open(&w, path, 0));
    int rc = dot ? hs_topo_write_dot(t, w.f) : hs_topo_write_edges(t, 0, 1, w.f);
    if (rc < 0) {
        hs_wfile_abort(&w);
        return rc;
    }
    return hs_wfile_commit(&w);
}

static int run_graph(const topo_cli_t *c)
{
    hs_topo_t *t = NULL;
    hs_topo_report_t r;
    hs_topo_analysis_opts_t o;
    analysis_opts(c, &o);
    int rc = make_topo(c, c->graph, &t);
    if (rc == 0) rc = hs_topo_analyze(t, &o, &r);
    if (rc == 0 && c->dot) rc = write_file(c->dot, t, 1);
    if (rc == 0 && c->edges) rc = write_file(c->edges, t, 0);
    if (rc == 0 && c->json) {
        printf("{\"report\": ");
        json_report(stdout, t, &r);
        if (!c->no_table) rc = print_table(t, c, stdout);
        printf("}\n");
    } else if (rc == 0) {
        print_summary(t, &r, c);
        if (!c->no_table) rc = print_table(t, c, NULL);
    }
    hs_topo_destroy(&t);
    return rc;
}

static int run_compare(const topo_cli_t *c)
{
    char *list = strdup(c->compare);
    if (!list) return HS_ERR(-ENOMEM, "out of memory");
    hs_topo_analysis_opts_t o;
    analysis_opts(c, &o);
    int rc = 0, first = 1;
    if (c->json)
        printf("{\"n\": %ld, \"model_params\": %ld, \"target\": %g, \"graphs\": [", c->n,
               c->model_params, c->target);
    else
        printf("%-18s %7s %5s %10s %9s %8s %10s %9s %9s\n", "graph", "out-deg", "diam", "gap/iter",
               "msgs/iter", "MB/iter", "pred.iter", "meas.iter", "rate");
    for (char *save = NULL, *spec = strtok_r(list, ",", &save); spec && rc == 0;
         spec = strtok_r(NULL, ",", &save)) {
        hs_topo_t *t = NULL;
        hs_topo_report_t r;
        rc = make_topo(c, spec, &t);
        if (rc == 0) rc = hs_topo_analyze(t, &o, &r);
        if (rc == 0 && c->json) {
            printf("%s", first ? "" : ", ");
            json_report(stdout, t, &r);
        } else if (rc == 0) {
            char pred[32], meas[32];
            fmt_iters(pred, sizeof pred, r.predicted_iters, 0);
            fmt_iters(meas, sizeof meas, r.measured_iters, r.measured_extrapolated);
            char diam[16];
            if (r.diameter >= 0)
                snprintf(diam, sizeof diam, "%d", r.diameter);
            else
                snprintf(diam, sizeof diam, "-");
            printf("%-18s %7.3g %5s %10.4g %9.3g %8.4g %10s %9s %9.4g\n", spec, r.out_deg_mean,
                   diam, r.gap_step, r.msgs_per_iter, r.bytes_per_iter / 1e6, pred, meas,
                   r.measured_rate);
        }
        first = 0;
        hs_topo_destroy(&t);
    }
    if (c->json && rc == 0) printf("]}\n");
    free(list);
    return rc;
}

int hs_cmd_topo(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    topo_cli_t c;
    if (parse_args(argc, argv, &c) < 0) {
        fprintf(stderr, "hearsay topo: %s\n\n", hs_last_error());
        usage(stderr);
        return 2;
    }
    int rc = c.graph ? run_graph(&c) : run_compare(&c);
    if (rc < 0) {
        fflush(stdout);
        fprintf(stderr, "hearsay topo: %s\n", hs_last_error());
        return rc == -EINVAL ? 2 : 1;
    }
    return 0;
}
