/* optim/schedule.c — learning-rate schedules: parsing, evaluation and formatting.
 * hs_lr_at is a pure function of (iteration, iterations per epoch, base lr); see optim.h. */
#include "hearsay/common.h"
#include "hearsay/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KINDS_HELP "constant, step:M1,M2,...[:GAMMA] or cosine[:LENGTH[:FINAL_LR]]"

/* Ranges of the numbers in a schedule: spans (epochs or iterations) up to 1e12, gamma in
 * (0, 100], a final lr in [0, 100] like --lr's. Beyond them the lr overflows or the span is a
 * typo. */
#define SPAN_MAX  1e12
#define GAMMA_MAX 100.0
#define LR_MAX    100.0

/* Parse a span "30", "0.5", "30ep", "500it" from s[0..len). Returns 0 or -EINVAL (no message:
 * the caller names the spec). */
static int parse_span(const char *s, size_t len, hs_lr_span_t *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf) return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    int iters = 0;
    if (len > 2 && !strcasecmp(buf + len - 2, "it")) {
        iters = 1;
        buf[len - 2] = '\0';
    } else if (len > 2 && !strcasecmp(buf + len - 2, "ep")) {
        buf[len - 2] = '\0';
    }
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || end == buf || *end != '\0' || !isfinite(v) || v < 0 || v > SPAN_MAX)
        return -EINVAL;
    out->value = v;
    out->iters = iters;
    return 0;
}

static int parse_number(const char *s, size_t len, double *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf) return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || end == buf || *end != '\0' || !isfinite(v)) return -EINVAL;
    *out = v;
    return 0;
}

/* Split spec at ':' into at most `max` fields (pointers into spec with lengths). Returns the
 * number of fields, or max + 1 when there are more. */
static int split_fields(const char *spec, const char **f, size_t *flen, int max)
{
    int n = 0;
    const char *p = spec;
    for (;;) {
        const char *c = strchr(p, ':');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (n == max) return max + 1;
        f[n] = p;
        flen[n] = l;
        n++;
        if (!c) return n;
        p = c + 1;
    }
}

