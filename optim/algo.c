/* optim/algo.c — the algorithm registry and "local", the smallest algorithm: every rank trains
 * alone (the single-worker run, and a baseline without communication). A new algorithm is one
 * file like this one plus a line in all_algos[] (docs/algorithms.md, "Adding an algorithm"). */
#include "hearsay/algo.h"
#include "hearsay/allreduce.h"
#include "hearsay/common.h"

#include <stdlib.h>
#include <string.h>

/* The algorithms' tag range is clear of the loop's tags and of the all-reduce module's range,
 * and inside the user tags (24 bits: the fabric and hsshm wire headers carry no more). */
_Static_assert(HS_TAG_ALGO_BASE > HS_TAG_HEARTBEAT && HS_TAG_ALGO_BASE > HS_TAG_WIREUP &&
                   HS_TAG_ALGO_BASE > HS_TAG_EVAL && HS_TAG_ALGO_BASE > HS_TAG_FINAL &&
                   HS_TAG_ALGO_BASE > HS_TAG_PING && HS_TAG_ALGO_BASE > HS_TAG_ACK,
               "algorithm tags overlap the loop's");
_Static_assert((uint64_t)HS_TAG_ALGO_BASE + HS_DIST_TAGS <= HS_ALLREDUCE_TAG_BASE &&
                   HS_ALLREDUCE_TAG_BASE + (uint64_t)HS_ALLREDUCE_TAG_SPAN - 1 <= HS_TAG_MAX,
               "algorithm tags overlap the all-reduce range or pass HS_TAG_MAX");

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
    return hs_dist_apply(a->d, 1.0);
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

const hs_algo_ops_t hs_algo_local_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "local",
    .help = "one worker, or independent ones (no communication)",
    .flags = HS_ALGO_BUDGET,
    .init = local_init,
    .step = local_step,
    .drain = local_drain,
    .finalize = local_finalize,
};

static const hs_algo_ops_t *const all_algos[] = {
    &hs_algo_local_ops,     &hs_algo_sgp_ops,    &hs_algo_osgp_ops,   &hs_algo_dpsgd_ops,
    &hs_algo_allreduce_ops, &hs_algo_easgd_ops,  &hs_algo_eamsgd_ops, &hs_algo_lsgd_ops,
    &hs_algo_localsgd_ops,  &hs_algo_adpsgd_ops, &hs_algo_choco_ops,  &hs_algo_qsgp_ops,
};

const hs_algo_ops_t *hs_algo_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < HS_ARRAY_LEN(all_algos); i++)
        if (!strcmp(all_algos[i]->name, name)) return all_algos[i];
    return NULL;
}

const hs_algo_ops_t *hs_algo_at(int i)
{
    return i >= 0 && (size_t)i < HS_ARRAY_LEN(all_algos) ? all_algos[i] : NULL;
}

const char *hs_algo_names(void)
{
    static char names[256];
    if (!names[0]) {
        size_t len = 0;
        for (size_t i = 0; i < HS_ARRAY_LEN(all_algos); i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? "|" : "",
                                    all_algos[i]->name);
    }
    return names;
}
