/*
 * SHA-256 (FIPS 180-4) as lowercase hex, for content-addressed caches: small,
 * dependency-free, and good enough for keys (not for secrets).
 */
#ifndef KAGENT_SHA256_H
#define KAGENT_SHA256_H

#include <stddef.h>

/* hex receives 64 lowercase hex digits and a terminating NUL. */
void kagent_sha256_hex(const void *data, size_t size, char hex[65]);
/* Hashes a whole file. Returns 0 or a negative errno and fills *cause. */
int kagent_sha256_file_hex(const char *path, char hex[65], char **cause);

#endif
