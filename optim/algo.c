/* optim/algo.c — the algorithm registry and "local", the smallest algorithm: every rank trains
 * alone (the single-worker run, and a baseline without communication). A new algorithm is one
 * file like this one (its options in its ops table) plus a line in all_algos[], or a call to
 * hs_algo_register from a program of its own (docs/algorithms.md, "Adding an algorithm";
 * tests/algo_example.c). */
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

/* Algorithms added by hs_algo_register, after the built-ins. */
#define HS_ALGO_EXTRA_MAX 32
static const hs_algo_ops_t *extra_algos[HS_ALGO_EXTRA_MAX];
static int n_extra;
static char names[1024]; /* hs_algo_names(), rebuilt after a registration */

const hs_algo_ops_t *hs_algo_at(int i)
{
    if (i < 0) return NULL;
    if ((size_t)i < HS_ARRAY_LEN(all_algos)) return all_algos[i];
    i -= (int)HS_ARRAY_LEN(all_algos);
    return i < n_extra ? extra_algos[i] : NULL;
}

const hs_algo_ops_t *hs_algo_find(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; hs_algo_at(i); i++)
        if (!strcmp(hs_algo_at(i)->name, name)) return hs_algo_at(i);
    return NULL;
}

const char *hs_algo_names(void)
{
    if (!names[0]) {
        size_t len = 0;
        for (int i = 0; hs_algo_at(i) && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? "|" : "",
                                    hs_algo_at(i)->name);
    }
    return names;
}

/* '-' and '_' are the same character in option names (hearsay/options.h). */
static int same_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (*a != *b && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_'))) return 0;
    return *a == *b;
}

static int same_text(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* The option `name` in ops's table, or NULL. */
static const hs_option_t *find_option(const hs_algo_ops_t *ops, const char *name)
{
    for (size_t i = 0; i < ops->n_options; i++)
        if (same_name(ops->options[i].name, name)) return &ops->options[i];
    return NULL;
}

int hs_algo_cfg_create(hs_cfg_t **out, hs_cfg_spec_t *spec, const hs_algo_ops_t *ops,
                       const char *const *kv, size_t n)
{
    *out = NULL;
    *spec = (hs_cfg_spec_t){.usage = ops->name,
                            .options = ops->options,
                            .n_options = ops->options ? ops->n_options : 0};
    hs_cfg_t *cfg = NULL;
    int rc = hs_cfg_create(&cfg, spec);
    if (rc < 0) {
        hs_error_prefix("--algo %s: its option table", ops->name);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        const char *eq = kv[i] ? strchr(kv[i], '=') : NULL;
        char name[128];
        if (!eq || eq == kv[i] || (size_t)(eq - kv[i]) >= sizeof name) {
            hs_cfg_free(&cfg);
            return HS_ERR(-EINVAL, "--algo %s: option '%s': give name=value", ops->name,
                          kv[i] ? kv[i] : "(null)");
        }
        memcpy(name, kv[i], (size_t)(eq - kv[i]));
        name[eq - kv[i]] = '\0';
        if (!find_option(ops, name)) {
            hs_cfg_free(&cfg);
            return HS_ERR(-EINVAL, "--%s: --algo %s has no such option", name, ops->name);
        }
        if ((rc = hs_cfg_set(cfg, name, eq + 1)) < 0) {
            hs_cfg_free(&cfg);
            hs_error_prefix("--algo %s", ops->name);
            return rc;
        }
    }
    *out = cfg;
    return 0;
}

/* A name that another registered algorithm also declares must mean the same kind of value. */
static int check_shared(const hs_algo_ops_t *ops, const hs_option_t *o)
{
    for (int i = 0; hs_algo_at(i); i++) {
        const hs_option_t *p = find_option(hs_algo_at(i), o->name);
        if (!p) continue;
        if (p->type != o->type || !same_text(p->range, o->range) ||
            !same_text(p->choices, o->choices))
            return HS_ERR(-EINVAL,
                          "hs_algo_register: --algo %s: option --%s differs from --algo %s's in "
                          "type, range or choices (an option name means one kind of value)",
                          ops->name, o->name, hs_algo_at(i)->name);
    }
    return 0;
}

int hs_algo_register(const hs_algo_ops_t *ops)
{
    if (!ops) return HS_ERR(-EINVAL, "hs_algo_register: no ops table");
    if (ops->size != sizeof(hs_algo_ops_t))
        return HS_ERR(-EINVAL,
                      "hs_algo_register: ops table of %zu bytes, this library's is %zu "
                      "(built against other headers)",
                      ops->size, sizeof(hs_algo_ops_t));
    if (!ops->name || !*ops->name || strchr(ops->name, '|'))
        return HS_ERR(-EINVAL, "hs_algo_register: the algorithm needs a name (no '|')");
    if (hs_algo_find(ops->name))
        return HS_ERR(-EINVAL, "hs_algo_register: --algo %s is registered already", ops->name);
    if (!ops->init || !ops->step || !ops->drain || !ops->finalize)
        return HS_ERR(-EINVAL,
                      "hs_algo_register: --algo %s: init, step, drain and finalize are "
                      "required",
                      ops->name);
    if (ops->n_options && !ops->options)
        return HS_ERR(-EINVAL, "hs_algo_register: --algo %s: n_options without options", ops->name);
    hs_cfg_spec_t spec;
    hs_cfg_t *cfg = NULL;
    HS_TRY(hs_algo_cfg_create(&cfg, &spec, ops, NULL, 0)); /* names, defaults, ranges */
    hs_cfg_free(&cfg);
    for (size_t i = 0; i < ops->n_options; i++) HS_TRY(check_shared(ops, &ops->options[i]));
    if (n_extra >= HS_ALGO_EXTRA_MAX)
        return HS_ERR(-ENOSPC,
                      "hs_algo_register: --algo %s: the registry holds %d algorithms "
                      "beyond the built-ins",
                      ops->name, HS_ALGO_EXTRA_MAX);
    extra_algos[n_extra++] = ops;
    names[0] = '\0';
    return 0;
}
