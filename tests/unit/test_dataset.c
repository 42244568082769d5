/* Tests of dataset records: one type per field, the credit rule, the environment as text,
 * the whole verdict as JSON text, and the --only filters. */
#include "kagent/records/dataset.h"

#include "test.h"

#include <errno.h>
#include <math.h>

static const char *const record_keys[] = {
    "schema",
    "id",
    "problem_id",
    "problem_name",
    "problem_source",
    "run_id",
    "variant",
    "parent",
    "turn",
    "source",
    "backend",
    "messages",
    "model",
    "provider",
    "status",
    "reason",
    "speedup_vs_eager",
    "speedup_vs_eager_ci95",
    "speedup_vs_compile",
    "speedup_vs_compile_ci95",
    "timing_basis",
    "candidate_ms",
    "credited",
    "environment",
    "verdict",
    "kagent_version",
};

/* A log of one run holding variant; the strings are borrowed from the test. */
static void
make_log(struct kagent_run_log *log, struct kagent_run_variant *variant, json_t *verdict)
{
	static char problem_source[] = "class Model: pass\n";

	memset(log, 0, sizeof *log);
	memset(variant, 0, sizeof *variant);
	log->start = json_pack("{s:s}", "kagent_version", "0.1.0");
	log->run_id = "run-1";
	log->problem_name = "relu";
	log->problem_sha256 = "aa";
	log->problem_source = problem_source;
	log->model = "m-1";
	log->provider = NULL;
	variant->id = "v2";
	variant->parent = "v1";
	variant->turn = 2;
	variant->source = "class ModelNew: pass\n";
	snprintf(variant->source_sha256, sizeof variant->source_sha256, "bb");
	variant->verdict = verdict;
	variant->messages = json_pack("[{s:s}]", "role", "system");
	log->variants = variant;
	log->count = 1;
}

static void
free_log(struct kagent_run_log *log, struct kagent_run_variant *variant)
{
	json_decref(log->start);
	json_decref(variant->verdict);
	json_decref(variant->messages);
}

static void
test_correct_record(void)
{
	struct kagent_run_log log;
	struct kagent_run_variant variant;
	json_t *verdict =
	    json_pack("{s:s, s:s, s:{s:s}, s:{s:i, s:[f, i], s:n, s:s, s:{s:f}}, s:{s:b}, "
		      "s:{s:s, s:s, s:f, s:i, s:n}}",
		      "status", "correct", "reason", "all trials passed", "candidate", "backend",
		      "triton", "timing", "speedup_vs_eager", 2, "speedup_vs_eager_ci95", 1.5, 3,
		      "speedup_vs_compile", "basis", "device", "candidate", "median_ms", 0.5,
		      "credit", "credited", 1, "environment", "device", "cuda", "gpu",
		      "NVIDIA H100", "compute_capability", 9.0, "driver", 580, "triton");
	json_t *record, *parsed;
	size_t index;

	make_log(&log, &variant, verdict);
	record = kagent_dataset_record(&log, &variant);
	CHECK_INT(json_object_size(record), sizeof record_keys / sizeof *record_keys);
	for (index = 0; index < sizeof record_keys / sizeof *record_keys; index++)
		CHECK(json_object_get(record, record_keys[index]) != NULL);
	CHECK_STRING(json_string_value(json_object_get(record, "schema")), KAGENT_DATASET_SCHEMA);
	CHECK_STRING(json_string_value(json_object_get(record, "id")), "bb");
	CHECK_STRING(json_string_value(json_object_get(record, "problem_id")), "aa");
	CHECK_STRING(json_string_value(json_object_get(record, "parent")), "v1");
	CHECK_STRING(json_string_value(json_object_get(record, "backend")), "triton");
	CHECK(json_is_null(json_object_get(record, "provider")));
	/* numbers as reals whatever the verdict held, so a column has one type */
	CHECK(json_is_real(json_object_get(record, "speedup_vs_eager")));
	CHECK(json_real_value(json_object_get(record, "speedup_vs_eager")) == 2.0);
	CHECK(json_is_real(json_array_get(json_object_get(record, "speedup_vs_eager_ci95"), 1)));
	CHECK(json_is_null(json_object_get(record, "speedup_vs_compile")));
	CHECK(json_is_null(json_object_get(record, "speedup_vs_compile_ci95")));
	CHECK(json_real_value(json_object_get(record, "candidate_ms")) == 0.5);
	CHECK(json_is_true(json_object_get(record, "credited")));
	CHECK_STRING(json_string_value(json_object_get(json_object_get(record, "environment"),
						       "compute_capability")),
		     "9");
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(record, "environment"), "driver")),
	    "580");
	CHECK(json_is_null(json_object_get(json_object_get(record, "environment"), "triton")));
	CHECK(json_is_null(json_object_get(json_object_get(record, "environment"), "python")));
	parsed = json_loads(json_string_value(json_object_get(record, "verdict")), 0, NULL);
	CHECK(json_equal(parsed, verdict));
	CHECK_STRING(json_string_value(json_object_get(record, "kagent_version")), "0.1.0");
	CHECK(kagent_dataset_keep(KAGENT_DATASET_CORRECT, record));
	CHECK(kagent_dataset_keep(KAGENT_DATASET_CREDITED, record));
	json_decref(parsed);
	json_decref(record);
	free_log(&log, &variant);
}

static void
test_credit_and_filters(void)
{
	struct kagent_run_log log;
	struct kagent_run_variant variant;
	json_t *record;

	/* correct but not credited: kept by correct, not by credited */
	make_log(&log, &variant,
		 json_pack("{s:s, s:{s:b}}", "status", "correct", "credit", "credited", 0));
	record = kagent_dataset_record(&log, &variant);
	CHECK(json_is_false(json_object_get(record, "credited")));
	CHECK(kagent_dataset_keep(KAGENT_DATASET_ALL, record));
	CHECK(kagent_dataset_keep(KAGENT_DATASET_CORRECT, record));
	CHECK(!kagent_dataset_keep(KAGENT_DATASET_CREDITED, record));
	json_decref(record);
	free_log(&log, &variant);
	/* incorrect: never credited, even where the credit object says so; no timing at all */
	make_log(&log, &variant,
		 json_pack("{s:s, s:{s:b}, s:n}", "status", "incorrect", "credit", "credited", 1,
			   "timing"));
	record = kagent_dataset_record(&log, &variant);
	CHECK(json_is_false(json_object_get(record, "credited")));
	CHECK(json_is_null(json_object_get(record, "speedup_vs_eager")));
	CHECK(json_is_null(json_object_get(record, "timing_basis")));
	CHECK(json_is_null(json_object_get(record, "reason")));
	CHECK(kagent_dataset_keep(KAGENT_DATASET_ALL, record));
	CHECK(!kagent_dataset_keep(KAGENT_DATASET_CORRECT, record));
	json_decref(record);
	free_log(&log, &variant);
	CHECK_INT(kagent_dataset_filter_from_name("correct"), KAGENT_DATASET_CORRECT);
	CHECK_INT(kagent_dataset_filter_from_name("credited"), KAGENT_DATASET_CREDITED);
	CHECK_INT(kagent_dataset_filter_from_name("fast"), -EINVAL);
	CHECK_INT(kagent_dataset_filter_from_name(NULL), -EINVAL);
}

static const struct kagent_test tests[] = {
    {"correct_record", test_correct_record},
    {"credit_and_filters", test_credit_and_filters},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
