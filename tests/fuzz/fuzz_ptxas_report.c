/* Fuzzes the ptxas -v report parser (tools/cuda/ptxas_report.c): the input is a whole log. */
#include "fuzz.h"

#include "kagent/cuda/ptxas_report.h"

#include <stdlib.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kagent_ptxas_report *report = NULL;
	char *cause = NULL;

	if (kagent_ptxas_report_parse((const char *)data, size, &report, &cause) == 0 &&
	    report->kernel_count > KAGENT_PTXAS_REPORT_MAX_KERNELS)
		abort();
	free(cause);
	kagent_ptxas_report_free(report);
	return 0;
}
