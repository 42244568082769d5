/*
 * compile: NVRTC compiles the model's CUDA C++ and reports errors with line
 * numbers and each kernel's registers, spills and shared memory, without
 * spending GPU time. NVRTC blocks for a fraction of a second, so the compile
 * runs on libuv's thread pool and the loop keeps serving other sessions.
 */
#include "kagent/base/alloc.h"
#include "kagent/cuda/compile.h"
#include "kagent/model_tools/tool_call.h"

#include <stdlib.h>
#include <string.h>

struct tool_compile__job {
	uv_work_t work;
	struct kagent_tool_call *call;
	char *source;
	char *arch;
	struct kagent_compile_result *result;
	char *cause;
};

static void
tool_compile__work(uv_work_t *work)
{
	struct tool_compile__job *compile = work->data;
	struct kagent_compile_request request = {
	    .source = compile->source,
	    .file_name = "kernel.cu",
	    .arch = compile->arch,
	    .use_cache = true,
	};

	if (kagent_compile_source(&request, &compile->result, &compile->cause) < 0 &&
	    compile->cause == NULL)
		compile->cause = kagent_strdup("the compiler failed");
}

static void
tool_compile__after(uv_work_t *work, int status)
{
	struct tool_compile__job *compile = work->data;
	struct kagent_tool_call *call = compile->call;
	char *text = NULL;
	size_t size = 0;
	FILE *stream;
	int failed = 1;

	if (compile->result != NULL && (stream = open_memstream(&text, &size)) != NULL) {
		kagent_compile_result_render_text(compile->result, stream);
		fclose(stream);
		failed = !compile->result->success;
	} else {
		text = kagent_asprintf("compile: %s",
				       compile->cause != NULL ? compile->cause : "cancelled");
	}
	kagent_compile_result_free(compile->result);
	free(compile->source);
	free(compile->arch);
	free(compile->cause);
	free(compile);
	kagent_tool_call_finish(call, failed, text);
}

static void
tool_compile__run(struct kagent_tool_call *call)
{
	struct tool_compile__job *compile = kagent_calloc(1, sizeof *compile);
	const char *arch = kagent_tool_string_argument(call, "arch");
	char *cause = NULL;

	if (arch != NULL && kagent_compile_validate_arch(arch, &cause) < 0) {
		free(compile);
		kagent_tool_call_finish(call, 1, cause);
		return;
	}
	compile->call = call;
	compile->source = kagent_strdup(kagent_tool_string_argument(call, "cuda_source"));
	compile->arch = arch != NULL ? kagent_strdup(arch) : NULL;
	compile->work.data = compile;
	uv_queue_work(call->host->loop, &compile->work, tool_compile__work, tool_compile__after);
}

const struct kagent_tool kagent_tool_compile = {
    .name = "compile",
    .parameters = "{\"type\": \"object\", \"properties\": {"
		  "\"cuda_source\": {\"type\": \"string\", \"description\": \"CUDA C++ source "
		  "(the kernels only, as kagent_runner.cuda loads them)\"}, "
		  "\"arch\": {\"type\": \"string\", \"description\": \"e.g. sm_90a (default)\"}}, "
		  "\"required\": [\"cuda_source\"]}",
    .run = tool_compile__run,
};
