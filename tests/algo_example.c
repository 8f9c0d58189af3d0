/* tests/algo_example.c — an algorithm added in one file, against the public headers only
 * (docs/algorithms.md, "Adding an algorithm"): "example", a ring average. Every rank takes its
 * local step; every --example-period steps it sends its parameters to its ring successor and
 * moves toward its predecessor's: x = (1 - w) x + w x_pred, w = --example-weight.
 *
 * main() registers it (one line) and runs the `hearsay` command, so
 *     algo_example train --algo example --example-weight 0.5 ...      (under hearsay run)
 *     algo_example sim -n 4 --algo example ...                       (virtual time)
 * work like `hearsay train` / `hearsay sim` with one more algorithm: its options are in
 * --help, --config, config.ini and summary.json, checked by type and range, refused for the
 * other algorithms. tests/test_algo_example.sh runs it. */
#include "hearsay/algo.h"
#include "hearsay/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The `hearsay` command's entry (tools/hearsay.c), linked in from the command's convenience
 * library (tests/Makefile rules: tools/libhearsaycli.la). */
int hs_cli_main(int argc, char **argv);

struct hs_algo {
    hs_dist_t *d;
    double weight;        /* --example-weight */
    long period;          /* --example-period */
    float *mine, *theirs; /* (n) host copies: sent, received */
};

static void ex_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    free(a->mine);
    free(a->theirs);
    free(a);
    *ap = NULL;
}

static int ex_init(hs_algo_t **out, hs_dist_t *d)
{
    hs_algo_t *a = calloc(1, sizeof *a);
    if (!a) return HS_ERR(-ENOMEM, "example: state");
    a->d = d;
    a->weight = hs_dist_opt_double(d, "example-weight");
    a->period = hs_dist_opt_int(d, "example-period");
    a->mine = malloc(d->n * sizeof(float));
    a->theirs = malloc(d->n * sizeof(float));
    if (!a->mine || !a->theirs) {
        ex_finalize(&a);
        return HS_ERR(-ENOMEM, "example: buffers of %zu parameters", d->n);
    }
    *out = a;
    return 0;
}

/* Send x to the successor, receive the predecessor's, mix. */
static int ring_average(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    const size_t bytes = d->n * sizeof(float);
    const int succ = (d->rank + 1) % d->size, pred = (d->rank + d->size - 1) % d->size;
    double t0 = hs_exec_now(d->x);
    HS_TRY(d->k->ops->to_host(d->k, a->mine, d->params, bytes));
    hs_treq_t *req[2] = {NULL, NULL}; /* the receive, the send */
    HS_TRY(hs_transport_irecv(d->t, pred, hs_dist_tag(d, 0), a->theirs, bytes, &req[0]));
    int rc = hs_transport_isend(d->t, succ, hs_dist_tag(d, 0), a->mine, bytes, &req[1]);
    double w0 = hs_exec_now(d->x);
    /* the shared wait (hearsay/algo.h, "Waiting for peers"): both end, each wait bounded */
    if (rc == 0) rc = hs_dist_wait_reqs(d->x, req, 2, d->o->comm_timeout_s, 0, NULL, NULL);
    d->st.wait_s += hs_exec_now(d->x) - w0;
    if (rc < 0) {
        if (req[0]) hs_exec_wait1(d->x, &req[0], 0.5, 0, NULL); /* (bounded: a timeout keeps it) */
        hs_error_prefix("example, iteration %ld", t);
        return rc;
    }
    for (size_t i = 0; i < d->n; i++)
        a->mine[i] = (float)((1 - a->weight) * a->mine[i] + a->weight * a->theirs[i]);
    HS_TRY(d->k->ops->to_device(d->k, d->params, a->mine, bytes));
    d->st.bytes_sent += bytes;
    d->st.bytes_recv += bytes;
    hs_dist_staleness(d, 0); /* the predecessor's x of this very round */
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

static int ex_step(hs_algo_t *a, long t)
{
    HS_TRY(hs_dist_apply(a->d, 1.0));
    if (a->d->t && a->d->size > 1 && (t + 1) % a->period == 0) return ring_average(a, t);
    return 0;
}

static int ex_drain(hs_algo_t *a, int final)
{
    (void)a; /* synchronous: nothing is ever in flight after a step */
    (void) final;
    return 0;
}

static const hs_option_t example_options[] = {
    {.name = "example-weight",
     .type = HS_OPT_DOUBLE,
     .def = "0.5",
     .range = "(0, 1]",
     .metavar = "W",
     .help = "weight of the ring predecessor's parameters in each average"},
    {.name = "example-period",
     .type = HS_OPT_INT,
     .def = "1",
     .range = "[1, 1000000]",
     .metavar = "H",
     .help = "local steps between two averages"},
};

static const hs_algo_ops_t example_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "example",
    .help = "tests/algo_example.c: local steps, then an average with the ring predecessor",
    .flags = HS_ALGO_COMM,
    .options = example_options,
    .n_options = sizeof example_options / sizeof example_options[0],
    .init = ex_init,
    .step = ex_step,
    .drain = ex_drain,
    .finalize = ex_finalize,
};

int main(int argc, char **argv)
{
    if (hs_algo_register(&example_ops) < 0) { /* the one line that adds the algorithm */
        fprintf(stderr, "algo_example: %s\n", hs_last_error());
        return 2;
    }
    return hs_cli_main(argc, argv);
}
