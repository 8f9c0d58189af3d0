/*
 * hearsay/json.h — the two pieces every JSON writer in Hearsay needs (summary.json, the
 * resolved configuration, benchmark lines): an escaped string and a number that is `null`
 * when not finite.
 */
#ifndef HEARSAY_JSON_H
#define HEARSAY_JSON_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Write s (NULL: "") as a quoted JSON string, escaping quotes, backslashes and control bytes. */
void hs_json_string(FILE *f, const char *s);
/* Write v with 10 significant digits, or null when v is NaN or infinite. */
void hs_json_number(FILE *f, double v);

#ifdef __cplusplus
}
#endif
#endif
