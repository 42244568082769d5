/*
 * Fuzzes the verdict (tools/evaluator/verdict.c), the code that interprets the worker's
 * result. Input: one byte of context (bit 0: a CUDA device with a GPU, else the CPU; bit 1:
 * the baselines came from the cache; bit 2: the wall basis asked for, else device), then the
 * result as JSON. A verdict that builds is also
 * rendered as text, as `kagent eval` prints it.
 */
#include "fuzz.h"

#include "kagent/cuda/cuda_driver.h"
#include "kagent/evaluator/verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *fuzz_verdict__sink;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kagent_gpu_info gpu = {.index = 0, .device_count = 1};
	struct kagent_verdict_input in = {
	    .problem_path = "/p.py",
	    .problem_sha256 = "aa",
	    .candidate_path = "/c.py",
	    .candidate_sha256 = "bb",
	    .backend = "triton",
	    .wall_seconds = 3.5,
	};
	json_t *result, *verdict = NULL;
	char *cause = NULL;

	if (size < 1)
		return 0;
	result = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, NULL);
	/* The worker client hands on objects only. */
	if (!json_is_object(result)) {
		json_decref(result);
		return 0;
	}
	if (fuzz_verdict__sink == NULL && (fuzz_verdict__sink = fopen("/dev/null", "w")) == NULL)
		abort();
	snprintf(gpu.driver, sizeof gpu.driver, "13.0");
	in.result = result;
	in.device = data[0] & 1 ? "cuda" : "cpu";
	in.gpu = data[0] & 1 ? &gpu : NULL;
	in.baselines_cached = (data[0] & 2) != 0;
	in.basis = data[0] & 4 ? KAGENT_VERDICT_BASIS_WALL : KAGENT_VERDICT_BASIS_DEVICE;
	if (kagent_verdict_build(&in, &verdict, &cause) == 0) {
		kagent_verdict_exit_status(verdict);
		kagent_verdict_render_text(verdict, fuzz_verdict__sink);
	}
	free(cause);
	json_decref(verdict);
	json_decref(result);
	return 0;
}
