/* bench/bench_step.c — `hearsay bench step`: median time of one training step (forward +
 * backward + SGD-momentum update) of a model, optionally beside PyTorch doing the same step
 * with the same thread count and OpenBLAS environment (bench/torch_step.py). */
#include "bench/bench_util.h"
#include "hearsay/common.h"
#include "hearsay/options.h"
#include "hearsay/nn.h"
#include "hearsay/optim.h"
#include "hearsay/rng.h"
#include "tools/commands.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const hs_option_t step_options[] = {
    {.name = "model",
     .type = HS_OPT_STRING,
     .def = "mlp:784-1024-1024-10",
     .metavar = "SPEC",
     .group = "Benchmark",
     .help = "model spec (inputs are C*H*W = --input values, flat)"},
    {.name = "input",
     .type = HS_OPT_STRING,
     .def = "auto",
     .metavar = "CxHxW",
     .help = "input shape (auto: 1x28x28 for lenet5, 3x32x32 for resnet20(-fixup), else the spec's "
             "IN)"},
    {.name = "classes",
     .type = HS_OPT_INT,
     .def = "10",
     .range = "[2, 100000]",
     .help = "number of classes"},
    {.name = "batch",
     .type = HS_OPT_INT,
     .def = "128",
     .range = "[1, 65536]",
     .help = "batch size"},
    {.name = "threads",
     .type = HS_OPT_INT,
     .def = "1",
     .range = "[1, 1024]",
     .help = "CPU threads: OpenBLAS's and the kernels' worker threads (and the reference's)"},
    {.name = "device",
     .type = HS_OPT_STRING,
     .def = "cpu",
     .metavar = "DEV",
     .help = "cpu, cuda, cuda:N, emu"},
    {.name = "precision",
     .type = HS_OPT_ENUM,
     .def = "fp32",
     .choices = "fp32|bf16|fp16",
     .help = "the matrix products' operands (as hearsay train --precision; the largest product "
             "is timed in it too; fp16 without loss scaling here); the reference uses "
             "torch.autocast"},
    {.name = "tf32",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "TF32 for fp32 products (and in the reference, matmuls and cuDNN; off otherwise)"},
    {.name = "reps",
     .type = HS_OPT_INT,
     .def = "50",
     .range = "[1, 100000]",
     .help = "timed steps (the median is reported)"},
    {.name = "warmup",
     .type = HS_OPT_INT,
     .def = "10",
     .range = "[0, 100000]",
     .help = "untimed steps first (and untimed runs of the largest matrix product before "
             "it is timed)"},
    {.name = "reference",
     .type = HS_OPT_ENUM,
     .def = "none",
     .choices = "none|torch",
     .help = "also run PyTorch's same step on the same device (/usr/bin/python3, python3-torch; "
             "HS_PYTHON names another interpreter) and print the ratio"},
    {.name = "json",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "one JSON object per measurement"},
};

static const hs_cfg_spec_t step_spec = {
    .usage = "hearsay bench step [OPTIONS]",
    .summary = "Median time of one training step: forward, softmax cross-entropy, backward and\n"
               "an SGD step with momentum 0.9, on random inputs. The report names the thread\n"
               "count, OPENBLAS_CORETYPE and the core OpenBLAS selected. Compare like with like:\n"
               "--reference torch runs PyTorch in the same environment, in the same run.",
    .options = step_options,
    .n_options = HS_ARRAY_LEN(step_options),
};

static int input_shape(const char *text, const char *model, int *c, int *h, int *w)
{
    if (strcmp(text, "auto") != 0) {
        if (sscanf(text, "%dx%dx%d", c, h, w) != 3 || *c < 1 || *h < 1 || *w < 1)
            return HS_ERR(-EINVAL, "--input: '%s' is not CxHxW (e.g. 3x32x32)", text);
        return 0;
    }
    *c = 1, *h = 1, *w = 1;
    if (!strcmp(model, "lenet5"))
        *h = *w = 28;
    else if (!strcmp(model, "resnet20") || !strcmp(model, "resnet20-fixup"))
        *c = 3, *h = *w = 32;
    else {
        const char *colon = strchr(model, ':');
        long in = colon ? strtol(colon + 1, NULL, 10) : 0;
        if (in < 1)
            return HS_ERR(
                -EINVAL, "--input: cannot infer the input size of '%s'; give --input CxHxW", model);
        *w = (int)in;
    }
    return 0;
}

