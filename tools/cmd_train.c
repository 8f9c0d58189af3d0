/* tools/cmd_train.c — `hearsay train`: options, config file, and the training run. */
#include "hearsay/algo.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/options.h"
#include "hearsay/straggler.h"
#include "hearsay/data.h"
#include "hearsay/nn.h"
#include "hearsay/sim.h"
#include "hearsay/trace.h"
#include "hearsay/train.h"
#include "hearsay/transport.h"
#include "tools/commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (not const: the --algo choices come from the algorithm registry) */
static hs_option_t train_options[] = {
    {.name = "model",
     .type = HS_OPT_STRING,
     .def = "mlp:784-1024-1024-10",
     .group = "Model and data",
     .metavar = "SPEC",
     .help = "model: logreg:IN-OUT, mlp:IN-H1-..-OUT, lenet5, resnet20 (batch norm), "
             "resnet20-fixup, seq:LAYERS (--help-models: each, and the seq: grammar with "
             "examples)"},
    {.name = "init",
     .type = HS_OPT_ENUM,
     .def = "torch",
     .choices = "torch|he|xavier",
     .help = "initialisation of fc and conv layers: torch (PyTorch 1.13's defaults), he, xavier"},
    {.name = "data",
     .type = HS_OPT_STRING,
     .def = "gauss",
     .metavar = "SPEC",
     .help = "dataset: gauss[:k=v,..], teacher[:..], mnist:DIR, cifar10:DIR, digits[:PATH], "
             "npy:DIR (see below)"},
    {.name = "shard",
     .type = HS_OPT_STRING,
     .def = "iid",
     .metavar = "SPEC",
     .help = "how the training set is split over workers: iid, dirichlet:ALPHA[,min=M]"},
    {.name = "device",
     .type = HS_OPT_STRING,
     .def = "cpu",
     .metavar = "DEV",
     .help = "compute device: cpu, cuda, cuda:N, emu (emulated: tests the GPU path)"},
    {.name = "threads",
     .type = HS_OPT_INT,
     .def = "0",
     .range = "[0, 1024]",
     .help = "CPU BLAS threads per worker (0: OpenBLAS's default, all cores)"},
    {.name = "precision",
     .type = HS_OPT_ENUM,
     .def = "fp32",
     .choices = "fp32|bf16|fp16",
     .help = "precision of the matrix products' operands (fp32 accumulation, fp32 weights, "
             "optimizer state and activations): fp32, bf16, fp16 (tensor cores on CUDA; an "
             "emulation on the CPU and emu, slower than fp32)"},
    {.name = "tf32",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "let fp32 products round their operands to TF32 (tensor cores on CUDA)"},
    {.name = "loss-scale",
     .type = HS_OPT_STRING,
     .def = "auto",
     .metavar = "S",
     .help = "loss scaling: auto (dynamic with fp16, none otherwise), dynamic[:S] (from S, "
             "2^16 by default; halved and the step skipped on an inf/nan gradient, doubled "
             "after 2000 good steps), or a fixed power of two S (1: none)"},
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
    {.name = "time-budget",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, )",
     .metavar = "SECONDS",
     .help = "local/sgp/osgp/adpsgd: every rank stops training this long after the start (wall or "
             "virtual time), whatever its iteration (0: none; --epochs still caps the run)"},
    {.name = "batch",
     .type = HS_OPT_INT,
     .def = "128",
     .range = "[1, 65536]",
     .help = "batch size per worker"},
    {.name = "last-batch",
     .type = HS_OPT_ENUM,
     .def = "drop",
     .choices = "drop|keep",
     .help = "each pass's last partial batch: drop (every step sees --batch samples; an epoch "
             "is floor(samples / ranks / batch) steps) or keep (PyTorch DataLoader's default: "
             "one smaller step more, the ceiling)"},
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
    {.name = "sim-eval-traffic",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "hearsay sim: evaluations cost what they would on a cluster (the snapshots to rank "
             "0 cross the simulated network, the evaluation's drain and compute take virtual "
             "time); by default they are observers that take no virtual time or bandwidth, so "
             "--eval-every changes no iterate and no time (real runs always pay)"},
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
    {.name = "algo",
     .type = HS_OPT_ENUM,
     .def = "local",
     .choices = NULL, /* hs_algo_names() */
     .group = "Distributed",
     .help = "the algorithm (listed below with what each one does)"},
    {.name = "graph",
     .type = HS_OPT_STRING,
     .def = "exp1peer",
     .metavar = "SPEC",
     .help = "peer graph of sgp/osgp/dpsgd/adpsgd (see hearsay topo --help; an algorithm may have "
             "its own default: dpsgd needs an undirected graph and defaults to biring, adpsgd a "
             "bipartite one and defaults to bipartite)"},
    {.name = "straggler",
     .type = HS_OPT_LIST,
     .group = "Distributed",
     .metavar = "SPEC",
     .help = "straggler or fault injection, repeatable (grammar below)"},
    {.name = "link",
     .type = HS_OPT_STRING,
     .metavar = "SHAPING",
     .help = "link shaping: latency=5ms,jitter=1ms,bw=1Gbit; 0-3:latency=20ms; host:bw=.."},
    {.name = "provider",
     .type = HS_OPT_STRING,
     .def = "auto",
     .metavar = "NAME",
     .help = "transport: auto (per pair of ranks: hsshm within a host, tcp across hosts), "
             "or a registered one (listed below): hsshm, hybrid / hsshm+P (hsshm within a "
             "host, libfabric P across), a libfabric provider for every pair: tcp, shm, .."},
    {.name = "progress-thread",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "transport progress thread (default: on for easgd, eamsgd and lsgd, whose "
             "services answer while the main thread waits; off otherwise)"},
    {.name = "comm-timeout",
     .type = HS_OPT_DOUBLE,
     .def = "30",
     .range = "(0, 86400]",
     .metavar = "SECONDS",
     .help = "bound on every wait for a peer (all-reduce, neighbours, send completions)"},
    {.name = "fail-timeout",
     .type = HS_OPT_DOUBLE,
     .def = "30",
     .range = "[0, 86400]",
     .metavar = "SECONDS",
     .help = "heartbeats: a rank silent this long (frozen, SIGSTOP) is fenced: its messages are "
             "refused and it exits; half as long: suspected (0: no heartbeats; "
             "docs/failure-model.md)"},
    {.name = "drain-timeout",
     .type = HS_OPT_DOUBLE,
     .def = "30",
     .range = "(0, 86400]",
     .metavar = "SECONDS",
     .help = "end-of-run drain: give up on a silent peer after this long without progress"},
    {.name = "init-spread",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, 100]",
     .metavar = "SIGMA",
     .help = "add N(0, SIGMA^2) noise per rank to the initial parameters (averaging studies)"},
    {.name = "dump-params",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "write DIR/rank-R.init.f32 and DIR/rank-R.final.f32 (raw float32 z)"},
    {.name = "dump-trajectory",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "write DIR/rank-R.traj.f32: the parameters (raw float32 z) at the start and after "
             "every iteration (reference tests; small models only)"},
    {.name = "checkpoint-every",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, 100000]",
     .group = "Checkpoints",
     .metavar = "EPOCHS",
     .help = "write a checkpoint set (--out DIR: DIR/ckpt/rank-R.it-ITER.bin, then "
             "set-ITER.manifest) every this many epochs (0: never)"},
    {.name = "resume",
     .type = HS_OPT_STRING,
     .metavar = "DIR",
     .help = "continue from the newest complete checkpoint set in DIR/ckpt (DIR: an earlier "
             "run's --out) at its iteration"},
    {.name = "out",
     .type = HS_OPT_STRING,
     .group = "Output",
     .metavar = "DIR",
     .help = "write config.ini, rank-R.csv, rank-R-eval.csv, eval.csv and summary.json to DIR"},
    {.name = "trace",
     .type = HS_OPT_STRING,
     .metavar = "FILE",
     .help = "write the timeline to FILE: Chrome trace-event JSON for Perfetto or "
             "chrome://tracing (spans per rank and thread, arrows from sends to applies; "
             "docs/timeline.md)"},
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

