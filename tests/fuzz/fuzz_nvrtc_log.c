/* Fuzzes the NVRTC log parser (tools/cuda/nvrtc_log.c): the input is a whole program log. */
#include "fuzz.h"

#include "kagent/cuda/nvrtc_log.h"

#include <stdlib.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kagent_nvrtc_diagnostic *diagnostics = NULL;
	size_t count = 0;
	char *cause = NULL;
	enum kagent_nvrtc_severity severity;

	if (kagent_nvrtc_log_parse((const char *)data, size, &diagnostics, &count, &cause) == 0) {
		for (size_t index = 0; index < count; index++) {
			/* Every severity a diagnostic carries reads back through its name. */
			if (kagent_nvrtc_log_severity_parse(
				kagent_nvrtc_log_severity_name(diagnostics[index].severity),
				&severity) != 0)
				abort();
		}
	}
	free(cause);
	kagent_nvrtc_log_free(diagnostics, count);
	return 0;
}
