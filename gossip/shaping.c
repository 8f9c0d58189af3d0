/*
 * gossip/shaping.c — link shaping spec parser and the sending side's per-link state
 * (store-and-forward bandwidth cap, added latency, seeded jitter). See hearsay/shaping.h.
 */
#include "hearsay/shaping.h"
#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum scope_kind { SCOPE_ALL, SCOPE_PAIR, SCOPE_DIRECTED, SCOPE_HOST };

#define HOST_MAX 256

typedef struct rule {
    enum scope_kind kind;
    int a, b;            /* ranks for PAIR / DIRECTED */
    char host[HOST_MAX]; /* SCOPE_HOST */
    int has_lat, has_jit, has_bw;
    hs_link_shape_t p;
} rule_t;

struct hs_shape {
    int n;
    rule_t *rules;
};

typedef struct link_state {
    hs_link_shape_t p;
    double busy_until;   /* when the link finishes serialising what was offered */
    double last_release; /* releases never go backwards: a link does not reorder */
    hs_rng_t rng;        /* jitter stream of this link */
} link_state_t;

struct hs_shaper {
    int rank, size;
    link_state_t *links; /* (size) one per destination */
};

/* --- parser --------------------------------------------------------------------------- */

typedef struct parser {
    const char *spec; /* whole spec, for messages */
} parser_t;

static int perr(const parser_t *ps, const char *at, size_t len, const char *why)
{
    return HS_ERR(-EINVAL, "shaping spec '%s': %s at character %d ('%.*s')", ps->spec, why,
                  (int)(at - ps->spec) + 1, (int)len, at);
}

/* Trim [*b, *e) of blanks. */
static void trim(const char **b, const char **e)
{
    while (*b < *e && isspace((unsigned char)**b)) (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1])) (*e)--;
}

/* Parse a number followed by a unit from the table; value * factor into *out, which must lie
 * in [lo, hi] (in seconds or bytes per second; `range` says so in the user's words). */
typedef struct unit {
    const char *name;
    double factor;
} unit_t;

static int parse_quantity(const parser_t *ps, const char *b, const char *e, const unit_t *units,
                          size_t nunits, const char *kind, const char *key, double lo, double hi,
                          const char *range, double *out)
{
    char buf[64];
    size_t len = (size_t)(e - b);
    if (len == 0 || len >= sizeof buf) return perr(ps, b, len, "empty or too long value");
    memcpy(buf, b, len);
    buf[len] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (end == buf || !isfinite(v) || v < 0)
        return perr(ps, b, len, "expected a non-negative number with a unit");
    const char *u = end;
    size_t ulen = strlen(u);
    if (ulen >= 2 && !strcmp(u + ulen - 2, "/s")) ulen -= 2;
    for (size_t i = 0; i < nunits; i++) {
        if (strlen(units[i].name) == ulen && !strncmp(units[i].name, u, ulen)) {
            double x = v * units[i].factor;
            if (!(x >= lo && x <= hi)) {
                char why[160];
                snprintf(why, sizeof why, "%s out of range (%s)", key, range);
                return perr(ps, b, len, why);
            }
            *out = x;
            return 0;
        }
    }
    char why[160];
    snprintf(why, sizeof why, "missing or unknown %s unit '%.*s'", kind, (int)ulen, u);
    return perr(ps, b, len, why);
}

/* The ranges of the parameters (hearsay/shaping.h): a link slower than 1 bit/s or faster than
 * 80 Tbit/s, or a delay over an hour, is a typo; and the bounds keep every derived size and time
 * finite (a 1e30 Gbit link once made a zero chunk size, and a division by it). */
#define DELAY_MAX_S 3600.0
#define BW_MIN_BPS  (1.0 / 8)
#define BW_MAX_BPS  1e13