/* `hearsay sim`'s own options, before hearsay train's in its table (so --config, config.ini
 * and summary.json's "config" have them too); sim_details says more in --help. */
static const hs_option_t sim_options[] = {
    {.name = "n",
     .short_name = 'n',
     .type = HS_OPT_INT,
     .def = "1",
     .range = "[1, 65536]",
     .group = "Simulation",
     .metavar = "N",
     .help = "simulated ranks (required: on the command line or in --config)"},
    {.name = "sim-compute",
     .type = HS_OPT_STRING,
     .def = "fixed:10",
     .metavar = "SPEC",
     .help = "a gradient step's duration: fixed:MS, bench, measured or measured-all (below)"},
    {.name = "ranks-per-host",
     .type = HS_OPT_INT,
     .def = "0",
     .range = "[0, 65536]",
     .metavar = "R",
     .help = "consecutive ranks per host, for host-scoped --link rules and the NICs (0: all on "
             "one host)"},
    {.name = "sim-nic",
     .type = HS_OPT_STRING,
     .metavar = "RATE",
     .help = "each host's NIC (10Gbit, 100Mbit, 1GB, ..), shared by its ranks (default: no NIC "
             "limit)"},
    {.name = "sim-nic-share",
     .type = HS_OPT_ENUM,
     .def = "fair",
     .choices = "fair|fifo",
     .metavar = "POLICY",
     .help = "how a NIC serves messages at the same time: max-min fair shares or one after the "
             "other"},
    {.name = "sim-proto",
     .type = HS_OPT_STRING,
     .metavar = "LIST",
     .help = "the transport's protocol inside a transfer between hosts: rndv=BYTES, acks, rxm "
             "(below; needs --sim-nic with fair sharing)"},
    {.name = "sim-threads",
     .type = HS_OPT_INT,
     .def = "0",
     .range = "[0, 1024]",
     .metavar = "P",
     .help = "host threads that compute ranks' gradients at once (0: the online CPUs); the "
             "results are the same for any P"},
    {.name = "sim-payload",
     .type = HS_OPT_STRING,
     .metavar = "MODEL",
     .help = "size-true messages: each message carries MODEL's parameters (resnet50, resnet18, "
             "resnet101, vgg16, a --model spec, bytes:N, params:N) while --model computes the "
             "gradients (below)"},
};

