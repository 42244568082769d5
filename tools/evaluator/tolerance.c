/*
 * The tolerance table the judge applies (see include/kagent/evaluator/tolerance.h). The
 * values are kagent's, not KernelBench's: the norm-relative bound is tighter
 * than the elementwise one so that a candidate cannot pass by being off
 * everywhere within atol (near-zero outputs against small references).
 */
#include "kagent/evaluator/tolerance.h"

#include <string.h>

const struct kagent_tolerance kagent_tolerance_table[] = {
    {.dtype = "float64", .atol = 1e-6, .rtol = 1e-6, .norm = 1e-7},
    {.dtype = "float32", .atol = 1e-2, .rtol = 1e-2, .norm = 2e-3},
    {.dtype = "float16", .atol = 1e-2, .rtol = 1e-2, .norm = 5e-3},
    {.dtype = "bfloat16", .atol = 2e-2, .rtol = 2e-2, .norm = 1e-2},
    {.dtype = "float8_e4m3fn", .atol = 1e-1, .rtol = 1e-1, .norm = 5e-2},
    {.dtype = "float8_e5m2", .atol = 1e-1, .rtol = 1e-1, .norm = 5e-2},
    /* Complex outputs are compared on their float components. */
    {.dtype = "complex64", .atol = 1e-2, .rtol = 1e-2, .norm = 2e-3},
    {.dtype = "complex128", .atol = 1e-6, .rtol = 1e-6, .norm = 1e-7},
    {.dtype = NULL},
};

/* Python spellings of the same dtypes, so a problem's "torch.half" finds its entry. */
static const struct {
	const char *alias;
	const char *dtype;
} tolerance__aliases[] = {
    {"double", "float64"},   {"float", "float32"},	{"half", "float16"},
    {"cfloat", "complex64"}, {"cdouble", "complex128"}, {NULL, NULL},
};

const struct kagent_tolerance *
kagent_tolerance_lookup(const char *dtype)
{
	const struct kagent_tolerance *entry;
	int index;

	if (dtype == NULL)
		return NULL;
	if (strncmp(dtype, "torch.", 6) == 0)
		dtype += 6;
	for (index = 0; tolerance__aliases[index].alias != NULL; index++) {
		if (strcmp(dtype, tolerance__aliases[index].alias) == 0) {
			dtype = tolerance__aliases[index].dtype;
			break;
		}
	}
	for (entry = kagent_tolerance_table; entry->dtype != NULL; entry++) {
		if (strcmp(entry->dtype, dtype) == 0)
			return entry;
	}
	return NULL;
}

json_t *
kagent_tolerance_table_to_json(void)
{
	const struct kagent_tolerance *entry;
	json_t *table = json_object();

	for (entry = kagent_tolerance_table; entry->dtype != NULL; entry++)
		json_object_set_new(table, entry->dtype,
				    json_pack("{s:f, s:f, s:f}", "atol", entry->atol, "rtol",
					      entry->rtol, "norm", entry->norm));
	return table;
}
