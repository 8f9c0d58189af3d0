/*
 * tests/test_sim_payload.c — `hearsay sim --sim-payload MODEL`: size-true messages while a
 * small --model (the convergence proxy) computes the gradients.
 *
 * - A proxy with a payload takes the time of the full-size model on the same network: the
 *   same bytes on the wire (sim.json's wire_bytes) and the same virtual time, for every
 *   algorithm whose traffic does not depend on the model's values (n = 4, fair NICs one rank
 *   per host, and shaped links).
 * - 32 nodes of ResNet-50 payloads (102 MB messages) over 10 Gbit NICs with 0.3 s steps
 *   follow the closed forms per iteration: all-reduce c + 2 (n - 1) / n m / beta, SGP
 *   c + m / beta, overlapped OSGP c; each simulated rank holds the proxy's memory.
 * - The sim options live in the typed option table: --config takes them, config.ini and
 *   summary.json record them.
 */
#include "hearsay/common.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

/* A number from DIR/sim.json ("key": value); NAN when absent. */
static double sim_json_num(const char *dir, const char *key)
{
    char path[4200], pat[128];
    snprintf(path, sizeof path, "%s/sim.json", dir);
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    size_t n = 0;
    char *t = tr_slurp(path, &n);
    double v = NAN;
    const char *at = t ? strstr(t, pat) : NULL;
    if (at) v = atof(at + strlen(pat));
    free(t);
    return v;
}

/* The full-size model mlp:64-100-10 (7,510 parameters) against the proxy logreg:64-10 (650)
 * carrying it: on NICs (fair, one rank per host) and on shaped links, 100 Mbit/s, 10 ms
 * steps. Messages are 128 + 4 x 7,510 bytes either way (the header stays, the body grows), so
 * the time and the bytes agree exactly; the ring all-reduce and EASGD's center messages agree
 * to 1e-3 (a ring's chunks of 7,510 / 4 floats round differently from the proxy's 650 / 4
 * scaled; the end-of-run trailer). */
START_TEST(test_full_size_agrees)
{
    const char *nets[] = {"--ranks-per-host 1 --sim-nic 100Mbit", "--link bw=100Mbit"};
    const char *algos[] = {
        "sgp",   "osgp", "dpsgd", "adpsgd", "easgd", "localsgd", "allreduce --bucket-mb 0",
        "choco", "qsgp"};
    const char *data = "--data gauss:dim=64,classes=10,train=4000 --epochs 10 --max-iters 20 "
                       "--eval-every 0 -q";
    for (size_t k = 0; k < HS_ARRAY_LEN(nets); k++)
        for (size_t i = 0; i < HS_ARRAY_LEN(algos); i++) {
            char full[4096], pay[4096], sim[256], args[512];
            tr_workdir_path(full, sizeof full, "full");
            tr_workdir_path(pay, sizeof pay, "payload");
            snprintf(sim, sizeof sim, "-n 4 --sim-compute fixed:10 %s", nets[k]);
            snprintf(args, sizeof args, "--algo %s --model mlp:64-100-10 %s", algos[i], data);
            ck_assert_int_eq(tr_sim_job(full, sim, args, 120), 0);
            snprintf(sim, sizeof sim, "-n 4 --sim-compute fixed:10 %s --sim-payload mlp:64-100-10",
                     nets[k]);
            snprintf(args, sizeof args, "--algo %s --model logreg:64-10 %s", algos[i], data);
            ck_assert_int_eq(tr_sim_job(pay, sim, args, 120), 0);
            double wf = tr_summary_num(full, "wall_s"), wp = tr_summary_num(pay, "wall_s");
            double bf = sim_json_num(full, "wire_bytes"), bp = sim_json_num(pay, "wire_bytes");
            double tol = strstr(algos[i], "allreduce") || !strcmp(algos[i], "localsgd") ||
                                 !strcmp(algos[i], "easgd")
                             ? 1e-3
                             : 1e-9;
            ck_assert_msg(wf > 0.2 && fabs(wp / wf - 1) <= tol,
                          "%s, %s: the proxy with the payload took %.9g s, the full-size model "
                          "%.9g s (tolerance %g)",
                          nets[k], algos[i], wp, wf, tol);
            ck_assert_msg(bf > 5e5 && bf == bp,
                          "%s, %s: %.0f bytes on the wire with the payload, %.0f at full size",
                          nets[k], algos[i], bp, bf);
            /* the proxy's own memory: nothing of the payload's size is allocated */
            ck_assert_msg(sim_json_num(pay, "payload_scale") > 11.5 &&
                              sim_json_num(pay, "payload_scale") < 11.6,
                          "payload_scale %g, expected 7510 / 650",
                          sim_json_num(pay, "payload_scale"));
        }
}
END_TEST

