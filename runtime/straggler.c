/*
 * runtime/straggler.c — parse --straggler specs and draw per-rank, per-iteration delays.
 *
 * Each spec is split on ':' into fields; every field is checked as it is read, and an error
 * quotes the whole spec and the field at fault. Only the specs that apply to this rank are
 * kept. Random draws use a fresh hs_rng stream per (spec index, rank, iteration), derived from
 * the seed, so results never depend on call order.
 */
#include "hearsay/straggler.h"

#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_MAX     512   /* longest spec accepted */
#define FIELDS_MAX   8     /* most ':'-separated fields in a spec */
#define DURATION_MAX 1e6   /* seconds; longer pauses are certainly a typo */
#define FACTOR_MAX   1e6   /* largest slowdown factor */
#define HETERO_ITER  (-1L) /* the "iteration" of the one hetero draw per rank */

enum kind { KIND_SLOW, KIND_PAUSE, KIND_ONCE, KIND_HETERO, KIND_CRASH, KIND_FREEZE };
enum dist { DIST_FIXED, DIST_EXP, DIST_LOGNORMAL };

/* One parsed spec as it applies to this rank. */
struct item {
    enum kind kind;
    size_t index;   /* position in the spec list: part of every draw's stream */
    double factor;  /* slow: K; hetero: this rank's draw */
    double lo, hi;  /* hetero range */
    double p;       /* pause probability */
    enum dist dist; /* pause distribution */
    double a, b;    /* fixed: a = seconds; exp: a = mean; lognormal: a = mu, b = sigma */
    double max;     /* pause cap in seconds (0 = none) */
    long iter;      /* once, crash, freeze */
    double dur;     /* once, freeze: seconds (freeze: INFINITY = forever) */
};

struct hs_straggler {
    uint64_t seed;
    int rank, ranks;
    size_t n; /* items that apply to this rank */
    struct item *items;
    double slowdown; /* product of slow and hetero factors */
    long crash_iter; /* -1: never */
};

/* ---------------------------------------------------------------------------------------- */
/* Errors: every message quotes the spec and the field at fault. */

