/* tools/cmd_train.c — `hearsay train`: options, config file, and the training run. */
#include "hearsay/common.h"
#include "hearsay/config.h"
#include "hearsay/data.h"
#include "hearsay/train.h"
#include "tools/commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const hs_option_t train_options[] = {
    {.name = "model",
     .type = HS_OPT_STRING,
     .def = "mlp:784-1024-1024-10",
     .group = "Model and data",
     .metavar = "SPEC",
     .help = "model: logreg:IN-OUT, mlp:IN-H1-..-OUT, lenet5, resnet20, seq:LAYERS (see README)"},
    {.name = "data",
     .type = HS_OPT_STRING,
     .def = "gauss",
     .metavar = "SPEC",
     .help = "dataset: gauss[:k=v,..], teacher[:..], mnist:DIR, cifar10:DIR (see below)"},
    {.name = "shard",
     .type = HS_OPT_STRING,
     .def = "iid",
     .metavar = "SPEC",
     .help = "how the training set is split over workers: iid, dirichlet:ALPHA[,min=M]"},
    {.name = "device",
     .type = HS_OPT_STRING,
     .def = "cpu",
     .metavar = "DEV",
     .help = "compute device: cpu, cuda, cuda:N"},
    {.name = "threads",
     .type = HS_OPT_INT,
     .def = "0",
     .range = "[0, 1024]",
     .help = "CPU BLAS threads per worker (0: OpenBLAS's default, all cores)"},
    {.name = "epochs",
     .type = HS_OPT_INT,
     .def = "3",
     .range = "[1, 100000]",
     .group = "Training",
     .help = "passes over the (per-worker) training set"},
    {.name = "max-iters",
     .type = HS_OPT_INT,
     .def = "0",
     .range = "[0, )",
     .help = "stop after this many iterations (0: no limit)"},
    {.name = "batch",
     .type = HS_OPT_INT,
     .def = "128",
     .range = "[1, 65536]",
     .help = "batch size per worker"},
    {.name = "lr",
     .type = HS_OPT_DOUBLE,
     .def = "0.05",
     .range = "[0, 100]",
     .help = "base learning rate"},
    {.name = "momentum",
     .type = HS_OPT_DOUBLE,
     .def = "0.9",
     .range = "[0, 1)",
     .help = "SGD momentum (0: plain SGD)"},
    {.name = "nesterov", .type = HS_OPT_BOOL, .def = "false", .help = "Nesterov momentum"},
    {.name = "weight-decay",
     .type = HS_OPT_DOUBLE,
     .def = "5e-4",
     .range = "[0, 1]",
     .help = "L2 weight decay"},
    {.name = "lr-schedule",
     .type = HS_OPT_STRING,
     .def = "constant",
     .metavar = "SPEC",
     .help = "constant, step:E1,E2,..[:GAMMA], cosine[:LENGTH[:FINAL]] (epochs, or Nit)"},
    {.name = "warmup",
     .type = HS_OPT_STRING,
     .def = "0",
     .metavar = "SPAN",
     .help = "linear warm-up length: epochs (5) or iterations (500it); 0 = none"},
    {.name = "seed",
     .type = HS_OPT_INT,
     .def = "1",
     .range = "[0, )",
     .help = "seed of data, initialisation and data order"},
    {.name = "eval-every",
     .type = HS_OPT_DOUBLE,
     .def = "1",
     .range = "[0, 100000]",
     .group = "Evaluation",
     .metavar = "EPOCHS",
     .help = "evaluate on the test set every this many epochs (0: at the end only)"},
    {.name = "target-loss",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, )",
     .help = "test loss whose first crossing is timed (0: none)"},
    {.name = "target-acc",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, 1]",
     .help = "test accuracy (0..1) whose first crossing is timed (0: none)"},
    {.name = "out",
     .type = HS_OPT_STRING,
     .group = "Output",
     .metavar = "DIR",
     .help = "write config.ini, train.csv, eval.csv and summary.json to DIR"},
    {.name = "progress",
     .type = HS_OPT_DOUBLE,
     .def = "2",
     .range = "[0, )",
     .metavar = "SECONDS",
     .help = "seconds between progress lines (0: once per epoch)"},
    {.name = "quiet",
     .short_name = 'q',
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "print nothing but errors"},
};