/* Locate bench/torch_step.py: the source tree (build-time), then the installed copy. */
static const char *torch_script(void)
{
    static const char *candidates[] = {HS_SRCDIR "/bench/torch_step.py",
                                       HS_PKGDATADIR "/torch_step.py"};
    for (size_t i = 0; i < HS_ARRAY_LEN(candidates); i++)
        if (access(candidates[i], R_OK) == 0) return candidates[i];
    return NULL;
}

/* The model's matrix products at this batch: the forward FLOPs of all of them (*fwd_flops) and
 * the largest one, timed alone through the backend's own gemm (cuBLAS, OpenBLAS) on random
 * data: the throughput the library reaches on that shape is the ceiling the step is set beside.
 * Warm-up and timed runs as many as the step's (--warmup, --reps). */
static int time_largest_gemm(hs_kernels_t *k, const hs_model_t *m, int batch, int warmup, int reps,
                             hs_gemm_shape_t *big, double *fwd_flops, double *gemm_ms)
{
    int n = hs_model_gemms(m, batch, NULL, 0);
    *fwd_flops = 0, *gemm_ms = 0;
    memset(big, 0, sizeof *big);
    if (n <= 0) return 0;
    hs_gemm_shape_t *g = hs_calloc((size_t)n, sizeof *g, "matrix-product shapes");
    if (!g) return -ENOMEM;
    hs_model_gemms(m, batch, g, n);
    for (int i = 0; i < n; i++) {
        double f = 2.0 * g[i].M * g[i].N * g[i].K, fb = 2.0 * big->M * big->N * big->K;
        *fwd_flops += f;
        /* equal work (a ResNet's stages): the widest product, the one a GEMM runs best */
        if (f > fb * (1 + 1e-9) || (f >= fb * (1 - 1e-9) && g[i].N * g[i].K > big->N * big->K))
            *big = g[i];
    }
    free(g);
    size_t na = (size_t)big->M * big->K, nb = (size_t)big->K * big->N, nc = (size_t)big->M * big->N;
    float *h = hs_malloc(HS_MAX(na, nb) * sizeof *h, "gemm operands");
    float *a = NULL, *b = NULL, *c = NULL;
    double *t = hs_malloc((size_t)reps * sizeof *t, "gemm timings");
    int rc = -ENOMEM;
    if (!h || !t) goto out;
    hs_rng_t r;
    hs_rng_seed(&r, 2, 0);
    for (size_t i = 0; i < HS_MAX(na, nb); i++) h[i] = (float)hs_rng_normal(&r);
    if ((rc = k->ops->alloc(k, na * sizeof *a, (void **)&a)) < 0 ||
        (rc = k->ops->alloc(k, nb * sizeof *b, (void **)&b)) < 0 ||
        (rc = k->ops->alloc(k, nc * sizeof *c, (void **)&c)) < 0 ||
        (rc = k->ops->to_device(k, a, h, na * sizeof *a)) < 0 ||
        (rc = k->ops->to_device(k, b, h, nb * sizeof *b)) < 0)
        goto out;
    int M = (int)big->M, N = (int)big->N, K = (int)big->K;
    for (int i = 0; i < warmup + reps; i++) {
        double t0 = hs_now();
        if ((rc = k->ops->gemm(k, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N)) < 0 ||
            (rc = k->ops->sync(k)) < 0)
            goto out;
        if (i >= warmup) t[i - warmup] = (hs_now() - t0) * 1e3;
    }
    *gemm_ms = hs_bench_median(t, (size_t)reps);
    rc = 0;
out:
    k->ops->free(k, a);
    k->ops->free(k, b);
    k->ops->free(k, c);
    free(h);
    free(t);
    return rc;
}

