/* optim/algo.c — the algorithm registry, the "local" algorithm, and shared helpers. */
#include "hearsay/algo.h"
#include "hearsay/common.h"

#include <stdlib.h>
#include <string.h>

/* "local": every rank trains alone (a baseline without communication). */
struct hs_algo {
    hs_dist_t *d;
};

static int local_init(hs_algo_t **out, hs_dist_t *d)
{
    hs_algo_t *a = hs_calloc(1, sizeof *a, "local algorithm");
    if (!a) return -ENOMEM;
    a->d = d;
    *out = a;
    return 0;
}

static int local_step(hs_algo_t *a, long t)
{
    (void)t;
    return hs_worker_apply(a->d->worker);
}

static int local_drain(hs_algo_t *a, int final)
{
    (void)a;
    (void) final;
    return 0;
}

static void local_finalize(hs_algo_t **a)
{
    if (!a || !*a) return;
    free(*a);
    *a = NULL;
}

static double local_weight(const hs_algo_t *a)
{
    (void)a;
    return 1.0;
}

const hs_algo_ops_t hs_algo_local_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "local",
    .flags = 0,
    .init = local_init,
    .step = local_step,
    .drain = local_drain,
    .finalize = local_finalize,
    .weight = local_weight,
};

static const hs_algo_ops_t *const all_algos[] = {
    &hs_algo_local_ops,     &hs_algo_sgp_ops,   &hs_algo_osgp_ops,   &hs_algo_dpsgd_ops,
    &hs_algo_allreduce_ops, &hs_algo_easgd_ops, &hs_algo_eamsgd_ops, &hs_algo_lsgd_ops,
};

const hs_algo_ops_t *hs_algo_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < HS_ARRAY_LEN(all_algos); i++)
        if (!strcmp(all_algos[i]->name, name)) return all_algos[i];
    return NULL;
}

const char *hs_algo_names(void)
{
    return "local|sgp|osgp|dpsgd|allreduce|easgd|eamsgd|lsgd";
}

void hs_dist_peer_failed(hs_dist_t *d, int peer, long iter, const char *why)
{
    if (peer < 0 || peer >= d->size || peer == d->rank) return;
    if (iter < 0) iter = 0;
    if (d->failed_at[peer] < 0)
        HS_WARN("rank %d: peer rank %d failed at/after iteration %ld (%s); continuing without it",
                d->rank, peer, iter, why ? why : "no reason given");
    if (iter > d->failed_at[peer]) d->failed_at[peer] = iter;
}

int hs_dist_peer_dead(const hs_dist_t *d, int peer)
{
    return peer >= 0 && peer < d->size && d->failed_at[peer] >= 0;
}

int hs_dist_probe_alive(hs_dist_t *d, int peer)
{
    char dummy[8];
    hs_treq_t *req = NULL;
    if (hs_transport_irecv(d->t, peer, HS_TAG_PING, dummy, sizeof dummy, &req) < 0) return 1;
    int rc = hs_transport_wait(d->t, &req, 0.3, NULL);
    if (req) hs_transport_req_free(d->t, &req);
    return rc != -ECONNRESET;
}