static const char sim_details[] =
    "\n"
    "Simulation options in detail:\n"
    "  --sim-compute SPEC       fixed:MS (default fixed:10; the run is then bit-for-bit\n"
    "                           repeatable; a step time measured elsewhere, a GPU's say),\n"
    "                           bench (the median step of this model measured here once at\n"
    "                           the start), measured (each step's own thread CPU time) or\n"
    "                           measured-all (also the thread CPU time of the rest of the\n"
    "                           workers' code: mixing, the optimizer step, evaluations,\n"
    "                           handlers; neither is repeatable)\n"
    "  --sim-nic RATE           a message between hosts goes through the sender's and the\n"
    "                           receiver's NIC, shared by the host's ranks\n"
    "  --sim-nic-share POLICY   fair (default: max-min fair shares among rank pairs, as TCP\n"
    "                           connections share a link) or fifo (in send order)\n"
    "  --sim-proto LIST         a comma list of\n"
    "                           rndv=BYTES  a message above BYTES goes by a read rendezvous\n"
    "                                       (libfabric ofi_rxm): a request to send, the\n"
    "                                       receiver's read request back on its own byte\n"
    "                                       stream to the sender, the data, a closing\n"
    "                                       message back; the send completes when it is in\n"
    "                           acks        TCP's delayed acknowledgements take 66 / (2 x\n"
    "                                       1514) of the data's rate in the reverse direction\n"
    "                           rxm         both, at ofi_rxm's defaults: rndv=131072,acks\n"
    "  --sim-threads P          --threads 0 (the default) means one BLAS thread per gradient\n"
    "  --sim-payload MODEL      every message of the algorithm has the size it would have for\n"
    "                           MODEL: its header as it is, its body (parameters, a\n"
    "                           compressed share, an all-reduce chunk) x P(MODEL) / P(--model)\n"
    "                           on the links, NICs and protocol; --model stays the convergence\n"
    "                           proxy that computes the gradients, and each simulated rank\n"
    "                           the proxy's memory. It does not model MODEL's compute (give\n"
    "                           --sim-compute fixed:MS), its layers (--bucket-mb buckets and\n"
    "                           their start in backward follow the proxy's layers: compare\n"
    "                           with --bucket-mb 0), its accuracy, or the byte counts of\n"
    "                           rank-R.csv (the proxy's; sim.json's wire_bytes has the\n"
    "                           network's). MODEL: resnet18, resnet50, resnet101, vgg16\n"
    "                           (torchvision's), any --model spec on this --data, bytes:N\n"
    "                           or params:N (K, M, G: powers of 1024). docs/simulation.md\n"
    "  --sim-eval-traffic       evaluations cost what they would on a cluster (snapshots to\n"
    "                           rank 0 over the simulated network, the drain before them, their\n"
    "                           compute under measured-all); by default they are observers that\n"
    "                           take no virtual time or bandwidth: --eval-every changes no\n"
    "                           iterate and no time column\n"
    "  --link SPEC              the links (hearsay train --help; default: ideal links)\n";

