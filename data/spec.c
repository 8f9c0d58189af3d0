/*
 * data/spec.c — the --data spec string: KIND[:key=value,...] (grammar in hearsay/data.h and
 * hs_data_spec_help()), parsed strictly, then loaded into a train and a test set.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *hs_data_spec_help(void)
{
    return "data spec: KIND[:key=value,...]\n"
           "  gauss      Gaussian mixture with a known Bayes accuracy (nearest class mean)\n"
           "             keys: dim=784 classes=10 train=20000 test=2000 sep=6 (distance between\n"
           "             class means) noise=1 (per-coordinate std) seed=S mc=1000000 (Monte-Carlo\n"
           "             draws, used only when classes > dim)\n"
           "  teacher    inputs N(0, I) labelled by a fixed random teacher MLP (tanh)\n"
           "             keys: dim=784 hidden=64 classes=10 train=20000 test=2000 noise=0 (label\n"
           "             noise: Bayes accuracy 1 - noise) seed=S\n"
           "  mnist:DIR  DIR/train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-\n"
           "             ubyte, t10k-labels-idx1-ubyte (plain or .gz)\n"
           "  cifar10:DIR  DIR/data_batch_1.bin .. data_batch_5.bin, test_batch.bin (binary "
           "version; plain or .gz)\n"
           "             keys for mnist and cifar10: norm=known|train|none (standardise per "
           "channel\n"
           "             with the published or the train-set statistics, or keep [0, 1]), train=N\n"
           "             test=N (keep the first N samples), dir=DIR\n"
           "  digits[:PATH]  scikit-learn's 1797 8x8 handwritten digits (digits.csv.gz; default:\n"
           "             where Debian's python3-sklearn puts it); fixed split: sample i is test\n"
           "             when i % 5 == 4 (1438 train, 359 test); keys: size=28 (upscaled\n"
           "             bilinearly, for lenet5; default) or size=8 (native), norm=train|none\n"
           "             (default train), train=N test=N, path=PATH\n"
           "  npy:DIR    NumPy arrays saved with np.save: DIR/x_train.npy, y_train.npy,\n"
           "             x_test.npy, y_test.npy; x float32, float64 or uint8 (/255) of shape\n"
           "             (N, D), (N, H, W) or (N, C, H, W); y integers of shape (N)\n"
           "             keys: classes=K (default: the largest label + 1), norm=none|train\n"
           "             (default none: the arrays as they are), train=N test=N, dir=DIR\n"
           "  examples: gauss   gauss:dim=100,classes=5,sep=5   teacher:hidden=32,noise=0.1\n"
           "            mnist:data/mnist   cifar10:data/cifar-10-batches-bin,norm=train\n"
           "            digits   digits:size=8   digits:/path/to/digits.csv.gz\n"
           "            npy:/path/to/arrays,classes=10\n"
           "  seed= fixes the data; without it the run's --seed is used.";
}

#define MAX_ITEMS 32

typedef struct parser {
    const char *spec; /* the whole string, for messages */
    const char *kind;
    char seen[MAX_ITEMS][32];
    int nseen;
} parser_t;

static int key_once(parser_t *p, const char *key)
{
    for (int i = 0; i < p->nseen; i++)
        if (strcmp(p->seen[i], key) == 0)
            return HS_ERR(-EINVAL, "data spec '%s': key '%s' given twice", p->spec, key);
    if (p->nseen < MAX_ITEMS) snprintf(p->seen[p->nseen++], sizeof(p->seen[0]), "%s", key);
    return 0;
}

static int get_long(parser_t *p, const char *key, const char *val, long lo, long hi, long *out)
{
    char what[600];
    snprintf(what, sizeof(what), "data spec '%.400s': %s", p->spec, key);
    return hs_parse_long(val, lo, hi, what, out);
}

static int get_double(parser_t *p, const char *key, const char *val, double lo, double hi,
                      double *out)
{
    char what[600];
    snprintf(what, sizeof(what), "data spec '%.400s': %s", p->spec, key);
    return hs_parse_double(val, lo, hi, what, out);
}

static int unknown_key(parser_t *p, const char *key, const char *known)
{
    return HS_ERR(-EINVAL, "data spec '%s': unknown key '%s' for %s (known: %s)", p->spec, key,
                  p->kind, known);
}

