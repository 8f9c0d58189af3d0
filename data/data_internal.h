/*
 * data/data_internal.h — helpers shared by the dataset readers (data/readers.c, data/digits.c).
 * Not installed.
 */
#ifndef HEARSAY_DATA_INTERNAL_H
#define HEARSAY_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Read a whole dataset file into a new buffer (*buf, *len; free() it). A gzip file (by its
 * magic; a name ending in .gz must have it) is inflated with zlib; a missing FILE is read as
 * FILE.gz when that exists. Files are regular and at most 2 GiB, inflated or not. Errors name
 * the file: -ENOENT missing, -EINVAL truncated or corrupt gzip data / too large / not a regular
 * file, -EIO read failure, -ENOMEM. */
int data_load_file(const char *path, uint8_t **buf, size_t *len);

#endif
