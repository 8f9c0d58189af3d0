/*
 * hearsay/shaping.h — link shaping in user space: added latency, seeded jitter and a
 * bandwidth cap per link, applied by the transport on the sending side (the kernel here has
 * no netem, and straggler / Ethernet studies need slow links).
 *
 * Spec grammar (whitespace around tokens is ignored):
 *   spec   := rule ( ';' rule )*
 *   rule   := [ scope ':' ] param ( ',' param )*
 *   scope  := '*'            every link (same as no scope)
 *           | R '-' R        the links between ranks R and R, both directions
 *           | R '>' R        the link from the first rank to the second only
 *           | HOST           every link that starts or ends on host HOST (its hostname)
 *   param  := 'latency=' DUR | 'jitter=' DUR | 'bw=' RATE
 *   DUR    := NUMBER ( 'ns' | 'us' | 'ms' | 's' )
 *   RATE   := NUMBER ( 'bit' | 'Kbit' | 'Mbit' | 'Gbit' | 'B' | 'KB' | 'MB' | 'GB'
 *                    | 'KiB' | 'MiB' | 'GiB' ) [ '/s' ]          (K/M/G = 1000^n)
 * Ranges, checked where the spec is parsed: latency and jitter 0 to 3600 s, bw 1 bit/s to
 * 1e13 B/s (80 Tbit/s); ranks in a scope have at most 9 digits (and must be in the job).
 * Rules apply in order; a later matching rule overrides the parameters it sets.
 * Example: "latency=2ms,jitter=1ms,bw=1Gbit; 0-3:latency=5ms; host1:bw=100Mbit".
 *
 * Model per directed link (store and forward): a message of n bytes offered at time t
 * leaves at d = max(t, previous d) + n / bw and is released to the network at
 * d + latency + U(0, jitter) (seeded), never before the previous release on that link, so a
 * link never reorders. Latency is therefore a minimum; jitter only adds.
 */
#ifndef HEARSAY_SHAPING_H
#define HEARSAY_SHAPING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_shape hs_shape_t;
typedef struct hs_shaper hs_shaper_t;

/* Parameters of one directed link; bw_Bps == 0 means no cap. */
typedef struct hs_link_shape {
    double latency_s, jitter_s, bw_Bps;
} hs_link_shape_t;

/* Parse a spec. NULL or "" gives an empty spec (no shaping). On a bad spec returns -EINVAL
 * with a message quoting the spec and pointing at the bad part. */
int hs_shape_parse(const char *spec, hs_shape_t **out);
void hs_shape_free(hs_shape_t **s);
/* Number of rules parsed. */
int hs_shape_nrules(const hs_shape_t *s);
/* Resolve the parameters of the link src -> dst whose ranks run on hosts src_host and
 * dst_host (hostnames; NULL never matches a host rule). */
void hs_shape_link(const hs_shape_t *s, int src, int dst, const char *src_host,
                   const char *dst_host, hs_link_shape_t *out);

/* The sending side's state for rank `rank` of `size`: hosts[r] is rank r's hostname. */
int hs_shaper_create(const hs_shape_t *s, int rank, int size, const char *const *hosts,
                     uint64_t seed, hs_shaper_t **out);
void hs_shaper_free(hs_shaper_t **sh);
/* 1 when the link to dst is shaped at all. */
int hs_shaper_active(const hs_shaper_t *sh, int dst);
/* Chunk size to use towards dst: no more than `chunk`, and on a capped link about 2 ms of
 * its bandwidth (at least 16 KiB) so the cap is smooth. */
size_t hs_shaper_chunk(const hs_shaper_t *sh, int dst, size_t chunk);
/* Offer `bytes` to the link to dst at time now (hs_now()); returns the time at which they
 * may be handed to the network. Advances the link's state. */
double hs_shaper_release(hs_shaper_t *sh, int dst, size_t bytes, double now);

#ifdef __cplusplus
}
#endif
#endif
