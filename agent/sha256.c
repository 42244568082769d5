/*
 * SHA-256 (FIPS 180-4) for content-addressed caches (see include/kagent/sha256.h).
 * Written out here rather than taken from OpenSSL so the core library has no
 * crypto dependency just to name cache files.
 */
#include "kagent/sha256.h"

#include "kagent/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

struct kagent__sha256 {
	uint32_t state[8];
	uint64_t length; /* bytes hashed so far */
	unsigned char block[64];
	size_t used; /* bytes waiting in block */
};

static const uint32_t kagent__sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t
kagent__sha256_rotate(uint32_t value, unsigned bits)
{
	return (value >> bits) | (value << (32 - bits));
}

static void
kagent__sha256_block(struct kagent__sha256 *context, const unsigned char *block)
{
	uint32_t w[64], a, b, c, d, e, f, g, h;
	int index;

	for (index = 0; index < 16; index++)
		w[index] = (uint32_t)block[index * 4] << 24 | (uint32_t)block[index * 4 + 1] << 16 |
			   (uint32_t)block[index * 4 + 2] << 8 | (uint32_t)block[index * 4 + 3];
	for (index = 16; index < 64; index++) {
		uint32_t s0 = kagent__sha256_rotate(w[index - 15], 7) ^
			      kagent__sha256_rotate(w[index - 15], 18) ^ (w[index - 15] >> 3);
		uint32_t s1 = kagent__sha256_rotate(w[index - 2], 17) ^
			      kagent__sha256_rotate(w[index - 2], 19) ^ (w[index - 2] >> 10);
		w[index] = w[index - 16] + s0 + w[index - 7] + s1;
	}
	a = context->state[0];
	b = context->state[1];
	c = context->state[2];
	d = context->state[3];
	e = context->state[4];
	f = context->state[5];
	g = context->state[6];
	h = context->state[7];
	for (index = 0; index < 64; index++) {
		uint32_t s1 = kagent__sha256_rotate(e, 6) ^ kagent__sha256_rotate(e, 11) ^
			      kagent__sha256_rotate(e, 25);
		uint32_t choose = (e & f) ^ (~e & g);
		uint32_t t1 = h + s1 + choose + kagent__sha256_k[index] + w[index];
		uint32_t s0 = kagent__sha256_rotate(a, 2) ^ kagent__sha256_rotate(a, 13) ^
			      kagent__sha256_rotate(a, 22);
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

static void
kagent__sha256_init(struct kagent__sha256 *context)
{
	static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

	memcpy(context->state, initial, sizeof initial);
	context->length = 0;
	context->used = 0;
}

static void
kagent__sha256_update(struct kagent__sha256 *context, const void *data, size_t size)
{
	const unsigned char *bytes = data;

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
			kagent__sha256_block(context, context->block);
			context->used = 0;
		}
	}
}

static void
kagent__sha256_finish(struct kagent__sha256 *context, char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	uint64_t bits = context->length * 8;
	unsigned char pad = 0x80, length_bytes[8];
	int index;

	kagent__sha256_update(context, &pad, 1);
	pad = 0;
	while (context->used != 56)
		kagent__sha256_update(context, &pad, 1);
	for (index = 0; index < 8; index++)
		length_bytes[index] = (unsigned char)(bits >> (56 - 8 * index));
	kagent__sha256_update(context, length_bytes, 8);
	for (index = 0; index < 32; index++) {
		unsigned char byte =
		    (unsigned char)(context->state[index / 4] >> (24 - 8 * (index % 4)));

		hex[index * 2] = digits[byte >> 4];
		hex[index * 2 + 1] = digits[byte & 15];
	}
	hex[64] = '\0';
}

void
kagent_sha256_hex(const void *data, size_t size, char hex[65])
{
	struct kagent__sha256 context;

	kagent__sha256_init(&context);
	kagent__sha256_update(&context, data, size);
	kagent__sha256_finish(&context, hex);
}

int
kagent_sha256_file_hex(const char *path, char hex[65], char **cause)
{
	struct kagent__sha256 context;
	unsigned char buffer[65536];
	int fd, result = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		result = -errno;
		*cause = kagent_asprintf("cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	kagent__sha256_init(&context);
	for (;;) {
		ssize_t got = read(fd, buffer, sizeof buffer);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			result = -errno;
			*cause = kagent_asprintf("cannot read %s: %s", path, strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		kagent__sha256_update(&context, buffer, (size_t)got);
	}
	kagent__sha256_finish(&context, hex);
out:
	if (fd >= 0)
		close(fd);
	return result;
}
