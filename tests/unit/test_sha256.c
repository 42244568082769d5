/* Unit tests for tools/base/sha256.c: the FIPS 180-4 test vectors, whole and streamed. */
#include "kagent/base/sha256.h"
#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static void
test_empty(void)
{
	char hex[KAGENT_SHA256_HEX_SIZE];

	kagent_sha256_hex("", 0, hex);
	CHECK_STRING(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void
test_abc(void)
{
	char hex[KAGENT_SHA256_HEX_SIZE];

	kagent_sha256_hex("abc", 3, hex);
	CHECK_STRING(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void
test_two_blocks(void)
{
	const char *text = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	char hex[KAGENT_SHA256_HEX_SIZE];

	kagent_sha256_hex(text, strlen(text), hex);
	CHECK_STRING(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void
test_million_a(void)
{
	struct kagent_sha256 context;
	uint8_t digest[KAGENT_SHA256_DIGEST_SIZE];
	char *buffer = malloc(1000000), hex[KAGENT_SHA256_HEX_SIZE];
	int i;

	memset(buffer, 'a', 1000000);
	kagent_sha256_hex(buffer, 1000000, hex);
	CHECK_STRING(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	/* The same in uneven pieces, crossing block edges. */
	kagent_sha256_init(&context);
	for (i = 0; i < 1000000; i += 997)
		kagent_sha256_update(&context, buffer + i, 1000000 - i < 997 ? 1000000 - i : 997);
	kagent_sha256_final(&context, digest);
	CHECK_INT(digest[0], 0xcd);
	CHECK_INT(digest[31], 0xd0);
	free(buffer);
}

static void
test_file(void)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_test_write_file(directory, "f.txt", "abc");
	char hex[KAGENT_SHA256_HEX_SIZE], *cause = NULL;

	CHECK_INT(kagent_sha256_file_hex(path, hex, &cause), 0);
	CHECK_STRING(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	unlink(path);
	CHECK(kagent_sha256_file_hex(path, hex, &cause) < 0);
	CHECK_CONTAINS(cause, "cannot open");
	free(cause);
	cause = NULL;
	/* A folder opens but cannot be read: the digest begun is given back. */
	CHECK_INT(kagent_sha256_file_hex(directory, hex, &cause), -EISDIR);
	CHECK_CONTAINS(cause, "cannot read");
	free(cause);
	rmdir(directory);
	free(path);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"empty", test_empty},	   {"abc", test_abc},	{"two_blocks", test_two_blocks},
    {"million_a", test_million_a}, {"file", test_file}, {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