static const char sim_summary[] =
    "Run `hearsay train` on N simulated ranks in this one process, on a virtual clock: the\n"
    "same training loop and algorithms, a deterministic discrete-event scheduler, a simulated\n"
    "transport, and every time in virtual seconds (summary.json: \"clock\": \"virtual\").\n"
    "Every option can also be set in an INI file (--config FILE); every training option is\n"
    "hearsay train's, with the same meaning. See docs/simulation.md.";

/* The usage lines; --algo's choices come from the algorithm table (train_cmd fills them in). */
static char train_usage[512];

static hs_cfg_spec_t train_spec = {
    .usage = train_usage,
    .summary = "Train a model on one worker, or on every rank of a job with a distributed\n"
               "algorithm. Every option can also be set in an INI file (--config FILE,\n"
               "`key = value` lines); flags override the file.\n"
               "One worker is a job of one rank (--algo local). A job of several ranks without\n"
               "--algo runs local too: its workers train independently (a warning says so).\n"
               "Rank 0 prints the progress line; with --out DIR every rank writes\n"
               "DIR/rank-R.csv (per iteration: loss, time split, bytes, push-sum weight,\n"
               "staleness) and DIR/rank-R-eval.csv; rank 0 writes DIR/config.ini, DIR/eval.csv\n"
               "(the averaged model, consensus distance) and DIR/summary.json. Models and the\n"
               "seq: grammar: --help-models. See docs/algorithms.md.",
    .options = train_options,
    .n_options = HS_ARRAY_LEN(train_options),
};

static int fail(const char *what)
{
    fprintf(stderr, "hearsay train: %s%s%s\n", what ? what : "", what ? ": " : "", hs_last_error());
    return 1;
}

/* The run's algorithm options, "name=value" (hs_train_opts_t.algo_opts; train_cmd frees). */
static char **algo_kv;
static size_t n_algo_kv;

/* hearsay sim's options, read from the parsed table into *so and checked (the NIC rate, the
 * protocol, the payload's grammar): 0, or -EINVAL naming the option. */
