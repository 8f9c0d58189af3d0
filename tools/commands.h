/* tools/commands.h — the subcommands of the `hearsay` program. Each returns the process exit
 * status (0 success, 1 runtime failure, 2 usage error) and prints its own errors. */
#ifndef HEARSAY_TOOLS_COMMANDS_H
#define HEARSAY_TOOLS_COMMANDS_H

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

#endif
