/* tests/runlib.h — helpers of the suites that run `hearsay run ... hearsay train --out DIR`
 * jobs (test_sgp, test_easgd, test_checkpoint): reading DIR/summary.json and DIR.log. */
#ifndef HEARSAY_TESTS_RUNLIB_H
#define HEARSAY_TESTS_RUNLIB_H

/* The number after "key": in DIR/summary.json (the first occurrence); NAN when the file or
 * the key is absent, or the value is null. */
double tr_summary_num(const char *dir, const char *key);
/* The number after "key": inside the per_rank entry of `rank` in DIR/summary.json; true and
 * false read as 1 and 0; NAN when absent or null. */
double tr_summary_rank_num(const char *dir, int rank, const char *key);
/* 1 when DIR.log (the job's merged output) holds `text` (a fixed string). */
int tr_log_has(const char *dir, const char *text);
/* The last 20 lines of DIR.log to stderr (for a failing assertion's context). */
void tr_show_log(const char *dir);

#endif
