/*
 * tests/fuzz/fuzz_data_spec.c — --data specs (data/spec.c: hs_data_spec_parse), and the
 * synthetic sets a small accepted spec builds (data/synthetic.c).
 *
 * Input: the spec text. mnist, cifar10, digits and npy specs are parsed but not loaded (they
 * name files; the readers have their own harnesses). Invariants: an accepted spec has sizes in
 * range; a loaded set has n samples of dim features, labels in [0, classes), finite features.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

static void check_set(const hs_dataset_t *d)
{
    FZ_CHECK(d->n >= 0 && d->dim == (int64_t)d->c * d->h * d->w, "n %lld dim %lld", (long long)d->n,
             (long long)d->dim);
    FZ_CHECK(hs_dataset_check_labels(d) == 0, "labels: %s", hs_last_error());
    for (int64_t i = 0; i < d->n * d->dim; i++)
        FZ_CHECK(isfinite(d->x[i]), "feature %lld is %g", (long long)i, d->x[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    char *spec = fz_rest_str(&in);
    hs_data_spec_t s;
    if (hs_data_spec_parse(spec, &s) == 0) {
        int load = 0;
        if (s.kind == HS_DATA_GAUSS) {
            const hs_gauss_opts_t *g = &s.gauss;
            FZ_CHECK(g->dim >= 1 && g->classes >= 2 && g->n_train >= 1 && g->n_test >= 0,
                     "gauss dim %d classes %d train %lld test %lld", g->dim, g->classes,
                     (long long)g->n_train, (long long)g->n_test);
            load = (double)g->dim * (double)(g->n_train + g->n_test + g->classes) <= 20000 &&
                   (g->classes <= g->dim || g->bayes_samples <= 2000);
        } else if (s.kind == HS_DATA_TEACHER) {
            const hs_teacher_opts_t *t = &s.teacher;
            FZ_CHECK(t->dim >= 1 && t->hidden >= 1 && t->classes >= 2 && t->n_train >= 1 &&
                         t->n_test >= 0,
                     "teacher dim %d hidden %d classes %d train %lld test %lld", t->dim, t->hidden,
                     t->classes, (long long)t->n_train, (long long)t->n_test);
            load = (double)t->dim * (double)t->hidden <= 2000 &&
                   (double)t->dim * (double)(t->n_train + t->n_test) <= 20000 &&
                   (double)t->hidden * t->classes <= 2000;
        } else {
            FZ_CHECK(s.kind == HS_DATA_MNIST || s.kind == HS_DATA_CIFAR10 ||
                         s.kind == HS_DATA_DIGITS || s.kind == HS_DATA_NPY,
                     "kind %d", (int)s.kind);
            FZ_CHECK(s.kind != HS_DATA_NPY || s.classes == 0 ||
                         (s.classes >= 2 && s.classes <= 65536),
                     "npy classes %d", s.classes);
            FZ_CHECK(s.kind != HS_DATA_DIGITS || s.size == 8 || s.size == 28, "digits size %d",
                     s.size);
            FZ_CHECK(memchr(s.dir, 0, sizeof s.dir) != NULL, "dir not terminated");
            FZ_CHECK(s.n_train >= 0 && s.n_test >= 0, "train %lld test %lld", (long long)s.n_train,
                     (long long)s.n_test);
        }
        if (load) {
            hs_dataset_t train, test;
            if (hs_data_spec_load(&s, 1, &train, &test) == 0) {
                check_set(&train);
                check_set(&test);
            }
            hs_dataset_free(&train);
            hs_dataset_free(&test);
        }
    }
    free(spec);
    return 0;
}