/* 32 hosts of one rank behind 10 Gbit/s NICs, ResNet-50 payloads (25,557,032 parameters:
 * m = 102,228,128 bytes of floats) on the proxy logreg:63-10 (640 parameters, a multiple of 32:
 * the ring's chunks are equal), 0.3 s steps. Per iteration (iterations 5 to 15 of 20: the
 * last one shares rank 0's NIC with the end-of-run gather):
 *   all-reduce  c + 2 (n - 1) / n x m / beta = 0.3 + 0.15845360 s
 *   SGP         c + (m + 128) / beta          = 0.3 + 0.08178260 s
 *   OSGP        c (the message of 81.8 ms hides behind the step)
 * The host's memory stays the proxy's (the full model would take about 1 GiB per rank). */
START_TEST(test_closed_forms_resnet50)
{
    const double c = 0.3, beta = 10e9 / 8, m = 25557032.0 * 4, n = 32;
    const struct {
        const char *algo;
        double per_iter;
    } cases[] = {
        {"allreduce", c + 2 * (n - 1) / n * m / beta},
        {"sgp", c + (m + 128) / beta},
        {"osgp", c},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        char dir[4096], args[512];
        tr_workdir_path(dir, sizeof dir, cases[i].algo);
        snprintf(args, sizeof args,
                 "--algo %s --model logreg:63-10 --data gauss:dim=63,classes=10,train=40000 "
                 "--epochs 100 --max-iters 20 --eval-every 0 -q",
                 cases[i].algo);
        ck_assert_int_eq(tr_sim_job(dir,
                                    "-n 32 --ranks-per-host 1 --sim-nic 10Gbit "
                                    "--sim-compute fixed:300 --sim-payload resnet50",
                                    args, 300),
                         0);
        double per = (tr_rank0_wall_at(dir, 15) - tr_rank0_wall_at(dir, 5)) / 10;
        ck_assert_msg(fabs(per - cases[i].per_iter) <= 1e-6 * cases[i].per_iter,
                      "%s: %.9f s per iteration, the closed form %.9f s", cases[i].algo, per,
                      cases[i].per_iter);
        double rss = sim_json_num(dir, "peak_rss_mib");
        ck_assert_msg(rss > 0 && rss < 2048, "%s: peak resident memory %g MiB", cases[i].algo, rss);
        fprintf(stderr,
                "resnet50 x 32, %s: %.6f s per iteration (closed form %.6f), host %.2f s, "
                "peak %.0f MiB\n",
                cases[i].algo, per, cases[i].per_iter, sim_json_num(dir, "host_wall_s"), rss);
    }
}
END_TEST

/* The sim options are typed options: a --config file sets them (issue 29: `sim-nic = 10Gbit`
 * was "unknown key"), and config.ini / summary.json record them. */
START_TEST(test_config_file)
{
    char dir[4096], ini[4200], simargs[4400];
    tr_workdir_path(dir, sizeof dir, "config");
    tr_workdir_path(ini, sizeof ini, "sim.ini");
    FILE *f = fopen(ini, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "n = 4\n[Simulation]\nsim-nic = 10Gbit\nranks-per-host = 2\n"
               "sim-compute = fixed:5\nsim-payload = resnet18\n");
    fclose(f);
    snprintf(simargs, sizeof simargs, "--config %s", ini);
    ck_assert_int_eq(tr_sim_job(dir, simargs,
                                "--algo sgp --model logreg:64-10 "
                                "--data gauss:dim=64,classes=10,train=4000 --max-iters 5 "
                                "--eval-every 0 -q",
                                60),
                     0);
    ck_assert(tr_summary_has(dir, "\"sim-nic\": \"10Gbit\""));
    ck_assert(tr_summary_has(dir, "\"sim-payload\": \"resnet18\""));
    ck_assert(tr_summary_has(dir, "\"n\": 4"));
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/config.ini", dir);
    ck_assert(tr_file_has(cfg, "sim-nic = 10Gbit"));
    /* the NICs and the payload acted: 5 iterations of 5 ms steps and, between the hosts,
     * 46.8 MB messages at 1.25 GB/s */
    ck_assert_msg(tr_summary_num(dir, "wall_s") > 5 * 0.005 + 0.03,
                  "wall_s %g: the 10 Gbit NICs and resnet18's messages did not act",
                  tr_summary_num(dir, "wall_s"));
}
END_TEST

int main(void)
{
    const char *why = tr_require(NULL, NULL);
    if (tr_workdir_init("sim_payload") < 0) return 1;
    Suite *s = suite_create("sim_payload");
    TCase *tc = tcase_create("sim_payload");
    tcase_set_timeout(tc, 600);
    const char *mem_why = why;
#if defined(__SANITIZE_ADDRESS__)
    if (!mem_why) mem_why = "a sanitizer build: its memory figures are not the simulator's";
#endif
    TR_ADD_TEST(tc, test_full_size_agrees, why);
    TR_ADD_TEST(tc, test_closed_forms_resnet50, mem_why);
    TR_ADD_TEST(tc, test_config_file, why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
