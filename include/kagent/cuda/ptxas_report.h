/*
 * A parser for the resource report that ptxas writes with -v (NVRTC puts it in
 * the program log): one record per entry function with registers, spills,
 * stack frame and memory use. Text in, structs out, no NVRTC needed, so it is
 * unit tested and fuzzed on literal logs.
 */
#ifndef KAGENT_PTXAS_REPORT_H
#define KAGENT_PTXAS_REPORT_H

#include <stddef.h>

/* Caps on what a (possibly hostile or truncated) log can make us allocate. */
#define KAGENT_PTXAS_REPORT_MAX_KERNELS 4096
#define KAGENT_PTXAS_REPORT_MAX_NAME 4096

struct kagent_ptxas_kernel {
	char *mangled_name;
	char *arch; /* "sm_90a"; NULL if the line did not say */
	/* -1 where the report did not say; ptxas leaves out zero-valued items. */
	int registers;
	int barriers;
	long long stack_frame_bytes;
	long long spill_store_bytes;
	long long spill_load_bytes;
	long long cumulative_stack_bytes;
	long long shared_bytes;	  /* static shared memory ("smem") */
	long long constant_bytes; /* all cmem[N] banks added up */
	long long local_bytes;	  /* "lmem" (older ptxas) */
	double compile_ms;	  /* ptxas's own time for this function, -1 if absent */
};

struct kagent_ptxas_report {
	struct kagent_ptxas_kernel *kernels;
	size_t kernel_count;
	long long global_bytes; /* "N bytes gmem", -1 if absent */
};

/*
 * Parses length bytes of log (need not be NUL-terminated). Lines that are not
 * part of a report are skipped, so a whole NVRTC log may be passed. Returns 0 or
 * a negative errno (-E2BIG past the caps) and fills *cause.
 */
int kagent_ptxas_report_parse(const char *log, size_t length,
			      struct kagent_ptxas_report **report_out, char **cause);
void kagent_ptxas_report_free(struct kagent_ptxas_report *report);

#endif
