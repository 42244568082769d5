/* SHA-256 through OpenSSL's EVP digests (see include/kagent/base/sha256.h). */
#include "kagent/base/sha256.h"
#include "kagent/base/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* EVP fails only when it cannot allocate; kagent aborts then, as kagent_malloc does. */
static void
sha256__check(int ok, const char *step)
{
	if (ok)
		return;
	fprintf(stderr, "kagent: OpenSSL's SHA-256 failed in %s (out of memory?)\n", step);
	abort();
}

void
kagent_sha256_init(struct kagent_sha256 *context)
{
	context->digest = EVP_MD_CTX_new();
	sha256__check(context->digest != NULL, "EVP_MD_CTX_new");
	sha256__check(EVP_DigestInit_ex(context->digest, EVP_sha256(), NULL), "EVP_DigestInit_ex");
}

void
kagent_sha256_update(struct kagent_sha256 *context, const void *data, size_t size)
{
	sha256__check(EVP_DigestUpdate(context->digest, data, size), "EVP_DigestUpdate");
}

void
kagent_sha256_final(struct kagent_sha256 *context, uint8_t digest[KAGENT_SHA256_DIGEST_SIZE])
{
	sha256__check(EVP_DigestFinal_ex(context->digest, digest, NULL), "EVP_DigestFinal_ex");
	EVP_MD_CTX_free(context->digest);
	context->digest = NULL;
}

static void
sha256__to_hex(const uint8_t digest[KAGENT_SHA256_DIGEST_SIZE], char hex[KAGENT_SHA256_HEX_SIZE])
{
	static const char digits[] = "0123456789abcdef";
	int i;

	for (i = 0; i < KAGENT_SHA256_DIGEST_SIZE; i++) {
		hex[i * 2] = digits[digest[i] >> 4];
		hex[i * 2 + 1] = digits[digest[i] & 15];
	}
	hex[64] = '\0';
}

void
kagent_sha256_hex(const void *data, size_t size, char hex[KAGENT_SHA256_HEX_SIZE])
{
	uint8_t digest[KAGENT_SHA256_DIGEST_SIZE];

	sha256__check(EVP_Digest(data, size, digest, NULL, EVP_sha256(), NULL), "EVP_Digest");
	sha256__to_hex(digest, hex);
}

int
kagent_sha256_file_hex(const char *path, char hex[KAGENT_SHA256_HEX_SIZE], char **cause)
{
	struct kagent_sha256 context = {NULL};
	uint8_t digest[KAGENT_SHA256_DIGEST_SIZE];
	uint8_t buffer[65536];
	int fd, error = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		error = -errno;
		if (cause != NULL)
			*cause = kagent_asprintf("cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	kagent_sha256_init(&context);
	for (;;) {
		ssize_t got = read(fd, buffer, sizeof buffer);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			error = -errno;
			if (cause != NULL)
				*cause =
				    kagent_asprintf("cannot read %s: %s", path, strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		kagent_sha256_update(&context, buffer, (size_t)got);
	}
	kagent_sha256_final(&context, digest);
	sha256__to_hex(digest, hex);
out:
	EVP_MD_CTX_free(context.digest); /* still held only when a read failed */
	if (fd >= 0)
		close(fd);
	return error;
}
