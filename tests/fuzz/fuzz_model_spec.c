/*
 * tests/fuzz/fuzz_model_spec.c — model specs (nn/spec.c: hs_model_parse_spec), and the models
 * a small accepted spec builds (nn/model.c, nn/layers.c on the CPU kernels).
 *
 * Input: one byte each for the data shape (channels 1..4, height and width 1..40, classes
 * 1..20), one for the batch (1..3), then the spec text. Invariants (hearsay/nn.h): a model built
 * from an accepted spec has the parameter count the parser announced; its views are in layer
 * order, contiguous and cover the buffer; one training step on a small model returns a finite
 * loss and a correct count in [0, B].
 */
#include "hearsay/common.h"
#include "hearsay/kernels.h"
#include "hearsay/nn.h"
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

static hs_kernels_t *k;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (hs_kernels_open(&k, HS_DEV_CPU, 0, 1) != 0) {
        fprintf(stderr, "fuzz_model_spec: %s\n", hs_last_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    int c = fz_range(&in, 1, 4), h = fz_range(&in, 1, 40), w = fz_range(&in, 1, 40);
    int classes = fz_range(&in, 1, 20), B = fz_range(&in, 1, 3);
    char *spec = fz_rest_str(&in);
    size_t np = 0;
    if (hs_model_parse_spec(spec, c, h, w, classes, &np) == 0 && np <= 200000) {
        hs_model_t *m = NULL;
        if (hs_model_create(&m, k, spec, c, h, w, classes, B, 42) == 0) {
            FZ_CHECK(hs_model_num_params(m) == np, "parse said %zu parameters, model has %zu", np,
                     hs_model_num_params(m));
            FZ_CHECK(hs_model_input_size(m) == c * h * w, "input size %d", hs_model_input_size(m));
            FZ_CHECK(hs_model_classes(m) == classes, "classes %d", hs_model_classes(m));
            size_t at = 0;
            int layer = -1;
            for (int i = 0; i < hs_model_num_views(m); i++) {
                const hs_param_view_t *v = hs_model_view(m, i);
                FZ_CHECK(v && v->offset == at && v->count > 0, "view %d at %zu", i, at);
                FZ_CHECK(v->layer >= layer, "views out of layer order");
                FZ_CHECK(v->ndim >= 1 && v->ndim <= 4, "view %d ndim %d", i, v->ndim);
                size_t prod = 1;
                for (int d = 0; d < v->ndim; d++) prod *= (size_t)v->shape[d];
                FZ_CHECK(prod == v->count, "view %s: shape holds %zu, count %zu", v->name, prod,
                         v->count);
                layer = v->layer;
                at += v->count;
            }
            FZ_CHECK(at == np, "views cover %zu of %zu parameters", at, np);
            FZ_CHECK(hs_model_view(m, hs_model_num_views(m)) == NULL, "view past the end");
            if (np <= 50000 && (size_t)c * h * w * B <= 20000) {
                float *x = malloc(sizeof(float) * (size_t)(c * h * w * B));
                int32_t y[3];
                if (!x) abort();
                for (int i = 0; i < c * h * w * B; i++) x[i] = (float)((i * 37) % 11) / 11.0f;
                for (int b = 0; b < B; b++) y[b] = b % classes;
                double loss = NAN;
                int correct = -1;
                if (hs_model_train_step(m, x, y, B, &loss, &correct) == 0) {
                    FZ_CHECK(isfinite(loss), "loss %g", loss);
                    FZ_CHECK(correct >= 0 && correct <= B, "correct %d of %d", correct, B);
                }
                free(x);
            }
            FILE *f = fopen("/dev/null", "w");
            if (!f) abort();
            hs_model_print(m, f);
            fclose(f);
        }
        hs_model_free(&m);
    }
    free(spec);
    return 0;
}