static int parse_step(const char *spec, const char *ms, size_t mslen, hs_lr_schedule_t *s)
{
    const char *p = ms, *end = ms + mslen;
    if (mslen == 0)
        return HS_ERR(-EINVAL, "lr schedule '%s': step needs milestones (e.g. step:30,60,80:0.1)",
                      spec);
    while (p <= end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t l = c ? (size_t)(c - p) : (size_t)(end - p);
        if (s->n_milestones == HS_LR_MAX_MILESTONES)
            return HS_ERR(-EINVAL, "lr schedule '%s': more than %d milestones", spec,
                          HS_LR_MAX_MILESTONES);
        hs_lr_span_t *m = &s->milestones[s->n_milestones];
        if (parse_span(p, l, m) < 0)
            return HS_ERR(-EINVAL,
                          "lr schedule '%s': milestone '%.*s' is not a number of epochs in [0, "
                          "1e12] (or of iterations with an 'it' suffix)",
                          spec, (int)l, p);
        if (s->n_milestones > 0) {
            const hs_lr_span_t *prev = &s->milestones[s->n_milestones - 1];
            if (prev->iters != m->iters)
                return HS_ERR(
                    -EINVAL, "lr schedule '%s': milestones mix epochs and iterations ('it')", spec);
            if (!(m->value > prev->value))
                return HS_ERR(-EINVAL, "lr schedule '%s': milestones must increase (%g after %g)",
                              spec, m->value, prev->value);
        }
        s->n_milestones++;
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

int hs_lr_parse(const char *spec, double run_epochs, hs_lr_schedule_t *out)
{
    hs_lr_schedule_t s;
    memset(&s, 0, sizeof s);
    if (!spec || !*spec) return HS_ERR(-EINVAL, "lr schedule: empty (expected " KINDS_HELP ")");
    const char *f[4];
    size_t fl[4];
    int nf = split_fields(spec, f, fl, 3);
    size_t kl = fl[0];
    if (kl == 8 && !strncasecmp(f[0], "constant", 8)) {
        if (nf != 1) return HS_ERR(-EINVAL, "lr schedule '%s': constant takes no parameters", spec);
        s.kind = HS_LR_CONSTANT;
    } else if (kl == 4 && !strncasecmp(f[0], "step", 4)) {
        if (nf < 2 || nf > 3)
            return HS_ERR(-EINVAL, "lr schedule '%s': expected step:M1,M2,...[:GAMMA]", spec);
        s.kind = HS_LR_STEP;
        s.gamma = 0.1;
        HS_TRY(parse_step(spec, f[1], fl[1], &s));
        if (nf == 3 &&
            (parse_number(f[2], fl[2], &s.gamma) < 0 || !(s.gamma > 0) || s.gamma > GAMMA_MAX))
            return HS_ERR(-EINVAL, "lr schedule '%s': gamma '%.*s' is not a number in (0, 100]",
                          spec, (int)fl[2], f[2]);
    } else if (kl == 6 && !strncasecmp(f[0], "cosine", 6)) {
        if (nf > 3)
            return HS_ERR(-EINVAL, "lr schedule '%s': expected cosine[:LENGTH[:FINAL_LR]]", spec);
        s.kind = HS_LR_COSINE;
        if (nf >= 2 && fl[1] > 0) {
            if (parse_span(f[1], fl[1], &s.length) < 0 || !(s.length.value > 0))
                return HS_ERR(-EINVAL,
                              "lr schedule '%s': length '%.*s' is not a number of epochs in (0, "
                              "1e12] (or of iterations with an 'it' suffix)",
                              spec, (int)fl[1], f[1]);
        } else {
            if (!(run_epochs > 0) || !isfinite(run_epochs))
                return HS_ERR(-EINVAL,
                              "lr schedule '%s': cosine needs a length (cosine:EPOCHS) when the "
                              "run's length is unknown",
                              spec);
            s.length.value = run_epochs;
            s.length.iters = 0;
        }
        if (nf == 3 && (parse_number(f[2], fl[2], &s.final_lr) < 0 || !(s.final_lr >= 0) ||
                        s.final_lr > LR_MAX))
            return HS_ERR(-EINVAL, "lr schedule '%s': final lr '%.*s' is not a number in [0, 100]",
                          spec, (int)fl[2], f[2]);
    } else {
        return HS_ERR(-EINVAL, "lr schedule '%s': unknown kind '%.*s' (expected " KINDS_HELP ")",
                      spec, (int)kl, f[0]);
    }
    *out = s;
    return 0;
}

int hs_lr_set_warmup(hs_lr_schedule_t *s, const char *spec)
{
    hs_lr_span_t w;
    if (!spec || parse_span(spec, strlen(spec), &w) < 0)
        return HS_ERR(
            -EINVAL,
            "warm-up '%s': expected a number of epochs in [0, 1e12] (\"5\", \"0.5\") or of "
            "iterations with an 'it' suffix (\"500it\")",
            spec ? spec : "(null)");
    s->warmup = w;
    return 0;
}

/* Has time `pos` (in iterations, fractional allowed) reached span m? Epoch spans compare in
 * epochs so that decimal milestones ("0.3") fall exactly where iteration / ipe says. */
static int reached(double pos, double ipe, hs_lr_span_t m)
{
    return m.iters ? pos >= m.value : pos / ipe >= m.value;
}

static double main_lr(const hs_lr_schedule_t *s, double pos, double ipe, double base)
{
    switch (s->kind) {
    case HS_LR_STEP: {
        double lr = base;
        for (int i = 0; i < s->n_milestones; i++)
            if (reached(pos, ipe, s->milestones[i])) lr *= s->gamma;
        return lr;
    }
    case HS_LR_COSINE: {
        double t = s->length.iters ? pos / s->length.value : pos / ipe / s->length.value;
        if (t >= 1.0) return s->final_lr;
        return s->final_lr + (base - s->final_lr) * 0.5 * (1.0 + cos(M_PI * t));
    }
    case HS_LR_CONSTANT:
    default:
        return base;
    }
}

double hs_lr_at(const hs_lr_schedule_t *s, long iteration, long iters_per_epoch, double base_lr)
{
    double ipe = iters_per_epoch < 1 ? 1.0 : (double)iters_per_epoch;
    double pos = iteration < 0 ? 0.0 : (double)iteration;
    double w = s->warmup.iters ? s->warmup.value : s->warmup.value * ipe; /* iterations */
    if (w > 0 && pos < w) {
        double target = main_lr(s, w, ipe, base_lr);
        return target * (pos + 1.0) / (w + 1.0);
    }
    return main_lr(s, pos, ipe, base_lr);
}

/* Shortest "%g" that reads back as the same double. */
static int fmt_double(char *buf, size_t len, double v)
{
    char tmp[40];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    return snprintf(buf, len, "%s", tmp);
}

int hs_lr_format_span(hs_lr_span_t span, char *buf, size_t len)
{
    char num[40];
    fmt_double(num, sizeof num, span.value);
    return snprintf(buf, len, "%s%s", num, span.iters ? "it" : "");
}

int hs_lr_format(const hs_lr_schedule_t *s, char *buf, size_t len)
{
    char tmp[HS_LR_SPEC_MAX], num[48];
    size_t at = 0;
#define PUT(...)                                                                                   \
    at += (size_t)snprintf(tmp + at, at < sizeof tmp ? sizeof tmp - at : 0, __VA_ARGS__)
    switch (s->kind) {
    case HS_LR_STEP:
        PUT("step:");
        for (int i = 0; i < s->n_milestones; i++) {
            hs_lr_format_span(s->milestones[i], num, sizeof num);
            PUT("%s%s", i ? "," : "", num);
        }
        fmt_double(num, sizeof num, s->gamma);
        PUT(":%s", num);
        break;
    case HS_LR_COSINE:
        hs_lr_format_span(s->length, num, sizeof num);
        PUT("cosine:%s", num);
        fmt_double(num, sizeof num, s->final_lr);
        PUT(":%s", num);
        break;
    case HS_LR_CONSTANT:
    default:
        PUT("constant");
        break;
    }
#undef PUT
    return snprintf(buf, len, "%s", tmp);
}