static int bad(const char *spec, const char *tok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(const char *spec, const char *tok, const char *fmt, ...)
{
    char detail[HS_ERRMSG_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (tok) return HS_ERR(-EINVAL, "--straggler '%s': '%s': %s", spec, tok, detail);
    return HS_ERR(-EINVAL, "--straggler '%s': %s", spec, detail);
}

/* ---------------------------------------------------------------------------------------- */
/* Field parsers. `spec` is only used for messages. */

/* A finite number filling all of `s`. */
static int number(const char *s, double *out)
{
    if (!*s || isspace((unsigned char)*s)) return -1;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* A duration: a number with an optional unit us, ms, s or m (bare = seconds), >= 0. */
static int duration(const char *spec, const char *tok, const char *s, double *out)
{
    char *end;
    if (!*s || isspace((unsigned char)*s)) return bad(spec, tok, "empty duration");
    double v = strtod(s, &end);
    if (end == s || !isfinite(v))
        return bad(spec, tok, "'%s' is not a duration (e.g. 200ms, 1.5s, 2m, 500us)", s);
    double unit;
    if (!strcmp(end, "") || !strcmp(end, "s"))
        unit = 1.0;
    else if (!strcmp(end, "ms"))
        unit = 1e-3;
    else if (!strcmp(end, "us"))
        unit = 1e-6;
    else if (!strcmp(end, "m"))
        unit = 60.0;
    else
        return bad(spec, tok, "unknown unit '%s' (use us, ms, s or m; bare = seconds)", end);
    v *= unit;
    if (v < 0) return bad(spec, tok, "a duration must not be negative");
    if (v > DURATION_MAX) return bad(spec, tok, "duration above %g s", DURATION_MAX);
    *out = v;
    return 0;
}

/* A non-negative integer in [0, hi] filling all of `s` (digits only). */
static int uint_field(const char *s, long hi, long *out)
{
    if (!*s) return -1;
    for (const char *c = s; *c; c++)
        if (!isdigit((unsigned char)*c)) return -1;
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno || v > hi) return -1;
    *out = v;
    return 0;
}

/* "key=VALUE": returns VALUE, or NULL when the field does not start with key=. */
static const char *keyed(const char *tok, const char *key)
{
    size_t k = strlen(key);
    if (strncmp(tok, key, k) || tok[k] != '=') return NULL;
    return tok + k + 1;
}

/* RANKS: all | R | A-B, comma-separated. Each rank must be < ranks when ranks > 0.
 * *applies tells whether `rank` is in the set (rank < 0: not asked). */
static int rank_set(const char *spec, const char *tok, int ranks, int rank, int *applies)
{
    *applies = 0;
    if (!strcmp(tok, "all")) {
        *applies = 1;
        return 0;
    }
    if (!*tok) return bad(spec, NULL, "empty rank list (use all, 3, 0,2 or 1-4)");
    char buf[SPEC_MAX];
    snprintf(buf, sizeof buf, "%s", tok);
    char *save = NULL;
    for (char *part = strtok_r(buf, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
        long lo, hi;
        char *dash = strchr(part, '-');
        if (dash) {
            *dash = '\0';
            if (uint_field(part, INT_MAX, &lo) || uint_field(dash + 1, INT_MAX, &hi)) {
                *dash = '-';
                return bad(spec, part, "not a rank range (expected A-B with 0 <= A <= B)");
            }
            *dash = '-';
            if (lo > hi) return bad(spec, part, "empty rank range (%ld > %ld)", lo, hi);
        } else {
            if (uint_field(part, INT_MAX, &lo))
                return bad(spec, part, "not a rank (expected all, a rank, a list or A-B)");
            hi = lo;
        }
        if (ranks > 0 && hi >= ranks)
            return bad(spec, part, "rank %ld is out of range for a job of %d rank%s (0-%d)", hi,
                       ranks, ranks == 1 ? "" : "s", ranks - 1);
        if (rank >= lo && rank <= hi) *applies = 1;
    }
    /* strtok_r skips empty parts: reject "1,,2", ",1", "1," explicitly. */
    if (tok[0] == ',' || tok[strlen(tok) - 1] == ',' || strstr(tok, ",,"))
        return bad(spec, tok, "empty entry in the rank list");
    return 0;
}

/* "lognormal=..." value: MU,SIGMA | median=D,sigma=S | mean=D,sigma=S. */
static int lognormal(const char *spec, const char *tok, const char *v, struct item *it)
{
    char buf[SPEC_MAX];
    snprintf(buf, sizeof buf, "%s", v);
    char *comma = strchr(buf, ',');
    if (!comma)
        return bad(spec, tok,
                   "expected lognormal=MU,SIGMA, lognormal=median=D,sigma=S or "
                   "lognormal=mean=D,sigma=S");
    *comma = '\0';
    const char *first = buf, *second = comma + 1;
    double sigma, center;
    const char *sv = keyed(second, "sigma");
    if (!sv) sv = second;
    if (number(sv, &sigma) || sigma < 0 || sigma > 10)
        return bad(spec, tok, "sigma '%s' must be a number in [0, 10]", sv);
    const char *med = keyed(first, "median"), *mean = keyed(first, "mean");
    if (med || mean) {
        HS_TRY(duration(spec, tok, med ? med : mean, &center));
        if (center <= 0) return bad(spec, tok, "the %s must be > 0", med ? "median" : "mean");
        /* median = e^mu; mean = e^(mu + sigma^2/2). */
        it->a = log(center) - (mean ? 0.5 * sigma * sigma : 0.0);
    } else {
        if (keyed(second, "sigma"))
            return bad(spec, tok, "give MU,SIGMA, median=D,sigma=S or mean=D,sigma=S");
        if (number(first, &it->a) || fabs(it->a) > 30)
            return bad(spec, tok, "mu '%s' (mean of ln seconds) must be a number in [-30, 30]",
                       first);
    }
    it->b = sigma;
    it->dist = DIST_LOGNORMAL;
    return 0;
}

/* The pause distribution field: fixed=D | exp=D | lognormal=... */
static int distribution(const char *spec, const char *tok, struct item *it)
{
    const char *v;
    if ((v = keyed(tok, "fixed"))) {
        it->dist = DIST_FIXED;
        return duration(spec, tok, v, &it->a);
    }
    if ((v = keyed(tok, "exp"))) {
        it->dist = DIST_EXP;
        HS_TRY(duration(spec, tok, v, &it->a));
        if (it->a <= 0) return bad(spec, tok, "the mean of an exponential pause must be > 0");
        return 0;
    }
    if ((v = keyed(tok, "lognormal"))) return lognormal(spec, tok, v, it);
    return bad(spec, tok,
               "unknown pause distribution (expected fixed=D, exp=D, lognormal=MU,SIGMA or "
               "lognormal=median=D,sigma=S)");
}

static const char *const usage_of[] = {
    [KIND_SLOW] = "slow:RANKS:xK",
    [KIND_PAUSE] = "pause:RANKS:p=P:DIST[:max=D]",
    [KIND_ONCE] = "once:RANKS:iter=N:D",
    [KIND_HETERO] = "hetero:LO-HI",
    [KIND_CRASH] = "crash:RANKS:iter=N[:rejoin=D]",
    [KIND_FREEZE] = "freeze:RANKS:at=N:for=D|forever",
};

/* Parse one spec. ranks > 0: check ranks against the job size. rank >= 0: *applies tells
 * whether the spec concerns that rank. */
static int parse(const char *spec, int ranks, int rank, struct item *it, int *applies)
{
    memset(it, 0, sizeof *it);
    *applies = 0;
    if (!spec) return HS_ERR(-EINVAL, "--straggler: missing spec");
    if (!*spec) return bad(spec, NULL, "empty spec (see hearsay train --help)");
    if (strlen(spec) >= SPEC_MAX)
        return HS_ERR(-EINVAL,
                      "--straggler: spec longer than %d "
                      "characters",
                      SPEC_MAX - 1);
    char buf[SPEC_MAX];
    snprintf(buf, sizeof buf, "%s", spec);
    char *f[FIELDS_MAX + 1];
    int nf = 0;
    for (char *p = buf;;) {
        if (nf == FIELDS_MAX + 1) break;
        f[nf++] = p;
        char *c = strchr(p, ':');
        if (!c) break;
        *c = '\0';
        p = c + 1;
    }

    static const char *const names[] = {
        [KIND_SLOW] = "slow",     [KIND_PAUSE] = "pause", [KIND_ONCE] = "once",
        [KIND_HETERO] = "hetero", [KIND_CRASH] = "crash", [KIND_FREEZE] = "freeze"};
    int k = -1;
    for (size_t i = 0; i < HS_ARRAY_LEN(names); i++)
        if (!strcmp(f[0], names[i])) k = (int)i;
    if (k < 0)
        return bad(spec, f[0],
                   "unknown kind (expected slow, pause, once, hetero, crash or freeze; see "
                   "hearsay train --help)");
    it->kind = (enum kind)k;
    const char *usage = usage_of[k];
    int need = k == KIND_HETERO ? 2 : k == KIND_SLOW || k == KIND_CRASH ? 3 : 4;
    int most = k == KIND_PAUSE ? 5 : k == KIND_CRASH ? 4 : need;
    if (nf < need) return bad(spec, NULL, "missing fields: expected %s", usage);
    if (nf > most) return bad(spec, f[most], "unexpected extra field: expected %s", usage);

    if (k == KIND_HETERO) {
        /* LO-HI: strtod stops at the dash. */
        char *end;
        const char *t = f[1];
        double lo = strtod(t, &end), hi;
        if (end == t || *end != '-' || number(end + 1, &hi) || !isfinite(lo))
            return bad(spec, t, "expected a range LO-HI of slowdown factors, e.g. 1-3");
        if (lo < 1 || hi < lo || hi > FACTOR_MAX)
            return bad(spec, t, "the range must satisfy 1 <= LO <= HI <= %g", FACTOR_MAX);
        it->lo = lo;
        it->hi = hi;
        *applies = 1;
        return 0;
    }

    HS_TRY(rank_set(spec, f[1], ranks, rank, applies));
    long iter;
    const char *v;
    switch (it->kind) {
    case KIND_SLOW:
        if (f[2][0] != 'x' || number(f[2] + 1, &it->factor))
            return bad(spec, f[2], "expected a slowdown factor xK, e.g. x4 or x1.5");
        if (it->factor < 1 || it->factor > FACTOR_MAX)
            return bad(spec, f[2], "the slowdown factor must be in [1, %g]", FACTOR_MAX);
        return 0;
    case KIND_PAUSE:
        if (!(v = keyed(f[2], "p")))
            return bad(spec, f[2], "expected the pause probability p=P, e.g. p=0.05");
        if (number(v, &it->p) || it->p < 0 || it->p > 1)
            return bad(spec, f[2], "the probability must be in [0, 1]");
        HS_TRY(distribution(spec, f[3], it));
        if (nf == 5) {
            if (!(v = keyed(f[4], "max")))
                return bad(spec, f[4], "expected an optional cap max=D, e.g. max=5s");
            HS_TRY(duration(spec, f[4], v, &it->max));
            if (it->max <= 0) return bad(spec, f[4], "the cap must be > 0");
        }
        return 0;
    case KIND_ONCE:
    case KIND_CRASH:
        if (!(v = keyed(f[2], "iter")) || uint_field(v, LONG_MAX, &iter))
            return bad(spec, f[2], "expected the iteration iter=N with N >= 0, e.g. iter=100");
        it->iter = iter;
        if (it->kind == KIND_ONCE) HS_TRY(duration(spec, f[3], f[3], &it->dur));
        if (it->kind == KIND_CRASH) {
            it->dur = -1; /* no replacement */
            if (nf == 4) {
                if (!(v = keyed(f[3], "rejoin")))
                    return bad(spec, f[3],
                               "expected an optional rejoin=D (a replacement joins D after the "
                               "crash), e.g. rejoin=5s");
                HS_TRY(duration(spec, f[3], v, &it->dur));
            }
        }
        return 0;
    case KIND_FREEZE:
        if (!(v = keyed(f[2], "at")) || uint_field(v, LONG_MAX, &iter))
            return bad(spec, f[2], "expected the iteration at=N with N >= 0, e.g. at=100");
        it->iter = iter;
        if (!(v = keyed(f[3], "for")))
            return bad(spec, f[3], "expected for=D or for=forever, e.g. for=10s");
        if (!strcmp(v, "forever"))
            it->dur = INFINITY;
        else {
            HS_TRY(duration(spec, f[3], v, &it->dur));
            if (it->dur <= 0) return bad(spec, f[3], "a freeze must last > 0 (or forever)");
        }
        return 0;
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Draws. */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A stream for (spec index, rank, iteration), independent of everything else. */
static void stream_for(hs_rng_t *r, uint64_t seed, size_t index, int rank, long iter)
{
    uint64_t h = mix64(0x5354524147474c52ull + (uint64_t)index); /* "STRAGGLR" */
    h = mix64(h ^ (0x9E3779B97F4A7C15ull * ((uint64_t)(uint32_t)rank + 1)));
    h = mix64(h ^ (uint64_t)iter);
    hs_rng_seed(r, seed, h);
}

static double pause_draw(const hs_straggler_t *s, const struct item *it, long iter)
{
    hs_rng_t r;
    stream_for(&r, s->seed, it->index, s->rank, iter);
    if (!(hs_rng_uniform(&r) < it->p)) return 0.0;
    double d;
    switch (it->dist) {
    case DIST_FIXED:
        d = it->a;
        break;
    case DIST_EXP:
        d = hs_rng_exponential(&r, it->a);
        break;
    default:
        d = exp(it->a + it->b * hs_rng_normal(&r));
        break;
    }
    if (it->max > 0 && d > it->max) d = it->max;
    if (!(d >= 0) || d > DURATION_MAX) d = DURATION_MAX; /* a huge lognormal draw */
    return d;
}

/* ---------------------------------------------------------------------------------------- */
/* Public API. */

int hs_straggler_check(const char *spec, int ranks)
{
    struct item it;
    int applies;
    return parse(spec, ranks, -1, &it, &applies);
}

/* The slowdowns of one rank multiply: refuse a product past FACTOR_MAX (the sleep it asks for
 * would be longer than any run). `factor` is the product so far. */
static int slowdown_check(const char *const *specs, size_t n, int rank, double factor)
{
    if (factor <= FACTOR_MAX) return 0;
    char list[SPEC_MAX];
    size_t pos = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n && pos < sizeof list; i++)
        pos += (size_t)snprintf(list + pos, sizeof list - pos, "%s'%s'", i ? ", " : "", specs[i]);
    return HS_ERR(-EINVAL,
                  "--straggler: the slowdowns of rank %d multiply to x%g, above x%g (specs %s)",
                  rank, factor, FACTOR_MAX, list);
}

int hs_straggler_check_list(const char *const *specs, size_t n, int ranks)
{
    for (size_t i = 0; i < n; i++) HS_TRY(hs_straggler_check(specs[i], ranks));
    for (int r = 0; r < ranks; r++) {
        double factor = 1.0;
        for (size_t i = 0; i < n; i++) {
            struct item it;
            int applies;
            HS_TRY(parse(specs[i], ranks, r, &it, &applies));
            if (applies && it.kind == KIND_SLOW) factor *= it.factor;
            if (applies && it.kind == KIND_HETERO) factor *= it.hi; /* the largest draw */
        }
        HS_TRY(slowdown_check(specs, n, r, factor));
    }
    return 0;
}

int hs_straggler_create(hs_straggler_t **out, const char *const *specs, size_t n, uint64_t seed,
                        int rank, int ranks)
{
    if (!out) return HS_ERR(-EINVAL, "hs_straggler_create: out is NULL");
    *out = NULL;
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return HS_ERR(-EINVAL, "straggler injection: rank %d is not in a job of %d ranks", rank,
                      ranks);
    if (n > 0 && !specs) return HS_ERR(-EINVAL, "hs_straggler_create: %zu specs but no list", n);
    hs_straggler_t *s = hs_calloc(1, sizeof *s, "straggler injector");
    if (!s) return -ENOMEM;
    int rc = 0;
    if (n > 0 && !(s->items = hs_calloc(n, sizeof *s->items, "straggler specs"))) {
        rc = -ENOMEM;
        goto fail;
    }
    s->seed = seed;
    s->rank = rank;
    s->ranks = ranks;
    s->slowdown = 1.0;
    s->crash_iter = -1;
    for (size_t i = 0; i < n; i++) {
        struct item it;
        int applies;
        if ((rc = parse(specs[i], ranks, rank, &it, &applies)) < 0) goto fail;
        if (!applies) continue;
        it.index = i;
        if (it.kind == KIND_HETERO) {
            hs_rng_t r;
            stream_for(&r, seed, i, rank, HETERO_ITER);
            it.factor = it.lo + (it.hi - it.lo) * hs_rng_uniform(&r);
        }
        if (it.kind == KIND_SLOW || it.kind == KIND_HETERO) s->slowdown *= it.factor;
        if (it.kind == KIND_CRASH && (s->crash_iter < 0 || it.iter < s->crash_iter))
            s->crash_iter = it.iter;
        s->items[s->n++] = it;
    }
    if ((rc = slowdown_check(specs, n, rank, s->slowdown)) < 0) goto fail;
    *out = s;
    return 0;
fail:
    hs_straggler_free(&s);
    return rc;
}

void hs_straggler_free(hs_straggler_t **s)
{
    if (!s || !*s) return;
    free((*s)->items);
    HS_FREE(*s);
}

double hs_straggler_delay(const hs_straggler_t *s, long iter, double compute_s)
{
    if (!s) return 0.0;
    double d = 0.0;
    if (compute_s > 0 && s->slowdown > 1) d += (s->slowdown - 1) * compute_s;
    for (size_t i = 0; i < s->n; i++) {
        const struct item *it = &s->items[i];
        if (it->kind == KIND_PAUSE)
            d += pause_draw(s, it, iter);
        else if (it->kind == KIND_ONCE && it->iter == iter)
            d += it->dur;
    }
    return d;
}

int hs_straggler_crash(const hs_straggler_t *s, long iter)
{
    if (!s) return 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->items[i].kind == KIND_CRASH && s->items[i].iter == iter) return 1;
    return 0;
}

double hs_straggler_freeze(const hs_straggler_t *s, long iter)
{
    if (!s) return 0.0;
    double d = 0.0;
    for (size_t i = 0; i < s->n; i++)
        if (s->items[i].kind == KIND_FREEZE && s->items[i].iter == iter) d += s->items[i].dur;
    return d;
}

double hs_straggler_rejoin(const hs_straggler_t *s, long iter)
{
    if (!s) return -1;
    for (size_t i = 0; i < s->n; i++)
        if (s->items[i].kind == KIND_CRASH && s->items[i].iter == iter) return s->items[i].dur;
    return -1;
}

int hs_straggler_any_rejoin(const char *const *specs, size_t n, int ranks, int *rank)
{
    int any = 0;
    if (rank) *rank = -1;
    for (size_t i = 0; i < n; i++) {
        struct item it;
        int applies;
        HS_TRY(parse(specs[i], ranks, -1, &it, &applies));
        if (it.kind != KIND_CRASH || it.dur < 0) continue;
        any = 1;
        for (int r = 0; rank && r < ranks; r++) { /* the first rank it names */
            HS_TRY(parse(specs[i], ranks, r, &it, &applies));
            if (applies && (*rank < 0 || r < *rank)) *rank = r;
            if (applies) break;
        }
    }
    return any;
}

int hs_straggler_replaced(const char *const *specs, size_t n, int ranks, int rank)
{
    for (size_t i = 0; i < n; i++) {
        struct item it;
        int applies;
        HS_TRY(parse(specs[i], ranks, rank, &it, &applies));
        if (applies && it.kind == KIND_CRASH && it.dur >= 0) return 1;
    }
    return 0;
}

long hs_straggler_crash_iter(const hs_straggler_t *s)
{
    return s ? s->crash_iter : -1;
}

double hs_straggler_slowdown(const hs_straggler_t *s)
{
    return s ? s->slowdown : 1.0;
}

int hs_straggler_active(const hs_straggler_t *s)
{
    return s && s->n > 0;
}

/* snprintf into buf at *pos, counting the full length even past len. */
static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(*pos < len ? buf + *pos : NULL, *pos < len ? len - *pos : 0, fmt, ap);
    va_end(ap);
    if (w > 0) *pos += (size_t)w;
}

int hs_straggler_describe(const hs_straggler_t *s, char *buf, size_t len)
{
    size_t pos = 0;
    if (buf && len) buf[0] = '\0';
    if (!buf) len = 0;
    if (!s) {
        append(buf, len, &pos, "no straggler injection");
        return (int)pos;
    }
    append(buf, len, &pos, "rank %d:", s->rank);
    if (s->n == 0) append(buf, len, &pos, " none");
    const char *sep = " ";
    if (s->slowdown > 1) {
        append(buf, len, &pos, "%sslowdown x%.3g", sep, s->slowdown);
        sep = "; ";
    }
    for (size_t i = 0; i < s->n; i++) {
        const struct item *it = &s->items[i];
        switch (it->kind) {
        case KIND_PAUSE:
            append(buf, len, &pos, "%spause p=%g ", sep, it->p);
            if (it->dist == DIST_FIXED)
                append(buf, len, &pos, "fixed %gs", it->a);
            else if (it->dist == DIST_EXP)
                append(buf, len, &pos, "exp(mean %gs)", it->a);
            else
                append(buf, len, &pos, "lognormal(median %.3gs, sigma %g)", exp(it->a), it->b);
            if (it->max > 0) append(buf, len, &pos, " max %gs", it->max);
            break;
        case KIND_ONCE:
            append(buf, len, &pos, "%spause %gs at iter %ld", sep, it->dur, it->iter);
            break;
        case KIND_CRASH:
            append(buf, len, &pos, "%scrash at iter %ld", sep, it->iter);
            if (it->dur >= 0) append(buf, len, &pos, ", a replacement rejoins %gs later", it->dur);
            break;
        case KIND_FREEZE:
            if (isinf(it->dur))
                append(buf, len, &pos, "%sfreeze for good at iter %ld", sep, it->iter);
            else
                append(buf, len, &pos, "%sfreeze %gs at iter %ld", sep, it->dur, it->iter);
            break;
        default:
            continue; /* slowdowns: summarised above */
        }
        sep = "; ";
    }
    return (int)HS_MIN(pos, (size_t)INT_MAX);
}

const char *hs_straggler_help(void)
{
    return "Straggler and fault injection (--straggler SPEC, repeatable; draws follow --seed):\n"
           "  slow:RANKS:xK                 fixed slowdown: the ranks' compute time x K (K >= 1)\n"
           "                                  slow:3:x4   slow:0,2-3:x2\n"
           "  pause:RANKS:p=P:DIST[:max=D]  each iteration, with probability P, a pause drawn "
           "from\n"
           "                                DIST: fixed=D | exp=D (mean D) | lognormal=MU,SIGMA "
           "(of\n"
           "                                ln seconds) | lognormal=median=D,sigma=S |\n"
           "                                lognormal=mean=D,sigma=S; max=D caps each pause\n"
           "                                  pause:all:p=0.05:exp=200ms\n"
           "                                  pause:1:p=0.1:lognormal=median=200ms,sigma=1:max=5s\n"
           "  once:RANKS:iter=N:D           a one-off pause of D at iteration N\n"
           "                                  once:1:iter=100:2s\n"
           "  hetero:LO-HI                  every rank draws a fixed slowdown uniformly in "
           "[LO, HI]\n"
           "                                  hetero:1-3\n"
           "  crash:RANKS:iter=N            the ranks' processes exit abruptly at iteration N\n"
           "                                  crash:2:iter=500\n"
           "  crash:RANKS:iter=N:rejoin=D   ... and a replacement joins the running job D later\n"
           "                                (sgp, adpsgd, easgd, eamsgd, lsgd; hearsay sim, or\n"
           "                                hearsay run on one host over hsshm): it takes a\n"
           "                                neighbour's model (sgp: half its weight)\n"
           "                                  crash:2:iter=500:rejoin=5s\n"
           "  freeze:RANKS:at=N:for=D|forever  the whole process stops (SIGSTOP: every thread,\n"
           "                                heartbeats too) at iteration N for D, or for good\n"
           "                                (hearsay sim: its threads stop in virtual time)\n"
           "                                  freeze:2:at=100:for=10s   "
           "freeze:1:at=50:for=forever\n"
           "  RANKS: all, a rank, a list, ranges (all | 3 | 0,2-5). D: a duration with unit\n"
           "  us, ms, s or m (200ms, 1.5s, 2m; a bare number is seconds, at most 1e6 s). "
           "Slowdowns\n"
           "  multiply (to at most x1e6 per rank); a slowdown xK is emulated by sleeping (K-1) x\n"
           "  the measured compute time.\n";
}