static const unit_t dur_units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
static const unit_t rate_units[] = {
    {"bit", 1.0 / 8},  {"Kbit", 1e3 / 8},  {"Mbit", 1e6 / 8},     {"Gbit", 1e9 / 8},
    {"B", 1.0},        {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
    {"KiB", 1024.0},   {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"bps", 1.0 / 8},
    {"Kbps", 1e3 / 8}, {"Mbps", 1e6 / 8},  {"Gbps", 1e9 / 8},
};

static int parse_rank(const char *b, const char *e, int *out)
{
    if (b == e || e - b > 9) return -1;
    int v = 0;
    for (const char *p = b; p < e; p++) {
        if (!isdigit((unsigned char)*p)) return -1;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 0;
}

static int all_digits(const char *b, const char *e)
{
    if (b == e) return 0;
    for (const char *p = b; p < e; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    return 1;
}

static int parse_scope(const parser_t *ps, const char *b, const char *e, rule_t *r)
{
    trim(&b, &e);
    if (b == e) return perr(ps, b, 0, "empty scope before ':'");
    if (e - b == 1 && *b == '*') {
        r->kind = SCOPE_ALL;
        return 0;
    }
    for (const char *p = b; p < e; p++) {
        if (*p == '-' || *p == '>') {
            int x, y;
            if (all_digits(b, p) && all_digits(p + 1, e) &&
                (parse_rank(b, p, &x) || parse_rank(p + 1, e, &y)))
                return perr(ps, b, (size_t)(e - b),
                            "rank out of range in scope (at most 9 digits)");
            if (!parse_rank(b, p, &x) && !parse_rank(p + 1, e, &y)) {
                if (x == y) return perr(ps, b, (size_t)(e - b), "a link needs two different ranks");
                r->kind = *p == '-' ? SCOPE_PAIR : SCOPE_DIRECTED;
                r->a = x;
                r->b = y;
                return 0;
            }
            if (*p == '>') return perr(ps, b, (size_t)(e - b), "expected RANK>RANK");
        }
    }
    int dummy;
    if (!parse_rank(b, e, &dummy))
        return perr(ps, b, (size_t)(e - b),
                    "a single rank is not a scope (use A-B, A>B or a host)");
    for (const char *p = b; p < e; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
            return perr(ps, b, (size_t)(e - b), "bad host name in scope");
    if ((size_t)(e - b) >= HOST_MAX) return perr(ps, b, (size_t)(e - b), "host name too long");
    r->kind = SCOPE_HOST;
    memcpy(r->host, b, (size_t)(e - b));
    r->host[e - b] = '\0';
    return 0;
}

static int parse_param(const parser_t *ps, const char *b, const char *e, rule_t *r)
{
    trim(&b, &e);
    if (b == e) return perr(ps, b, 0, "empty parameter");
    const char *eq = memchr(b, '=', (size_t)(e - b));
    if (!eq) return perr(ps, b, (size_t)(e - b), "expected NAME=VALUE");
    const char *kb = b, *ke = eq, *vb = eq + 1, *ve = e;
    trim(&kb, &ke);
    trim(&vb, &ve);
    size_t klen = (size_t)(ke - kb);
    if (klen == 7 && !strncmp(kb, "latency", 7)) {
        HS_TRY(parse_quantity(ps, vb, ve, dur_units, HS_ARRAY_LEN(dur_units), "time", "latency", 0,
                              DELAY_MAX_S, "0 to 3600s", &r->p.latency_s));
        r->has_lat = 1;
    } else if (klen == 6 && !strncmp(kb, "jitter", 6)) {
        HS_TRY(parse_quantity(ps, vb, ve, dur_units, HS_ARRAY_LEN(dur_units), "time", "jitter", 0,
                              DELAY_MAX_S, "0 to 3600s", &r->p.jitter_s));
        r->has_jit = 1;
    } else if (klen == 2 && !strncmp(kb, "bw", 2)) {
        HS_TRY(parse_quantity(ps, vb, ve, rate_units, HS_ARRAY_LEN(rate_units), "rate", "bw", 0,
                              BW_MAX_BPS, "1bit to 10000GB, i.e. 80 Tbit/s", &r->p.bw_Bps));
        if (!(r->p.bw_Bps > 0)) return perr(ps, vb, (size_t)(ve - vb), "bandwidth must be > 0");
        if (r->p.bw_Bps < BW_MIN_BPS)
            return perr(ps, vb, (size_t)(ve - vb), "bw out of range (1bit to 10000GB)");
        r->has_bw = 1;
    } else {
        return perr(ps, kb, klen, "unknown parameter (expected latency, jitter or bw)");
    }
    return 0;
}

static int parse_rule(const parser_t *ps, const char *b, const char *e, rule_t *r)
{
    memset(r, 0, sizeof *r);
    const char *colon = memchr(b, ':', (size_t)(e - b));
    const char *pb = b;
    if (colon) {
        HS_TRY(parse_scope(ps, b, colon, r));
        pb = colon + 1;
    }
    const char *tb = pb, *te = e;
    trim(&tb, &te);
    if (tb == te) return perr(ps, b, (size_t)(e - b), "rule has no parameters");
    while (pb <= e) {
        const char *comma = memchr(pb, ',', (size_t)(e - pb));
        const char *pe = comma ? comma : e;
        HS_TRY(parse_param(ps, pb, pe, r));
        if (!comma) break;
        pb = comma + 1;
    }
    return 0;
}

int hs_shape_parse(const char *spec, hs_shape_t **out)
{
    *out = NULL;
    hs_shape_t *s = hs_calloc(1, sizeof *s, "shaping spec");
    if (!s) return -ENOMEM;
    if (!spec) spec = "";
    parser_t ps = {.spec = spec};
    const char *b = spec, *end = spec + strlen(spec);
    int rc = 0;
    {
        const char *tb = b, *te = end;
        trim(&tb, &te);
        if (tb == te) {
            *out = s;
            return 0;
        }
    }
    int cap = 1;
    for (const char *p = spec; *p; p++) cap += *p == ';';
    s->rules = hs_calloc((size_t)cap, sizeof *s->rules, "shaping rules");
    if (!s->rules) {
        rc = -ENOMEM;
        goto fail;
    }
    while (b <= end) {
        const char *semi = memchr(b, ';', (size_t)(end - b));
        const char *e = semi ? semi : end;
        const char *tb = b, *te = e;
        trim(&tb, &te);
        if (tb == te) {
            rc = perr(&ps, b, (size_t)(e - b), "empty rule");
            goto fail;
        }
        rc = parse_rule(&ps, b, e, &s->rules[s->n]);
        if (rc < 0) goto fail;
        s->n++;
        if (!semi) break;
        b = semi + 1;
    }
    *out = s;
    return 0;
fail:
    hs_shape_free(&s);
    return rc;
}

void hs_shape_free(hs_shape_t **s)
{
    if (!s || !*s) return;
    free((*s)->rules);
    HS_FREE(*s);
}

int hs_shape_nrules(const hs_shape_t *s)
{
    return s ? s->n : 0;
}

static int rule_matches(const rule_t *r, int src, int dst, const char *sh, const char *dh)
{
    switch (r->kind) {
    case SCOPE_ALL:
        return 1;
    case SCOPE_PAIR:
        return (src == r->a && dst == r->b) || (src == r->b && dst == r->a);
    case SCOPE_DIRECTED:
        return src == r->a && dst == r->b;
    case SCOPE_HOST:
        return (sh && !strcmp(sh, r->host)) || (dh && !strcmp(dh, r->host));
    }
    return 0;
}

void hs_shape_link(const hs_shape_t *s, int src, int dst, const char *src_host,
                   const char *dst_host, hs_link_shape_t *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; s && i < s->n; i++) {
        const rule_t *r = &s->rules[i];
        if (!rule_matches(r, src, dst, src_host, dst_host)) continue;
        if (r->has_lat) out->latency_s = r->p.latency_s;
        if (r->has_jit) out->jitter_s = r->p.jitter_s;
        if (r->has_bw) out->bw_Bps = r->p.bw_Bps;
    }
}

/* --- sending side ---------------------------------------------------------------------- */

int hs_shaper_create(const hs_shape_t *s, int rank, int size, const char *const *hosts,
                     uint64_t seed, hs_shaper_t **out)
{
    *out = NULL;
    if (size <= 0 || rank < 0 || rank >= size)
        return HS_ERR(-EINVAL, "shaper: rank %d out of range for size %d", rank, size);
    for (int i = 0; s && i < s->n; i++) {
        const rule_t *r = &s->rules[i];
        if ((r->kind == SCOPE_PAIR || r->kind == SCOPE_DIRECTED) && (r->a >= size || r->b >= size))
            return HS_ERR(-EINVAL, "shaping rule %d names ranks %d and %d but the job has %d ranks",
                          i + 1, r->a, r->b, size);
    }
    hs_shaper_t *sh = hs_calloc(1, sizeof *sh, "shaper");
    if (!sh) return -ENOMEM;
    sh->links = hs_calloc((size_t)size, sizeof *sh->links, "shaper links");
    if (!sh->links) {
        free(sh);
        return -ENOMEM;
    }
    sh->rank = rank;
    sh->size = size;
    for (int d = 0; d < size; d++) {
        link_state_t *l = &sh->links[d];
        hs_shape_link(s, rank, d, hosts ? hosts[rank] : NULL, hosts ? hosts[d] : NULL, &l->p);
        hs_rng_seed(&l->rng, seed, 0x5ea9e000ull + (uint64_t)rank * (uint64_t)size + (uint64_t)d);
    }
    *out = sh;
    return 0;
}

void hs_shaper_free(hs_shaper_t **sh)
{
    if (!sh || !*sh) return;
    free((*sh)->links);
    HS_FREE(*sh);
}

int hs_shaper_active(const hs_shaper_t *sh, int dst)
{
    if (!sh || dst < 0 || dst >= sh->size) return 0;
    const hs_link_shape_t *p = &sh->links[dst].p;
    return p->latency_s > 0 || p->jitter_s > 0 || p->bw_Bps > 0;
}

size_t hs_shaper_chunk(const hs_shaper_t *sh, int dst, size_t chunk)
{
    if (!sh || dst < 0 || dst >= sh->size || !(sh->links[dst].p.bw_Bps > 0)) return chunk;
    double want = sh->links[dst].p.bw_Bps * 2e-3;
    if (!(want < (double)chunk)) return chunk; /* also keeps the cast below in range */
    size_t c = want < 16384.0 ? 16384 : (size_t)want;
    return c < chunk ? c : chunk;
}

double hs_shaper_release(hs_shaper_t *sh, int dst, size_t bytes, double now)
{
    if (!sh || dst < 0 || dst >= sh->size) return now;
    link_state_t *l = &sh->links[dst];
    double depart = now;
    if (l->p.bw_Bps > 0) {
        depart = HS_MAX(now, l->busy_until) + (double)bytes / l->p.bw_Bps;
        l->busy_until = depart;
    }
    double rel = depart + l->p.latency_s;
    if (l->p.jitter_s > 0) rel += l->p.jitter_s * hs_rng_uniform(&l->rng);
    if (rel < l->last_release) rel = l->last_release;
    l->last_release = rel;
    return rel;
}
