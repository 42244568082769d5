/*
 * SHA-256 (FIPS 180-4), small and dependency-free: kagent keys its caches and
 * verdicts by the content of problems and candidates.
 */
#ifndef KAGENT_SHA256_H
#define KAGENT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define KAGENT_SHA256_DIGEST_SIZE 32
#define KAGENT_SHA256_HEX_SIZE 65 /* 64 hex digits and the NUL */

struct kagent_sha256 {
	uint32_t state[8];
	uint64_t length; /* bytes hashed so far */
	uint8_t block[64];
	size_t used; /* bytes waiting in block */
};

void kagent_sha256_init(struct kagent_sha256 *context);
void kagent_sha256_update(struct kagent_sha256 *context, const void *data, size_t size);
void kagent_sha256_final(struct kagent_sha256 *context, uint8_t digest[KAGENT_SHA256_DIGEST_SIZE]);
/* Writes the lowercase hex digest of data into hex. */
void kagent_sha256_hex(const void *data, size_t size, char hex[KAGENT_SHA256_HEX_SIZE]);
/* Hex digest of a file's content; 0 or a negative errno with *cause. */
int kagent_sha256_file_hex(const char *path, char hex[KAGENT_SHA256_HEX_SIZE], char **cause);

#endif