static int set_gauss(parser_t *p, hs_data_spec_t *o, const char *key, const char *val)
{
    hs_gauss_opts_t *g = &o->gauss;
    long v;
    if (strcmp(key, "dim") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 24, &v));
        g->dim = (int)v;
    } else if (strcmp(key, "classes") == 0) {
        HS_TRY(get_long(p, key, val, 2, 1L << 16, &v));
        g->classes = (int)v;
    } else if (strcmp(key, "train") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 31, &v));
        g->n_train = v;
    } else if (strcmp(key, "test") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 31, &v));
        g->n_test = v;
    } else if (strcmp(key, "mc") == 0) {
        HS_TRY(get_long(p, key, val, 1, 10000000000L, &v));
        g->bayes_samples = v;
    } else if (strcmp(key, "sep") == 0) {
        HS_TRY(get_double(p, key, val, 1e-9, 1e6, &g->sep));
    } else if (strcmp(key, "noise") == 0) {
        HS_TRY(get_double(p, key, val, 1e-9, 1e6, &g->noise));
    } else {
        return unknown_key(p, key, "dim, classes, train, test, sep, noise, seed, mc");
    }
    return 0;
}

static int set_teacher(parser_t *p, hs_data_spec_t *o, const char *key, const char *val)
{
    hs_teacher_opts_t *t = &o->teacher;
    long v;
    if (strcmp(key, "dim") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 24, &v));
        t->dim = (int)v;
    } else if (strcmp(key, "hidden") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 20, &v));
        t->hidden = (int)v;
    } else if (strcmp(key, "classes") == 0) {
        HS_TRY(get_long(p, key, val, 2, 1L << 16, &v));
        t->classes = (int)v;
    } else if (strcmp(key, "train") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 31, &v));
        t->n_train = v;
    } else if (strcmp(key, "test") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 31, &v));
        t->n_test = v;
    } else if (strcmp(key, "noise") == 0) {
        HS_TRY(get_double(p, key, val, 0.0, 0.999999, &t->label_noise));
    } else {
        return unknown_key(p, key, "dim, hidden, classes, train, test, noise, seed");
    }
    return 0;
}

static int set_files(parser_t *p, hs_data_spec_t *o, const char *key, const char *val)
{
    long v;
    const int digits = o->kind == HS_DATA_DIGITS, npy = o->kind == HS_DATA_NPY;
    if (npy && strcmp(key, "classes") == 0) {
        HS_TRY(get_long(p, key, val, 2, 65536, &v));
        o->classes = (int)v;
    } else if (digits && strcmp(key, "size") == 0) {
        HS_TRY(get_long(p, key, val, 8, 28, &v));
        if (v != 8 && v != 28)
            return HS_ERR(-EINVAL, "data spec '%s': size %ld is not 28 (upscaled) or 8 (native)",
                          p->spec, v);
        o->size = (int)v;
    } else if (strcmp(key, digits ? "path" : "dir") == 0) {
        if (!*val) return HS_ERR(-EINVAL, "data spec '%s': empty %s", p->spec, key);
        if (strlen(val) >= sizeof(o->dir))
            return HS_ERR(-EINVAL, "data spec '%s': %s name too long", p->spec, key);
        snprintf(o->dir, sizeof(o->dir), "%s", val);
    } else if (strcmp(key, "norm") == 0) {
        if (strcmp(val, "known") == 0)
            o->norm = HS_NORM_KNOWN;
        else if (strcmp(val, "train") == 0)
            o->norm = HS_NORM_TRAIN;
        else if (strcmp(val, "none") == 0)
            o->norm = HS_NORM_NONE;
        else
            return HS_ERR(-EINVAL, "data spec '%s': norm '%s' is not one of %s", p->spec, val,
                          digits || npy ? "train, none" : "known, train, none");
        if ((digits || npy) && o->norm == HS_NORM_KNOWN)
            return HS_ERR(-EINVAL,
                          "data spec '%s': norm=known: %s no published statistics "
                          "(use train or none)",
                          p->spec, digits ? "the digits have" : "your arrays have");
    } else if (strcmp(key, "train") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 31, &v));
        o->n_train = v;
    } else if (strcmp(key, "test") == 0) {
        HS_TRY(get_long(p, key, val, 1, 1L << 31, &v));
        o->n_test = v;
    } else {
        return unknown_key(p, key,
                           digits ? "path, size, norm, train, test"
                           : npy  ? "dir, classes, norm, train, test"
                                  : "dir, norm, train, test");
    }
    return 0;
}

