/* optim/efsgd.h — error-feedback compressed gradient exchange for all-reduce SGD
 * (optim/efsgd.c; used by optim/allreduce_sgd.c when --compress is given). */
#ifndef HEARSAY_OPTIM_EFSGD_H
#define HEARSAY_OPTIM_EFSGD_H

#include "hearsay/algo.h"

/* Its messages' tags in the all-reduce algorithm's range (hs_dist_tag; optim/allreduce_sgd.c
 * uses offset 0): part b's are EFSGD_TAG_GATHER + b, so at most EFSGD_MAX_PARTS buckets. */
enum { EFSGD_TAG_GATHER = 1, EFSGD_MAX_PARTS = HS_DIST_TAGS - EFSGD_TAG_GATHER };

typedef struct efsgd efsgd_t;

/* State for d (its option --compress names the compressor). bucket_bytes > 0: the gradient in
 * buckets of whole layers of about that size, each sent during backward where the loop offers
 * gradient-ready notifications (optim/efsgd.c); <= 0: one exchange after backward. */
int efsgd_create(efsgd_t **out, hs_dist_t *d, double bucket_bytes);
/* Round t: replace d->grads by the mean over ranks of the compressed error-corrected gradients
 * (identical on every rank), keeping what this rank's compressor dropped for the next round. */
int efsgd_exchange(efsgd_t *e, long t);
/* Complete own sends (bounded). */
int efsgd_drain(efsgd_t *e);
void efsgd_destroy(efsgd_t **e);
/* Checkpoint state: the error memory (n floats). */
size_t efsgd_state_bytes(const efsgd_t *e);
int efsgd_state_save(const efsgd_t *e, void *buf);
int efsgd_state_load(efsgd_t *e, const void *buf);

#endif
