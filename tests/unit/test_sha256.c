/* Unit tests for SHA-256 (agent/sha256.c) against the FIPS 180-4 examples. */
#include "kagent/sha256.h"

#include "test.h"

#include <errno.h>
#include <unistd.h>

static void
test_known_vectors(void)
{
	char hex[65], *million = malloc(1000000);

	kagent_sha256_hex("", 0, hex);
	CHECK_STRING(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	kagent_sha256_hex("abc", 3, hex);
	CHECK_STRING(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	kagent_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
	CHECK_STRING(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	CHECK(million != NULL);
	memset(million, 'a', 1000000);
	kagent_sha256_hex(million, 1000000, hex);
	CHECK_STRING(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(million);
}

static void
test_file(void)
{
	char *directory = kagent_test_make_directory(), *path, *missing, *cause = NULL, hex[65];

	path = kagent_test_write_file(directory, "abc", "abc");
	CHECK_INT(kagent_sha256_file_hex(path, hex, &cause), 0);
	CHECK_STRING(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	missing = kagent_test_write_file(directory, "x", "");
	unlink(missing);
	CHECK_INT(kagent_sha256_file_hex(missing, hex, &cause), -ENOENT);
	CHECK_CONTAINS(cause, "cannot open");
	free(cause);
	free(path);
	free(missing);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"known_vectors", test_known_vectors},
    {"file", test_file},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