static int sim_opts_read(const hs_cfg_t *cfg, hs_sim_opts_t *so)
{
    *so = (hs_sim_opts_t){0};
    if (hs_cfg_source(cfg, "n") == HS_CFG_DEFAULT)
        return HS_ERR(-EINVAL, "-n N (the number of simulated ranks) is required");
    so->n = (int)hs_cfg_int(cfg, "n");
    so->compute = hs_cfg_str(cfg, "sim-compute");
    so->ranks_per_host = (int)hs_cfg_int(cfg, "ranks-per-host");
    so->nic = hs_cfg_str(cfg, "sim-nic");
    if (so->nic && !*so->nic) so->nic = NULL;
    so->nic_share = hs_cfg_str(cfg, "sim-nic-share");
    so->proto = hs_cfg_str(cfg, "sim-proto");
    if (so->proto && !*so->proto) so->proto = NULL;
    so->threads = (int)hs_cfg_int(cfg, "sim-threads");
    so->payload = hs_cfg_str(cfg, "sim-payload");
    if (so->payload && !*so->payload) so->payload = NULL;
    double fixed, nic_Bps, params;
    int fair, acks;
    long rndv;
    HS_TRY(hs_sim_compute_parse(so->compute, &fixed));
    if (so->nic) HS_TRY(hs_sim_nic_parse(so->nic, &nic_Bps));
    HS_TRY(hs_sim_nic_share_parse(so->nic_share, &fair));
    HS_TRY(hs_sim_proto_parse(so->proto, &rndv, &acks));
    if (so->proto && (!so->nic || !fair))
        return HS_ERR(-EINVAL,
                      "--sim-proto %s: needs --sim-nic RATE with --sim-nic-share fair (it "
                      "acts on the transfers through the NICs)",
                      so->proto);
    if (so->payload) HS_TRY(hs_sim_payload_parse(so->payload, 0, 0, 0, 0, &params));
    return 0;
}

/* --sim-payload SPEC against the shape of --data (a --model spec must fit it). */
static int sim_payload_check(const char *payload, const char *data)
{
    hs_data_spec_t ds;
    int c, h, w, classes;
    double params;
    if (hs_data_spec_parse(data, &ds) < 0 || hs_data_spec_probe(&ds, &c, &h, &w, &classes) < 0)
        return 0; /* --data's own check says what is wrong */
    return hs_sim_payload_parse(payload, c, h, w, classes, &params);
}

/* `hearsay train` (is_sim 0) or `hearsay sim`, with the option table tab (the generic
 * options, hearsay sim's and the algorithms'). */