int hs_data_spec_parse(const char *spec, hs_data_spec_t *out)
{
    memset(out, 0, sizeof(*out));
    hs_gauss_defaults(&out->gauss);
    hs_teacher_defaults(&out->teacher);
    out->norm = HS_NORM_KNOWN;
    if (!spec || !*spec) return HS_ERR(-EINVAL, "data spec is empty (try 'gauss')");
    char buf[2048];
    if (strlen(spec) >= sizeof(buf)) return HS_ERR(-EINVAL, "data spec is too long");
    snprintf(buf, sizeof(buf), "%s", spec);
    char *args = strchr(buf, ':');
    if (args) *args++ = '\0';
    parser_t p = {.spec = spec, .kind = buf};
    if (strcmp(buf, "gauss") == 0)
        out->kind = HS_DATA_GAUSS;
    else if (strcmp(buf, "teacher") == 0)
        out->kind = HS_DATA_TEACHER;
    else if (strcmp(buf, "mnist") == 0)
        out->kind = HS_DATA_MNIST;
    else if (strcmp(buf, "cifar10") == 0)
        out->kind = HS_DATA_CIFAR10;
    else if (strcmp(buf, "digits") == 0)
        out->kind = HS_DATA_DIGITS;
    else if (strcmp(buf, "npy") == 0)
        out->kind = HS_DATA_NPY;
    else
        return HS_ERR(-EINVAL,
                      "data spec '%s': unknown kind '%s' (expected gauss, teacher, mnist, cifar10, "
                      "digits or npy)",
                      spec, buf);
    const int files = out->kind == HS_DATA_MNIST || out->kind == HS_DATA_CIFAR10 ||
                      out->kind == HS_DATA_DIGITS || out->kind == HS_DATA_NPY;
    if (out->kind == HS_DATA_NPY) out->norm = HS_NORM_NONE;
    if (out->kind == HS_DATA_DIGITS) {
        out->norm = HS_NORM_TRAIN;
        out->size = 28;
    }
    if (args && !*args) return HS_ERR(-EINVAL, "data spec '%s': nothing after ':'", spec);
    int item = 0;
    for (char *tok = args; tok; item++) {
        char *next = strchr(tok, ',');
        if (next) *next++ = '\0';
        if (!*tok) return HS_ERR(-EINVAL, "data spec '%s': empty item", spec);
        char *eq = strchr(tok, '=');
        if (!eq) {
            if (files && item == 0) {
                const char *what = out->kind == HS_DATA_DIGITS ? "path" : "dir";
                HS_TRY(key_once(&p, what));
                HS_TRY(set_files(&p, out, what, tok));
                tok = next;
                continue;
            }
            return HS_ERR(-EINVAL, "data spec '%s': '%s' is not key=value", spec, tok);
        }
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        if (!*key) return HS_ERR(-EINVAL, "data spec '%s': empty key before '='", spec);
        HS_TRY(key_once(&p, key));
        if (strcmp(key, "seed") == 0 && !files) {
            long s;
            HS_TRY(get_long(&p, key, val, 0, 0x7fffffffffffffffL, &s));
            out->has_seed = 1;
            out->seed = (uint64_t)s;
        } else if (out->kind == HS_DATA_GAUSS) {
            HS_TRY(set_gauss(&p, out, key, val));
        } else if (out->kind == HS_DATA_TEACHER) {
            HS_TRY(set_teacher(&p, out, key, val));
        } else {
            HS_TRY(set_files(&p, out, key, val));
        }
        tok = next;
    }
    if (files && out->kind != HS_DATA_DIGITS && !out->dir[0])
        return HS_ERR(-EINVAL, "data spec '%s': %s needs a directory (%s:DIR)", spec, buf, buf);
    if (out->kind == HS_DATA_TEACHER) {
        const double max = (double)(out->teacher.classes - 1) / out->teacher.classes;
        if (out->teacher.label_noise >= max)
            return HS_ERR(-EINVAL, "data spec '%s': noise %g must be below %g for %d classes", spec,
                          out->teacher.label_noise, max, out->teacher.classes);
    }
    return 0;
}