static const hs_cfg_spec_t train_spec = {
    .usage = "hearsay train [--config FILE] [OPTIONS]",
    .summary = "Train a model on one worker. Every option can also be set in an INI file\n"
               "(--config FILE, `key = value` lines); flags override the file.\n"
               "Output: a progress line (epoch, iteration, loss, samples/s, ETA), and with\n"
               "--out DIR: DIR/config.ini (the resolved options), DIR/train.csv (one row per\n"
               "iteration), DIR/eval.csv (one row per evaluation) and DIR/summary.json.",
    .options = train_options,
    .n_options = HS_ARRAY_LEN(train_options),
};

static int fail(const char *what)
{
    fprintf(stderr, "hearsay train: %s%s%s\n", what ? what : "", what ? ": " : "", hs_last_error());
    return 1;
}

int hs_cmd_train(int argc, char **argv)
{
    hs_cfg_t *cfg = NULL;
    char *json = NULL;
    size_t json_len = 0;
    int status = 0;
    if (hs_cfg_create(&cfg, &train_spec) < 0) return fail("internal option table");
    int rc = hs_cfg_parse_args(cfg, argc, argv);
    if (rc == HS_CFG_HELP) {
        hs_cfg_print_help(cfg, stdout);
        printf("\nData specs (--data):\n%s\n\nShard specs (--shard):\n%s\n", hs_data_spec_help(),
               hs_shard_spec_help());
        hs_cfg_free(&cfg);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "hearsay train: %s\n(see hearsay train --help)\n", hs_last_error());
        hs_cfg_free(&cfg);
        return 2;
    }

    hs_train_opts_t o;
    hs_train_opts_defaults(&o);
    o.model = hs_cfg_str(cfg, "model");
    o.data = hs_cfg_str(cfg, "data");
    o.shard = hs_cfg_str(cfg, "shard");
    o.device = hs_cfg_str(cfg, "device");
    o.threads = (int)hs_cfg_int(cfg, "threads");
    o.epochs = (int)hs_cfg_int(cfg, "epochs");
    o.max_iters = hs_cfg_int(cfg, "max-iters");
    o.batch = (int)hs_cfg_int(cfg, "batch");
    o.lr = hs_cfg_double(cfg, "lr");
    o.momentum = hs_cfg_double(cfg, "momentum");
    o.nesterov = hs_cfg_bool(cfg, "nesterov");
    o.weight_decay = hs_cfg_double(cfg, "weight-decay");
    o.lr_schedule = hs_cfg_str(cfg, "lr-schedule");
    o.warmup = hs_cfg_str(cfg, "warmup");
    o.seed = (uint64_t)hs_cfg_int(cfg, "seed");
    o.eval_every = hs_cfg_double(cfg, "eval-every");
    o.target_loss = hs_cfg_double(cfg, "target-loss");
    o.target_acc = hs_cfg_double(cfg, "target-acc");
    o.out_dir = hs_cfg_str(cfg, "out");
    o.progress_s = hs_cfg_double(cfg, "progress");
    o.quiet = hs_cfg_bool(cfg, "quiet");
    if (o.nesterov && o.momentum == 0) {
        fprintf(stderr, "hearsay train: --nesterov needs --momentum > 0\n");
        hs_cfg_free(&cfg);
        return 2;
    }

    if (o.out_dir) {
        char path[4096];
        if (hs_mkdir_p(o.out_dir) < 0) {
            status = fail("--out");
            goto done;
        }
        snprintf(path, sizeof path, "%s/config.ini", o.out_dir);
        if (hs_cfg_save_ini(cfg, path) < 0) {
            status = fail(NULL);
            goto done;
        }
        FILE *mf = open_memstream(&json, &json_len);
        if (!mf || hs_cfg_write_json(cfg, mf, 2) < 0) {
            if (mf) fclose(mf);
            status = fail("writing the configuration");
            goto done;
        }
        fclose(mf);
        o.config_json = json;
    }
    hs_train_result_t res;
    if (hs_train_local(&o, &res) < 0) status = fail(NULL);
done:
    free(json);
    hs_cfg_free(&cfg);
    return status;
}
