/*
 * What the libFuzzer harnesses (tests/fuzz/fuzz_<parser>.c) share: a scratch folder for the
 * parsers that read a path (the config, the trace) or connect to one (the worker client), and
 * input cut into pieces at points the input itself picks, for the incremental parsers. Linked
 * into every harness, which also gets its LLVMFuzzerInitialize from here (logging off).
 */
#ifndef KAGENT_FUZZ_H
#define KAGENT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points, which it declares nowhere for C. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The path of name in this process's scratch folder (made on first use, removed at exit with
 * what is in it); the string lives until exit.
 */
const char *kagent_fuzz_path(const char *name);
/* Writes size bytes to the scratch file "input", replacing it; returns its path. */
const char *kagent_fuzz_write_input(const uint8_t *data, size_t size);

/* Takes one piece; returns 0 to go on, else stops the feeding and is returned. */
typedef int (*kagent_fuzz_piece_function)(void *target, const uint8_t *piece, size_t length);
/*
 * Hands data to function in pieces of 1 to stride bytes, their lengths drawn from a generator
 * seeded with stride (stride 0: one piece). Returns 0 or function's first non-zero value.
 */
int kagent_fuzz_feed(const uint8_t *data, size_t size, uint8_t stride,
		     kagent_fuzz_piece_function function, void *target);

#endif
