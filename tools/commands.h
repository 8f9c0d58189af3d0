/* tools/commands.h — the subcommands of the `hearsay` program. Each returns the process exit
 * status (0 success, 1 runtime failure, 2 usage error) and prints its own errors. */
#ifndef HEARSAY_TOOLS_COMMANDS_H
#define HEARSAY_TOOLS_COMMANDS_H

#include "hearsay/algo.h"
#include "hearsay/options.h"

/* The whole `hearsay` program (tools/hearsay.c): the binary's main calls it; a program that
 * registers its own algorithms first (hs_algo_register) calls it too (tests/algo_example.c). */
int hs_cli_main(int argc, char **argv);

int hs_cmd_train(int argc, char **argv);
int hs_cmd_sim(int argc, char **argv);
int hs_cmd_run(int argc, char **argv);
int hs_cmd_topo(int argc, char **argv);
int hs_cmd_bench(int argc, char **argv);
int hs_cmd_report(int argc, char **argv);
int hs_cmd_trace(int argc, char **argv);

/* Benchmarks (bench/), dispatched by `hearsay bench NAME`. */
int hs_bench_step(int argc, char **argv);
int hs_bench_p2p(int argc, char **argv);
int hs_bench_allreduce(int argc, char **argv);
int hs_bench_gossip(int argc, char **argv);
int hs_bench_sim(int argc, char **argv);
int hs_bench_compress(int argc, char **argv);

/* The option table of hearsay train / sim with the algorithms' own options
 * (tools/algo_options.c): the generic options, with the union of every registered
 * algorithm's table (hs_algo_ops_t.options, deduplicated by name, help naming the algorithms)
 * inserted after the generic option `after`. */
typedef struct tool_algo_table {
    hs_option_t *options;
    size_t n;
    char **helps; /* (owned) */
    size_t n_helps;
} tool_algo_table_t;
int tool_algo_table_build(tool_algo_table_t *t, const hs_option_t *generic, size_t n_generic,
                          const char *after);
void tool_algo_table_free(tool_algo_table_t *t);
/* After parsing: an algorithm option given (file or flag) with a value other than its default
 * for an algorithm that does not declare it is -EINVAL naming the algorithms that take it;
 * those that `ops` declares and the user gave come back as "name=value" (*kv, *n_kv; free with
 * tool_algo_options_free) for hs_train_opts_t.algo_opts. */
int tool_algo_options(const tool_algo_table_t *t, const hs_cfg_spec_t *spec, hs_cfg_t *cfg,
                      const hs_algo_ops_t *ops, char ***kv, size_t *n_kv);
void tool_algo_options_free(char ***kv, size_t n);
/* config.ini and summary.json record what runs: the options `ops` declares and the user left
 * unset take the algorithm's own default. */
void tool_algo_record_defaults(hs_cfg_t *cfg, const hs_algo_ops_t *ops);

#endif