void hs_data_spec_shape(const hs_data_spec_t *spec, int *c, int *h, int *w, int *classes)
{
    *c = *h = 1;
    *classes = 10;
    switch (spec->kind) {
    case HS_DATA_GAUSS:
        *w = spec->gauss.dim;
        *classes = spec->gauss.classes;
        break;
    case HS_DATA_TEACHER:
        *w = spec->teacher.dim;
        *classes = spec->teacher.classes;
        break;
    case HS_DATA_MNIST:
        *h = *w = 28;
        break;
    case HS_DATA_DIGITS:
        *h = *w = spec->size;
        break;
    case HS_DATA_NPY:
        *c = *h = *w = 0;
        *classes = spec->classes;
        break;
    case HS_DATA_CIFAR10:
    default:
        *c = 3;
        *h = *w = 32;
        break;
    }
}

int hs_data_spec_probe(const hs_data_spec_t *spec, int *c, int *h, int *w, int *classes)
{
    hs_data_spec_shape(spec, c, h, w, classes);
    if (spec->kind != HS_DATA_NPY) return 0;
    return hs_npy_probe(spec->dir, spec->classes, c, h, w, classes);
}

/* Keep the first n samples of a loaded file set (0 = all). */
static int keep_first(hs_dataset_t *ds, int64_t n)
{
    if (n <= 0) return 0;
    return hs_dataset_truncate(ds, n);
}

int hs_data_spec_load(const hs_data_spec_t *spec, uint64_t seed, hs_dataset_t *train,
                      hs_dataset_t *test)
{
    const uint64_t s = spec->has_seed ? spec->seed : seed;
    int rc;
    switch (spec->kind) {
    case HS_DATA_GAUSS: {
        hs_gauss_opts_t g = spec->gauss;
        g.seed = s;
        return hs_data_gauss(&g, train, test, NULL);
    }
    case HS_DATA_TEACHER: {
        hs_teacher_opts_t t = spec->teacher;
        t.seed = s;
        return hs_data_teacher(&t, train, test);
    }
    case HS_DATA_MNIST:
    case HS_DATA_CIFAR10: {
        const int mnist = spec->kind == HS_DATA_MNIST;
        /* Read unnormalised, cut to size, then normalise: norm=train sees only what is kept. */
        rc = mnist ? hs_data_mnist(spec->dir, HS_NORM_NONE, train, test)
                   : hs_data_cifar10(spec->dir, HS_NORM_NONE, train, test);
        if (rc < 0) return rc;
        if ((rc = keep_first(train, spec->n_train)) < 0 ||
            (rc = keep_first(test, spec->n_test)) < 0 ||
            (rc = hs_data_normalize(spec->norm, mnist ? hs_mnist_mean : hs_cifar10_mean,
                                    mnist ? hs_mnist_std : hs_cifar10_std, train, test)) < 0) {
            hs_dataset_free(train);
            hs_dataset_free(test);
            return rc;
        }
        return 0;
    }
    case HS_DATA_NPY:
        HS_TRY(hs_data_npy(spec->dir, spec->classes, train, test));
        if ((rc = keep_first(train, spec->n_train)) < 0 ||
            (rc = keep_first(test, spec->n_test)) < 0 ||
            (spec->norm != HS_NORM_NONE &&
             (rc = hs_data_normalize(spec->norm, NULL, NULL, train, test)) < 0)) {
            hs_dataset_free(train);
            hs_dataset_free(test);
            return rc;
        }
        return 0;
    case HS_DATA_DIGITS: {
        char path[sizeof(spec->dir)];
        if (spec->dir[0])
            snprintf(path, sizeof(path), "%s", spec->dir);
        else
            HS_TRY(hs_digits_find(path, sizeof(path)));
        HS_TRY(hs_digits_read(path, spec->size, train, test));
        if ((rc = keep_first(train, spec->n_train)) < 0 ||
            (rc = keep_first(test, spec->n_test)) < 0 ||
            (rc = hs_data_normalize(spec->norm, NULL, NULL, train, test)) < 0) {
            hs_dataset_free(train);
            hs_dataset_free(test);
            return rc;
        }
        return 0;
    }
    }
    return HS_ERR(-EINVAL, "data spec: unknown kind %d", (int)spec->kind);
}

int hs_data_load(const char *spec, uint64_t seed, hs_dataset_t *train, hs_dataset_t *test)
{
    hs_data_spec_t s;
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    HS_TRY(hs_data_spec_parse(spec, &s));
    return hs_data_spec_load(&s, seed, train, test);
}
