/* Unit tests for tools/evaluator/tolerance.c. */
#include "kagent/evaluator/tolerance.h"
#include "test.h"

static void
test_lookup(void)
{
	const struct kagent_tolerance *entry = kagent_tolerance_lookup("float32");

	CHECK(entry != NULL);
	CHECK(entry->atol == 1e-2 && entry->rtol == 1e-2 && entry->norm == 2e-3);
	entry = kagent_tolerance_lookup("torch.bfloat16");
	CHECK(entry != NULL && entry->norm == 1e-2);
	entry = kagent_tolerance_lookup("half");
	CHECK(entry != NULL && strcmp(entry->dtype, "float16") == 0);
	CHECK(kagent_tolerance_lookup("float8_e4m3fn")->atol == 1e-1);
	CHECK(kagent_tolerance_lookup("complex128")->norm == 1e-7);
	CHECK(kagent_tolerance_lookup("int32") == NULL);
	CHECK(kagent_tolerance_lookup(NULL) == NULL);
}

static void
test_json(void)
{
	json_t *table = kagent_tolerance_table_to_json();
	json_t *entry = json_object_get(table, "float64");

	CHECK(json_is_object(entry));
	CHECK(json_real_value(json_object_get(entry, "atol")) == 1e-6);
	CHECK(json_real_value(json_object_get(json_object_get(table, "float8_e5m2"), "norm")) ==
	      5e-2);
	CHECK_INT(json_object_size(table), 8);
	json_decref(table);
}

static const struct kagent_test tests[] = {
    {"lookup", test_lookup},
    {"json", test_json},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