static int run_reference(const char *model, const char *device, hs_precision_t prec, int tf32,
                         int batch, int threads, int reps, int warmup, double *median_ms, int json)
{
    const char *script = torch_script();
    if (!script) return HS_ERR(-ENOENT, "bench/torch_step.py not found (source tree or install)");
    /* HS_PYTHON: another interpreter with PyTorch (a GPU machine's CUDA build, say) */
    const char *py = getenv("HS_PYTHON");
    if (!py || !*py) py = "/usr/bin/python3";
    if (strchr(py, '\'') || strchr(model, '\'') || strchr(device, '\''))
        return HS_ERR(-EINVAL, "HS_PYTHON, --model and --device must not contain a quote");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "OMP_NUM_THREADS=%d '%s' '%s' --model '%s' --device '%s' --batch %d --threads %d "
             "--reps %d --warmup %d --precision %s%s",
             threads, py, script, model, device, batch, threads, reps, warmup,
             hs_precision_name(prec), tf32 ? " --tf32" : "");
    FILE *p = popen(cmd, "r");
    if (!p) return HS_ERR(-errno, "cannot start the PyTorch reference: %s", strerror(errno));
    char line[4096] = "";
    char *got = fgets(line, sizeof line, p);
    int st = pclose(p);
    if (!got || st != 0)
        return HS_ERR(-EIO,
                      "the PyTorch reference failed (exit status %d; its reason, if any, is "
                      "above); is python3-torch installed? (apt-get install python3-torch)",
                      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    line[strcspn(line, "\n")] = '\0';
    const char *m = strstr(line, "\"median_ms\": ");
    if (!m) return HS_ERR(-EIO, "unexpected output from the PyTorch reference: %s", line);
    *median_ms = strtod(m + strlen("\"median_ms\": "), NULL);
    if (json)
        printf("%s\n", line);
    else
        printf("pytorch  %-24s batch %4d  threads %d  median %8.3f ms  (%s, %s%s)\n", model, batch,
               threads, *median_ms, device, hs_precision_name(prec), tf32 ? ", tf32" : "");
    return 0;
}