static int train_run(int argc, char **argv, int is_sim, const tool_algo_table_t *tab)
{
    const char *cmd = is_sim ? "hearsay sim" : "hearsay train";
    hs_sim_opts_t sim_opts, *sim = NULL;
    hs_cfg_t *cfg = NULL;
    char *json = NULL;
    size_t json_len = 0;
    int status = 0;
    for (size_t i = 0; i < tab->n; i++)
        if (!strcmp(tab->options[i].name, "algo")) tab->options[i].choices = hs_algo_names();
    if (is_sim)
        snprintf(train_usage, sizeof train_usage,
                 "hearsay sim -n N [--config FILE] [--sim-compute SPEC] [--ranks-per-host R]\n"
                 "                   [--sim-nic RATE [--sim-nic-share fair|fifo] [--sim-proto "
                 "LIST]]\n"
                 "                   [--sim-payload MODEL] [--sim-threads P] "
                 "[--sim-eval-traffic]\n"
                 "                   [--algo %s] [TRAIN OPTIONS]",
                 hs_algo_names());
    else
        snprintf(train_usage, sizeof train_usage,
                 "hearsay train [--config FILE] [OPTIONS]\n"
                 "       hearsay run -n N -- hearsay train --algo %s [OPTIONS]",
                 hs_algo_names());
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help-models")) {
            fputs(hs_model_spec_help(), stdout);
            return 0;
        }
    if (hs_cfg_create(&cfg, &train_spec) < 0) return fail("internal option table");
    int rc = hs_cfg_parse_args(cfg, argc, argv);
    if (rc == HS_CFG_HELP) {
        hs_cfg_print_help(cfg, stdout);
        printf("\nData specs (--data):\n%s\n\nShard specs (--shard):\n%s\n", hs_data_spec_help(),
               hs_shard_spec_help());
        printf("\nStraggler and fault injection (--straggler, repeatable, seeded by --seed):\n%s",
               hs_straggler_help());
        printf("\nAlgorithms (--algo):\n");
        for (int i = 0; hs_algo_at(i); i++)
            printf("  %-10s %s\n", hs_algo_at(i)->name, hs_algo_at(i)->help);
        printf("\nTransports (--provider; auto picks one of them, docs/transport.md):\n");
        for (int i = 0; hs_transport_registry_at(i); i++) {
            const hs_transport_entry_t *e = hs_transport_registry_at(i);
            char caps[256];
            hs_transport_caps_str(e->ops->caps, caps, sizeof caps);
            printf("  %-10s %s\n  %-10s takes: %s\n  %-10s flags: %s\n", e->name, e->help, "",
                   e->takes ? e->takes : e->name, "", caps);
        }
        if (is_sim) fputs(sim_details, stdout);
        hs_cfg_free(&cfg);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n(see %s --help)\n", cmd, hs_last_error(), cmd);
        hs_cfg_free(&cfg);
        return 2;
    }

    if (is_sim) {
        if (sim_opts_read(cfg, &sim_opts) < 0) {
            fprintf(stderr, "%s: %s\n(see %s --help)\n", cmd, hs_last_error(), cmd);
            hs_cfg_free(&cfg);
            return 2;
        }
        sim = &sim_opts;
    }

    hs_train_opts_t o;
    hs_train_opts_defaults(&o);
    o.model = hs_cfg_str(cfg, "model");
    o.init = hs_cfg_str(cfg, "init");
    o.data = hs_cfg_str(cfg, "data");
    o.shard = hs_cfg_str(cfg, "shard");
    o.device = hs_cfg_str(cfg, "device");
    o.threads = (int)hs_cfg_int(cfg, "threads");
    o.precision = hs_cfg_str(cfg, "precision");
    o.tf32 = hs_cfg_bool(cfg, "tf32");
    o.loss_scale = hs_cfg_str(cfg, "loss-scale");
    o.epochs = (int)hs_cfg_int(cfg, "epochs");
    o.max_iters = hs_cfg_int(cfg, "max-iters");
    o.batch = (int)hs_cfg_int(cfg, "batch");
    o.keep_last = strcmp(hs_cfg_str(cfg, "last-batch"), "keep") == 0;
    o.lr = hs_cfg_double(cfg, "lr");
    o.momentum = hs_cfg_double(cfg, "momentum");
    o.nesterov = hs_cfg_bool(cfg, "nesterov");
    o.weight_decay = hs_cfg_double(cfg, "weight-decay");
    o.lr_schedule = hs_cfg_str(cfg, "lr-schedule");
    o.warmup = hs_cfg_str(cfg, "warmup");
    o.seed = (uint64_t)hs_cfg_int(cfg, "seed");
    o.eval_every = hs_cfg_double(cfg, "eval-every");
    o.sim_eval_traffic = hs_cfg_bool(cfg, "sim-eval-traffic");
    o.target_loss = hs_cfg_double(cfg, "target-loss");
    o.target_acc = hs_cfg_double(cfg, "target-acc");
    o.out_dir = hs_cfg_str(cfg, "out");
    o.progress_s = hs_cfg_double(cfg, "progress");
    o.quiet = hs_cfg_bool(cfg, "quiet");
    o.algo = hs_cfg_str(cfg, "algo");
    const hs_algo_ops_t *ops = hs_algo_find(o.algo); /* the enum admits registered names only */
    /* What an algorithm declares (hearsay/algo.h) fills what the user left at its default. */
    o.graph = hs_cfg_str(cfg, "graph");
    if (ops->default_graph && hs_cfg_source(cfg, "graph") == HS_CFG_DEFAULT)
        o.graph = ops->default_graph;
    /* its own options: those the user gave, checked against the algorithm (the others take
     * the algorithm's defaults in the run) */
    if (tool_algo_options(tab, &train_spec, cfg, ops, &algo_kv, &n_algo_kv) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, hs_last_error());
        hs_cfg_free(&cfg);
        return 2;
    }
    o.algo_opts = (const char *const *)algo_kv;
    o.n_algo_opts = n_algo_kv;
    if (ops->flags & HS_ALGO_NESTEROV) o.nesterov = 1;
    o.progress_thread = hs_cfg_source(cfg, "progress-thread") == HS_CFG_DEFAULT
                            ? (ops->flags & HS_ALGO_PROGRESS) != 0
                            : hs_cfg_bool(cfg, "progress-thread");
    if ((ops->flags & HS_ALGO_PROGRESS) && !o.progress_thread)
        fprintf(stderr,
                "hearsay train: warning: --algo %s without a progress thread "
                "(--no-progress-thread): its "
                "services wait on the main thread's progress (much slower)\n",
                o.algo);
    o.time_budget_s = hs_cfg_double(cfg, "time-budget");
    size_t n_strag = 0;
    o.stragglers = hs_cfg_list(cfg, "straggler", &n_strag);
    o.n_stragglers = n_strag;
    o.link = hs_cfg_str(cfg, "link");
    o.provider = hs_cfg_str(cfg, "provider");
    o.comm_timeout_s = hs_cfg_double(cfg, "comm-timeout");
    o.drain_timeout_s = hs_cfg_double(cfg, "drain-timeout");
    o.fail_timeout_s = hs_cfg_double(cfg, "fail-timeout");
    o.init_spread = hs_cfg_double(cfg, "init-spread");
    o.dump_params = hs_cfg_bool(cfg, "dump-params");
    o.dump_trajectory = hs_cfg_bool(cfg, "dump-trajectory");
    o.trace = hs_cfg_str(cfg, "trace");
    if (o.trace && !*o.trace) o.trace = NULL;
    o.checkpoint_every = hs_cfg_double(cfg, "checkpoint-every");
    o.resume = hs_cfg_str(cfg, "resume");
    if (o.resume && !*o.resume) o.resume = NULL;
    if (o.nesterov && o.momentum == 0) {
        fprintf(stderr, "hearsay train: --nesterov needs --momentum > 0\n");
        hs_cfg_free(&cfg);
        return 2;
    }
    /* Flag-level checks that need no job (the straggler grammar, shaping, graph) */
    if (hs_train_dist_check(&o, 0) < 0) {
        fprintf(stderr, "%s: %s\n(see %s --help)\n", cmd, hs_last_error(), cmd);
        hs_cfg_free(&cfg);
        return 2;
    }
    /* --sim-payload MODEL: a --model spec is checked against the data's shape */
    if (sim && sim->payload && sim_payload_check(sim->payload, o.data) < 0) {
        fprintf(stderr, "%s: %s\n(see %s --help)\n", cmd, hs_last_error(), cmd);
        hs_cfg_free(&cfg);
        return 2;
    }
    /* --trace FILE that cannot be written: said before any job starts */
    if (o.trace && hs_trace_check_path(o.trace) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, hs_last_error());
        hs_cfg_free(&cfg);
        return 2;
    }
    /* One loop for every run: a job of one rank (no launcher) is one worker. */
    hs_boot_t *boot = NULL;
    hs_boot_opts_t bo = {.timeout_s = 0, .use_mpi = -1};
    if (!sim && hs_boot_init(&boot, &bo) < 0) {
        status = fail("joining the job");
        goto done;
    }
    if (hs_train_dist_check(&o, sim ? sim->n : hs_boot_size(boot)) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, hs_last_error());
        hs_boot_finalize(&boot);
        hs_cfg_free(&cfg);
        return 2;
    }
    int rank0 = sim || hs_boot_rank(boot) == 0;
    /* issue 30: `hearsay run -n 4 -- hearsay train` without --algo trains 4 independent models
     * (local stays the default: one worker needs no algorithm, and a default algorithm would
     * hide the choice); said once, by rank 0, before anything runs */
    const int ranks = sim ? sim->n : hs_boot_size(boot);
    if (rank0 && ranks > 1 && hs_cfg_source(cfg, "algo") == HS_CFG_DEFAULT)
        fprintf(stderr,
                "%s: warning: no --algo: the %d workers train independently (--algo local: they "
                "never communicate, and their \"averaged model\" is an average of %d separately "
                "trained models); give --algo allreduce, sgp, adpsgd, ... to train one model "
                "together (%s --help lists them), or --algo local to say this is what you want\n",
                cmd, ranks, ranks, cmd);
    /* config.ini and summary.json record what runs: the algorithm's own defaults too (it
     * showed graph = exp1peer for a dpsgd run on biring, nesterov = false for eamsgd) */
    if (ops->default_graph && hs_cfg_source(cfg, "graph") == HS_CFG_DEFAULT)
        hs_cfg_set(cfg, "graph", ops->default_graph);
    tool_algo_record_defaults(cfg, ops);
    if (o.nesterov && !hs_cfg_bool(cfg, "nesterov")) hs_cfg_set(cfg, "nesterov", "true");

    if (o.out_dir) {
        char path[4096];
        if (hs_mkdir_p(o.out_dir) < 0) {
            status = fail("--out");
            goto done;
        }
        snprintf(path, sizeof path, "%s/config.ini", o.out_dir);
        if (rank0 && hs_cfg_save_ini(cfg, path) < 0) {
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
    if (sim) {
        if (hs_sim_run(&o, sim, &res) < 0) {
            fprintf(stderr, "hearsay sim: %s\n", hs_last_error());
            status = 1;
        } else if (o.trace && hs_trace_merge_run(o.trace, sim->n, NULL, 0) < 0) {
            /* every simulated rank wrote its part: one file */
            fprintf(stderr, "hearsay sim: %s\n", hs_last_error());
            status = 1;
        }
    } else if (hs_train(&o, boot, &res) < 0) {
        if (hs_boot_size(boot) > 1)
            fprintf(stderr, "hearsay train: rank %d: %s\n", hs_boot_rank(boot), hs_last_error());
        else
            fprintf(stderr, "hearsay train: %s\n", hs_last_error());
        status = 1;
    }
done:
    hs_boot_finalize(&boot);
    free(json);
    hs_cfg_free(&cfg);
    return status;
}

/* train_run with the option table of the algorithms registered now. */
static int train_cmd(int argc, char **argv, int is_sim)
{
    tool_algo_table_t tab;
    /* hearsay sim: its own options first, then hearsay train's */
    size_t nt = HS_ARRAY_LEN(train_options), ns = is_sim ? HS_ARRAY_LEN(sim_options) : 0;
    hs_option_t *base = calloc(nt + ns, sizeof *base);
    if (!base) return fail("memory");
    memcpy(base, sim_options, ns * sizeof *base);
    memcpy(base + ns, train_options, nt * sizeof *base);
    if (ns && !base[ns].group) base[ns].group = "Model and data";
    if (tool_algo_table_build(&tab, base, nt + ns, "graph") < 0) {
        free(base);
        return fail("the algorithms' option tables");
    }
    const char *summary = train_spec.summary;
    if (is_sim) train_spec.summary = sim_summary;
    train_spec.options = tab.options;
    train_spec.n_options = tab.n;
    int st = train_run(argc, argv, is_sim, &tab);
    train_spec.summary = summary;
    free(base);
    tool_algo_options_free(&algo_kv, n_algo_kv);
    n_algo_kv = 0;
    train_spec.options = train_options;
    train_spec.n_options = HS_ARRAY_LEN(train_options);
    tool_algo_table_free(&tab);
    return st;
}

int hs_cmd_train(int argc, char **argv)
{
    return train_cmd(argc, argv, 0);
}

int hs_cmd_sim(int argc, char **argv)
{
    return train_cmd(argc, argv, 1);
}
