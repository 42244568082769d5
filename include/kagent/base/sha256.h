/*
 * SHA-256 for kagent's caches and verdicts, which are keyed by the content of
 * problems and candidates. The digest is OpenSSL's (libcrypto's EVP interface,
 * already loaded into kagent by libcurl and libgit2); this module keeps the
 * hex spelling and the file reading in one place.
 */
#ifndef KAGENT_SHA256_H
#define KAGENT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define KAGENT_SHA256_DIGEST_SIZE 32
#define KAGENT_SHA256_HEX_SIZE 65 /* 64 hex digits and the NUL */

/* OpenSSL's EVP_MD_CTX, left opaque so callers need not include OpenSSL. */
struct evp_md_ctx_st;

struct kagent_sha256 {
	struct evp_md_ctx_st *digest;
};

/*
 * A streaming digest: init, any number of updates, then final, which also
 * releases what init took. OpenSSL fails here only when out of memory, which
 * aborts like kagent's other allocations.
 */
void kagent_sha256_init(struct kagent_sha256 *context);
void kagent_sha256_update(struct kagent_sha256 *context, const void *data, size_t size);
void kagent_sha256_final(struct kagent_sha256 *context, uint8_t digest[KAGENT_SHA256_DIGEST_SIZE]);
/* Writes the lowercase hex digest of data into hex. */
void kagent_sha256_hex(const void *data, size_t size, char hex[KAGENT_SHA256_HEX_SIZE]);
/* Hex digest of a file's content; 0 or a negative errno with *cause. */
int kagent_sha256_file_hex(const char *path, char hex[KAGENT_SHA256_HEX_SIZE], char **cause);

#endif