int hs_bench_step(int argc, char **argv)
{
    hs_cfg_t *cfg = NULL;
    hs_kernels_t *k = NULL;
    hs_model_t *m = NULL;
    hs_sgd_t *opt = NULL;
    float *x = NULL, *xd = NULL;
    int32_t *y = NULL, *yd = NULL;
    double *times = NULL;
    int status = 1;
    if (hs_cfg_create(&cfg, &step_spec) < 0) goto fail;
    int rc = hs_cfg_parse_args(cfg, argc, argv);
    if (rc == HS_CFG_HELP) {
        hs_cfg_print_help(cfg, stdout);
        hs_cfg_free(&cfg);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "hearsay bench step: %s\n", hs_last_error());
        hs_cfg_free(&cfg);
        return 2;
    }
    const char *model = hs_cfg_str(cfg, "model");
    int batch = (int)hs_cfg_int(cfg, "batch"), threads = (int)hs_cfg_int(cfg, "threads");
    int reps = (int)hs_cfg_int(cfg, "reps"), warmup = (int)hs_cfg_int(cfg, "warmup");
    int classes = (int)hs_cfg_int(cfg, "classes"), json = hs_cfg_bool(cfg, "json");
    int c, h, w;
    if (input_shape(hs_cfg_str(cfg, "input"), model, &c, &h, &w) < 0) goto fail;
    hs_device_t dev;
    int dev_index;
    if (hs_device_parse(hs_cfg_str(cfg, "device"), &dev, &dev_index) < 0) goto fail;
    if (hs_kernels_open(&k, dev, dev_index, threads) < 0) goto fail;
    hs_precision_t prec = (hs_precision_t)hs_cfg_enum(cfg, "precision");
    int tf32 = hs_cfg_bool(cfg, "tf32");
    if (hs_kernels_set_precision(k, prec, tf32) < 0) goto fail;
    if (hs_model_create(&m, k, model, c, h, w, classes, batch, 1) < 0) goto fail;
    hs_sgd_config_t sc = {.momentum = 0.9f};
    size_t np = hs_model_num_params(m), d = (size_t)c * h * w;
    if (hs_sgd_open(&opt, k, np, &sc) < 0) goto fail;
    x = hs_malloc((size_t)batch * d * sizeof *x, "inputs");
    y = hs_malloc((size_t)batch * sizeof *y, "labels");
    times = hs_malloc((size_t)reps * sizeof *times, "timings");
    if (!x || !y || !times) goto fail;
    hs_rng_t r;
    hs_rng_seed(&r, 1, 0);
    for (size_t i = 0; i < (size_t)batch * d; i++) x[i] = (float)hs_rng_normal(&r);
    for (int i = 0; i < batch; i++) y[i] = (int32_t)hs_rng_below(&r, (uint64_t)classes);
    if (k->ops->alloc(k, (size_t)batch * d * sizeof *x, (void **)&xd) < 0 ||
        k->ops->alloc(k, (size_t)batch * sizeof *y, (void **)&yd) < 0 ||
        k->ops->to_device(k, xd, x, (size_t)batch * d * sizeof *x) < 0 ||
        k->ops->to_device(k, yd, y, (size_t)batch * sizeof *y) < 0)
        goto fail;
    for (int i = 0; i < warmup + reps; i++) {
        double loss, t0 = hs_now();
        if (hs_model_train_step(m, xd, yd, batch, &loss, NULL) < 0 ||
            hs_sgd_step(opt, hs_model_params(m), hs_model_grads(m), 0.01f) < 0 ||
            k->ops->sync(k) < 0)
            goto fail;
        if (i >= warmup) times[i - warmup] = (hs_now() - t0) * 1e3;
    }
    double min = times[0];
    for (int i = 1; i < reps; i++) min = HS_MIN(min, times[i]);
    double med = hs_bench_median(times, (size_t)reps);
    hs_gemm_shape_t big;
    double fwd_flops, gemm_ms;
    if (time_largest_gemm(k, m, batch, warmup, reps, &big, &fwd_flops, &gemm_ms) < 0) goto fail;
    /* forward, data gradient and weight gradient: three products of each shape */
    double step_tflops = 3.0 * fwd_flops / (med * 1e-3) / 1e12;
    double gemm_tflops = gemm_ms > 0 ? 2.0 * big.M * big.N * big.K / (gemm_ms * 1e-3) / 1e12 : 0;
    double frac = gemm_tflops > 0 ? step_tflops / gemm_tflops : 0;
    if (json)
        printf(
            "{\"bench\": \"step\", \"impl\": \"hearsay\", \"device\": \"%s\", \"model\": \"%s\", "
            "\"precision\": \"%s\", \"tf32\": %s, \"batch\": %d, \"threads\": %d, "
            "\"openblas_coretype\": \"%s\", "
            "\"openblas_core\": \"%s\", \"params\": %zu, \"reps\": %d, \"median_ms\": %.4f, "
            "\"min_ms\": %.4f, \"step_gemm_gflop\": %.4f, \"step_tflops\": %.4f, "
            "\"largest_gemm\": \"%s\", \"gemm_mnk\": [%ld, %ld, %ld], \"gemm_ms\": %.4f, "
            "\"gemm_tflops\": %.4f, \"fraction_of_gemm\": %.4f}\n",
            k->ops->name, model, hs_precision_name(prec), tf32 ? "true" : "false", batch, threads,
            hs_bench_coretype_env(), hs_bench_blas_core(), np, reps, med, min,
            3.0 * fwd_flops / 1e9, step_tflops, big.name, big.M, big.N, big.K, gemm_ms, gemm_tflops,
            frac);
    else {
        printf("hearsay  %-24s batch %4d  threads %d  median %8.3f ms  (min %.3f; %s, %s%s; "
               "OPENBLAS_CORETYPE=%s, core %s)\n",
               model, batch, threads, med, min, k->ops->name, hs_precision_name(prec),
               tf32 ? ", tf32" : "", hs_bench_coretype_env(), hs_bench_blas_core());
        printf("gemm     step: %.3f GFLOP of matrix products, %.3f TFLOP/s; largest product %s "
               "(%ldx%ldx%ld) alone: %.4f ms, %.3f TFLOP/s; step / product = %.2f\n",
               3.0 * fwd_flops / 1e9, step_tflops, big.name, big.M, big.N, big.K, gemm_ms,
               gemm_tflops, frac);
    }
    fflush(stdout);
    if (hs_cfg_enum(cfg, "reference") == 1) {
        double ref;
        if (run_reference(model, hs_cfg_str(cfg, "device"), prec, tf32, batch, threads, reps,
                          warmup, &ref, json) < 0)
            goto fail;
        if (json)
            printf(
                "{\"bench\": \"step\", \"compare\": \"pytorch_over_hearsay\", \"ratio\": %.3f}\n",
                ref / med);
        else
            printf("ratio    pytorch / hearsay = %.2f (> 1: hearsay is faster)\n", ref / med);
    }
    status = 0;
    goto out;
fail:
    fprintf(stderr, "hearsay bench step: %s\n", hs_last_error());
out:
    if (k) {
        k->ops->free(k, xd);
        k->ops->free(k, yd);
    }
    free(x);
    free(y);
    free(times);
    hs_sgd_close(&opt);
    hs_model_free(&m);
    hs_kernels_close(&k);
    hs_cfg_free(&cfg);
    return status;
}
