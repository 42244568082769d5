/* SHA-256 after FIPS 180-4 (see include/kagent/base/sha256.h). */
#include "kagent/base/sha256.h"
#include "kagent/base/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const uint32_t sha256__k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
sha256__transform(struct kagent_sha256 *context, const uint8_t *block)
{
	uint32_t w[64], a, b, c, d, e, f, g, h;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)block[i * 4] << 24 | (uint32_t)block[i * 4 + 1] << 16 |
		       (uint32_t)block[i * 4 + 2] << 8 | (uint32_t)block[i * 4 + 3];
	for (i = 16; i < 64; i++) {
		uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = context->state[0];
	b = context->state[1];
	c = context->state[2];
	d = context->state[3];
	e = context->state[4];
	f = context->state[5];
	g = context->state[6];
	h = context->state[7];
	for (i = 0; i < 64; i++) {
		uint32_t s1 = ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25);
		uint32_t choice = (e & f) ^ (~e & g);
		uint32_t t1 = h + s1 + choice + sha256__k[i] + w[i];
		uint32_t s0 = ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22);
		uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
		uint32_t t2 = s0 + majority;

		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	context->state[0] += a;
	context->state[1] += b;
	context->state[2] += c;
	context->state[3] += d;
	context->state[4] += e;
	context->state[5] += f;
	context->state[6] += g;
	context->state[7] += h;
}

void
kagent_sha256_init(struct kagent_sha256 *context)
{
	static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

	memcpy(context->state, initial, sizeof initial);
	context->length = 0;
	context->used = 0;
}

void
kagent_sha256_update(struct kagent_sha256 *context, const void *data, size_t size)
{
	const uint8_t *bytes = data;

	context->length += size;
	while (size > 0) {
		size_t take = 64 - context->used;

		if (take > size)
			take = size;
		memcpy(context->block + context->used, bytes, take);
		context->used += take;
		bytes += take;
		size -= take;
		if (context->used == 64) {
			sha256__transform(context, context->block);
			context->used = 0;
		}
	}
}

void
kagent_sha256_final(struct kagent_sha256 *context, uint8_t digest[KAGENT_SHA256_DIGEST_SIZE])
{
	uint64_t bits = context->length * 8;
	int i;

	context->block[context->used++] = 0x80;
	if (context->used > 56) {
		memset(context->block + context->used, 0, 64 - context->used);
		sha256__transform(context, context->block);
		context->used = 0;
	}
	memset(context->block + context->used, 0, 56 - context->used);
	for (i = 0; i < 8; i++)
		context->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256__transform(context, context->block);
	for (i = 0; i < 8; i++) {
		digest[i * 4] = (uint8_t)(context->state[i] >> 24);
		digest[i * 4 + 1] = (uint8_t)(context->state[i] >> 16);
		digest[i * 4 + 2] = (uint8_t)(context->state[i] >> 8);
		digest[i * 4 + 3] = (uint8_t)context->state[i];
	}
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
	struct kagent_sha256 context;
	uint8_t digest[KAGENT_SHA256_DIGEST_SIZE];

	kagent_sha256_init(&context);
	kagent_sha256_update(&context, data, size);
	kagent_sha256_final(&context, digest);
	sha256__to_hex(digest, hex);
}

int
kagent_sha256_file_hex(const char *path, char hex[KAGENT_SHA256_HEX_SIZE], char **cause)
{
	struct kagent_sha256 context;
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
	if (fd >= 0)
		close(fd);
	return error;
}
