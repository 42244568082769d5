/*
 * Unit tests for a run's variants (agent/records/variants.c): numbering and lookup, the checks
 * on a new source, verdicts kept and committed, promotion through a stand-in evaluator, and
 * the state --resume takes back from the files and the trace records, and a run rebuilt
 * elsewhere from its trace records alone.
 */
#include "kagent/records/variants.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/records/variant_repository.h"

#include "test.h"

#include <errno.h>

#define PROBLEM_SOURCE "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"
#define VARIANT_SOURCE "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"

/* A repository with run "r1", the run's variants, and what the variants asked of their owner. */
struct fixture {
	char *directory;
	char *worktree;
	struct kagent_variant_repository *repository;
	struct kagent_variants *variants;
	json_t *records;		      /* the records written, in order */
	json_t *confirmation;		      /* the verdict the stand-in evaluator answers with */
	int evaluations;		      /* how many it was asked for */
	enum kagent_variants_purpose purpose; /* the purpose of the last one */
};

static void
record(void *data, const char *type, json_t *fields)
{
	struct fixture *fixture = data;

	json_object_set_new(fields, "type", json_string(type));
	json_array_append_new(fixture->records, fields);
}

/* Answers at once, as a session's evaluation would later, from the loop. */
static void
evaluate(void *data, struct kagent_variant *variant, enum kagent_variants_purpose purpose,
	 kagent_variants_verdict_callback callback, void *callback_data)
{
	struct fixture *fixture = data;

	(void)variant;
	fixture->evaluations++;
	fixture->purpose = purpose;
	callback(0, fixture->confirmation, callback_data);
}

static struct kagent_variants *
open_variants(struct fixture *fixture, enum kagent_target_baseline baseline)
{
	struct kagent_variants_options options = {
	    .repository = fixture->repository,
	    .run_id = "r1",
	    .worktree = fixture->worktree,
	    .baseline = baseline,
	    .evaluate = evaluate,
	    .record = record,
	    .data = fixture,
	};
	struct kagent_variants *variants = NULL;
	char *cause = NULL;

	CHECK_INT(kagent_variants_create(&options, &variants, &cause), 0);
	CHECK(cause == NULL);
	return variants;
}

static void
fixture_open(struct fixture *fixture, enum kagent_target_baseline baseline)
{
	char *cause = NULL;

	memset(fixture, 0, sizeof *fixture);
	fixture->directory = kagent_test_make_directory();
	CHECK_INT(kagent_variant_repository_open(fixture->directory, "relu", PROBLEM_SOURCE,
						 &fixture->repository, &cause),
		  0);
	CHECK_INT(kagent_variant_repository_start_run(fixture->repository, "r1", 0,
						      &fixture->worktree, &cause),
		  0);
	fixture->records = json_array();
	fixture->variants = open_variants(fixture, baseline);
}

static void
fixture_close(struct fixture *fixture)
{
	char *cause = NULL;

	kagent_variants_free(fixture->variants);
	kagent_variant_repository_close(fixture->repository);
	json_decref(fixture->records);
	json_decref(fixture->confirmation);
	CHECK_INT(kagent_paths_remove_tree(fixture->directory, &cause), 0);
	free(fixture->worktree);
	free(fixture->directory);
}

/* A verdict of status with these speedups and one trial of seed. */
static json_t *
verdict(const char *status, double eager, double compile, long long seed)
{
	return json_pack("{s:s, s:s, s:{s:f, s:f, s:{s:f}}, s:[{s:I}], s:{s:s}}", "status", status,
			 "reason", "checked", "timing", "speedup_vs_eager", eager,
			 "speedup_vs_compile", compile, "candidate", "median_ms", 0.5, "trials",
			 "seed", (json_int_t)seed, "environment", "gpu", "H100");
}

static const char *
record_type(const struct fixture *fixture, size_t index)
{
	return json_string_value(json_object_get(json_array_get(fixture->records, index), "type"));
}

static void
test_add_and_find(void)
{
	struct fixture fixture;
	struct kagent_variant *first, *second;
	char *cause = NULL, *on_disk = NULL;
	size_t size;

	fixture_open(&fixture, KAGENT_TARGET_BEST);
	CHECK(kagent_variants_find(fixture.variants, "latest") == NULL);
	CHECK(kagent_variants_add(fixture.variants, "", NULL, 1, &cause) == NULL);
	CHECK_CONTAINS(cause, "empty");
	free(cause);
	cause = NULL;
	CHECK(kagent_variants_add(fixture.variants, "import torch\n", NULL, 1, &cause) == NULL);
	CHECK_CONTAINS(cause, "no class ModelNew");
	free(cause);
	cause = NULL;

	first = kagent_variants_add(fixture.variants, VARIANT_SOURCE, NULL, 1, &cause);
	second = kagent_variants_add(fixture.variants, VARIANT_SOURCE "# 2\n", "tiles", 3, &cause);
	CHECK(first != NULL && second != NULL);
	CHECK_STRING(first->id, "v1");
	CHECK_STRING(first->note, "");
	CHECK_STRING(second->id, "v2");
	CHECK_STRING(second->note, "tiles");
	CHECK_INT(second->turn, 3);
	CHECK_INT(kagent_fileio_read(second->path, 1 << 20, &on_disk, &size, &cause), 0);
	CHECK_STRING(on_disk, VARIANT_SOURCE "# 2\n");
	free(on_disk);

	CHECK(kagent_variants_find(fixture.variants, "v1") == first);
	CHECK(kagent_variants_find(fixture.variants, "V2") == second);
	CHECK(kagent_variants_find(fixture.variants, "2") == second);
	CHECK(kagent_variants_find(fixture.variants, "latest") == second);
	CHECK(kagent_variants_find(fixture.variants, "v3") == NULL);
	CHECK(kagent_variants_find(fixture.variants, "v0") == NULL);
	CHECK(kagent_variants_find(fixture.variants, "v1x") == NULL);
	CHECK(kagent_variants_find(fixture.variants, NULL) == NULL);
	CHECK(kagent_variants_previous(fixture.variants, second) == first);
	CHECK(kagent_variants_previous(fixture.variants, first) == NULL);
	fixture_close(&fixture);
}

static void
test_speedup_follows_the_baseline(void)
{
	json_t *correct = verdict("correct", 3.0, 1.5, 1), *wrong = verdict("incorrect", 3, 1.5, 1);
	json_t *without_compile = verdict("correct", 3.0, 0, 1);
	struct fixture fixture;
	struct kagent_variants *eager, *compile;

	fixture_open(&fixture, KAGENT_TARGET_BEST);
	eager = open_variants(&fixture, KAGENT_TARGET_EAGER);
	compile = open_variants(&fixture, KAGENT_TARGET_COMPILE);
	CHECK(kagent_variants_speedup(fixture.variants, correct) == 1.5);
	CHECK(kagent_variants_speedup(fixture.variants, without_compile) == 3.0);
	CHECK(kagent_variants_speedup(eager, correct) == 3.0);
	CHECK(kagent_variants_speedup(compile, correct) == 1.5);
	CHECK(kagent_variants_speedup(compile, without_compile) == 3.0);
	CHECK(kagent_variants_speedup(fixture.variants, wrong) == 0.0);
	/* the same rule outside a live run, as kagent replay reads it */
	CHECK(kagent_variants_verdict_speedup(KAGENT_TARGET_BEST, correct) == 1.5);
	CHECK(kagent_variants_verdict_speedup(KAGENT_TARGET_EAGER, correct) == 3.0);
	CHECK(kagent_variants_verdict_speedup(KAGENT_TARGET_COMPILE, without_compile) == 3.0);
	CHECK(kagent_variants_verdict_speedup(KAGENT_TARGET_EAGER, wrong) == 0.0);
	kagent_variants_free(eager);
	kagent_variants_free(compile);
	json_decref(correct);
	json_decref(wrong);
	json_decref(without_compile);
	fixture_close(&fixture);
}

static void
test_verdicts_are_traced_and_committed(void)
{
	struct fixture fixture;
	struct kagent_variant *variant;
	json_t *first = verdict("correct", 2.0, 0, 7), *profile = verdict("correct", 9, 0, 8);
	json_t *failure = json_pack("{s:s, s:s}", "error", "worker", "message", "no worker");
	char *cause = NULL;

	fixture_open(&fixture, KAGENT_TARGET_BEST);
	variant = kagent_variants_add(fixture.variants, VARIANT_SOURCE, "first", 1, &cause);
	kagent_variants_take_verdict(fixture.variants, variant, KAGENT_VARIANTS_EVALUATE, 0, first);
	CHECK_INT(json_array_size(fixture.records), 2);
	CHECK_STRING(record_type(&fixture, 0), "verdict");
	CHECK_STRING(
	    json_string_value(json_object_get(json_array_get(fixture.records, 0), "purpose")),
	    "evaluate");
	CHECK_STRING(record_type(&fixture, 1), "commit");
	CHECK_STRING(
	    json_string_value(json_object_get(json_array_get(fixture.records, 1), "branch")),
	    "runs/r1");
	CHECK(variant->verdict == first);
	CHECK(variant->speedup == 2.0);
	CHECK(variant->commit_id != NULL && strlen(variant->commit_id) == 40);

	/* A profile is traced, but neither kept nor committed. */
	kagent_variants_take_verdict(fixture.variants, variant, KAGENT_VARIANTS_PROFILE, 0,
				     profile);
	CHECK_INT(json_array_size(fixture.records), 3);
	CHECK(variant->verdict == first);
	kagent_variants_take_verdict(fixture.variants, variant, KAGENT_VARIANTS_CONFIRM, -EIO,
				     failure);
	CHECK_INT(json_array_size(fixture.records), 4);
	CHECK_STRING(
	    json_string_value(json_object_get(json_array_get(fixture.records, 3), "status")),
	    "error");
	CHECK_STRING(
	    json_string_value(json_object_get(json_array_get(fixture.records, 3), "reason")),
	    "no worker");
	CHECK(kagent_variants_final_candidate(fixture.variants) == variant);
	json_decref(first);
	json_decref(profile);
	json_decref(failure);
	fixture_close(&fixture);
}

/* The message a promotion ended with, and whether best moved. */
struct promoted {
	int calls;
	int moved;
	char *message;
};

static void
promote_done(int moved, const char *message, void *data)
{
	struct promoted *promoted = data;

	promoted->calls++;
	promoted->moved = moved;
	free(promoted->message);
	promoted->message = kagent_strdup(message);
}

static void
test_promotion_moves_best_on_a_faster_confirmation(void)
{
	struct fixture fixture;
	struct promoted promoted = {0};
	struct kagent_variant *first, *second;
	json_t *fast = verdict("correct", 2.0, 0, 7), *wrong = verdict("incorrect", 0, 0, 9);
	char *cause = NULL, *best_path, *best_source = NULL;
	size_t size;

	fixture_open(&fixture, KAGENT_TARGET_BEST);
	first = kagent_variants_add(fixture.variants, VARIANT_SOURCE, NULL, 1, &cause);
	second = kagent_variants_add(fixture.variants, VARIANT_SOURCE "# 2\n", NULL, 2, &cause);

	/* Not evaluated: refused without an evaluation. */
	kagent_variants_promote(fixture.variants, first, "", promote_done, &promoted);
	CHECK_INT(promoted.calls, 1);
	CHECK_INT(promoted.moved, 0);
	CHECK_CONTAINS(promoted.message, "not evaluated");
	CHECK_INT(fixture.evaluations, 0);

	kagent_variants_take_verdict(fixture.variants, first, KAGENT_VARIANTS_EVALUATE, 0, fast);
	kagent_variants_take_verdict(fixture.variants, second, KAGENT_VARIANTS_EVALUATE, 0, fast);
	fixture.confirmation = verdict("correct", 1.8, 0, 11);
	kagent_variants_promote(fixture.variants, first, "faster", promote_done, &promoted);
	CHECK_INT(fixture.evaluations, 1);
	CHECK_INT(fixture.purpose, KAGENT_VARIANTS_CONFIRM);
	CHECK_INT(promoted.moved, 1);
	CHECK_CONTAINS(promoted.message, "best/r1 now points at it");
	CHECK(kagent_variants_best(fixture.variants) == first);
	CHECK(kagent_variants_best_speedup(fixture.variants) == 1.8);
	CHECK_STRING(record_type(&fixture, json_array_size(fixture.records) - 1), "best");
	best_path = kagent_asprintf("%s/best.py", fixture.worktree);
	CHECK_INT(kagent_fileio_read(best_path, 1 << 20, &best_source, &size, &cause), 0);
	CHECK_STRING(best_source, VARIANT_SOURCE);

	/* Confirmed, but not faster than the best; then wrong on unseen seeds. */
	kagent_variants_promote(fixture.variants, second, "", promote_done, &promoted);
	CHECK_INT(promoted.moved, 0);
	CHECK_CONTAINS(promoted.message, "not faster than the best v1");
	json_decref(fixture.confirmation);
	fixture.confirmation = json_incref(wrong);
	kagent_variants_promote(fixture.variants, second, "", promote_done, &promoted);
	CHECK_INT(promoted.moved, 0);
	CHECK_CONTAINS(promoted.message, "failed on unseen seeds");
	CHECK(kagent_variants_best(fixture.variants) == first);
	CHECK(kagent_variants_final_candidate(fixture.variants) == first);

	free(promoted.message);
	free(best_path);
	free(best_source);
	json_decref(fast);
	json_decref(wrong);
	fixture_close(&fixture);
}

static void
test_unseen_seeds_avoid_the_seen_ones(void)
{
	struct fixture fixture;
	struct kagent_variant *variant;
	json_t *seen = verdict("correct", 1.0, 0, 5);
	char *cause = NULL;
	int round;

	fixture_open(&fixture, KAGENT_TARGET_BEST);
	variant = kagent_variants_add(fixture.variants, VARIANT_SOURCE, NULL, 1, &cause);
	kagent_variants_take_verdict(fixture.variants, variant, KAGENT_VARIANTS_PROFILE, 0, seen);
	for (round = 0; round < 100; round++) {
		uint64_t seed = kagent_variants_unseen_seed(fixture.variants);

		CHECK(seed >= 1 && seed <= ((uint64_t)1 << 52));
		CHECK(!(5 >= seed && 5 < seed + 64));
	}
	json_decref(seen);
	fixture_close(&fixture);
}

static void
test_resume_takes_back_files_and_records(void)
{
	struct fixture fixture;
	struct promoted promoted = {0};
	struct kagent_variants *again;
	struct kagent_variant *first, *second, *resumed;
	json_t *fast = verdict("correct", 2.0, 0, 7), *record_item;
	char *cause = NULL;
	size_t index;

	fixture_open(&fixture, KAGENT_TARGET_BEST);
	first = kagent_variants_add(fixture.variants, VARIANT_SOURCE, NULL, 4, &cause);
	second = kagent_variants_add(fixture.variants, VARIANT_SOURCE "# 2\n", NULL, 5, &cause);
	kagent_variants_take_verdict(fixture.variants, first, KAGENT_VARIANTS_EVALUATE, 0, fast);
	fixture.confirmation = verdict("correct", 1.9, 0, 11);
	kagent_variants_promote(fixture.variants, first, "", promote_done, &promoted);
	CHECK_INT(promoted.moved, 1);

	again = open_variants(&fixture, KAGENT_TARGET_BEST);
	kagent_variants_load(again);
	CHECK(kagent_variants_find(again, "latest") != NULL);
	CHECK_STRING(kagent_variants_find(again, "latest")->id, "v2");
	CHECK_STRING(kagent_variants_find(again, "v2")->source, second->source);
	json_array_foreach(fixture.records, index, record_item)
	{
		/* The session adds the turn to each record it writes. */
		json_object_set_new(record_item, "turn", json_integer(4));
		kagent_variants_replay(again, record_item);
	}
	resumed = kagent_variants_find(again, "v1");
	CHECK(resumed->speedup == 2.0);
	CHECK_INT(resumed->turn, 4);
	CHECK_STRING(resumed->commit_id, first->commit_id);
	CHECK(json_equal(resumed->verdict, fast));
	CHECK(kagent_variants_best(again) == resumed);
	CHECK(kagent_variants_best_speedup(again) == 1.9);
	CHECK(kagent_variants_find(again, "v2")->commit_id == NULL);
	kagent_variants_free(again);
	free(promoted.message);
	json_decref(fast);
	fixture_close(&fixture);
}

/* verdict(), judged by the credit rule (docs/verdict.md). */
static json_t *
judged(const char *status, double eager, long long seed, int credited)
{
	json_t *object = verdict(status, eager, 0, seed);

	json_object_set_new(object, "credit",
			    json_pack("{s:b, s:s}", "credited", credited, "reason",
				      credited ? "own kernels ran 20% of the GPU time"
					       : "own kernels ran 0.015% of the GPU time"));
	return object;
}

static void
test_uncredited_speedups_never_count(void)
{
	struct fixture fixture;
	struct promoted promoted = {0};
	struct kagent_variant *library, *own;
	json_t *uncredited = judged("correct", 1.6, 7, 0), *credited = judged("correct", 1.2, 8, 1);
	json_t *rejected = judged("rejected", 0, 9, 0), *record;
	char *cause = NULL;

	fixture_open(&fixture, KAGENT_TARGET_BEST);
	CHECK(kagent_variants_speedup(fixture.variants, uncredited) == 0.0);
	CHECK(kagent_variants_speedup(fixture.variants, credited) == 1.2);
	CHECK(kagent_variants_speedup(fixture.variants, rejected) == 0.0);
	CHECK(kagent_variants_verdict_speedup(KAGENT_TARGET_EAGER, uncredited) == 0.0);

	/* Traced with its measured speedup, credited: false, and a credited speedup of 0. */
	library = kagent_variants_add(fixture.variants, VARIANT_SOURCE, NULL, 1, &cause);
	kagent_variants_take_verdict(fixture.variants, library, KAGENT_VARIANTS_EVALUATE, 0,
				     uncredited);
	record = json_array_get(fixture.records, 0);
	CHECK(json_is_false(json_object_get(record, "credited")));
	CHECK(json_real_value(json_object_get(record, "speedup")) == 0.0);
	CHECK(json_real_value(json_object_get(record, "speedup_vs_eager")) == 1.6);
	CHECK(library->speedup == 0.0);
	CHECK(library->commit_id != NULL);
	CHECK(kagent_variants_final_candidate(fixture.variants) == NULL);
	/* What a report shows when nothing is confirmed: the uncredited correct variant. */
	CHECK(kagent_variants_best_evaluated(fixture.variants) == library);

	/* Never the best: refused without an evaluation, and the model told why. */
	kagent_variants_promote(fixture.variants, library, "", promote_done, &promoted);
	CHECK_INT(promoted.moved, 0);
	CHECK_INT(fixture.evaluations, 0);
	CHECK_CONTAINS(promoted.message, "v1 cannot become the best: its speedup is not credited "
					 "(own kernels ran 0.015% of the GPU time)");

	/* A credited variant whose confirmation is not credited stays out too. */
	own = kagent_variants_add(fixture.variants, VARIANT_SOURCE "# 2\n", NULL, 2, &cause);
	kagent_variants_take_verdict(fixture.variants, own, KAGENT_VARIANTS_EVALUATE, 0, credited);
	CHECK(json_is_true(json_object_get(json_array_get(fixture.records, 2), "credited")));
	CHECK(kagent_variants_final_candidate(fixture.variants) == own);
	CHECK(kagent_variants_best_evaluated(fixture.variants) == library); /* 1.6x measured */
	fixture.confirmation = json_incref(uncredited);
	kagent_variants_promote(fixture.variants, own, "", promote_done, &promoted);
	CHECK_INT(fixture.evaluations, 1);
	CHECK_INT(promoted.moved, 0);
	CHECK_CONTAINS(promoted.message, "v2 is not credited on unseen seeds");
	CHECK(kagent_variants_best(fixture.variants) == NULL);
	json_decref(fixture.confirmation);
	fixture.confirmation = json_incref(credited);
	kagent_variants_promote(fixture.variants, own, "", promote_done, &promoted);
	CHECK_INT(promoted.moved, 1);
	CHECK(kagent_variants_best(fixture.variants) == own);

	free(promoted.message);
	json_decref(uncredited);
	json_decref(credited);
	json_decref(rejected);
	fixture_close(&fixture);
}

/* The evaluate call the session traces before it adds a variant (the model's arguments). */
static void
trace_evaluate_call(struct fixture *fixture, const char *source, const char *note)
{
	json_t *arguments = json_pack("{s:s, s:s}", "source", source, "note", note);
	char *text = json_dumps(arguments, JSON_COMPACT);

	json_array_append_new(fixture->records,
			      json_pack("{s:s, s:s, s:s, s:s}", "type", "tool_call", "id", "c",
					"name", "evaluate", "arguments", text));
	free(text);
	json_decref(arguments);
}

/* The run's commit ids on runs/r1, oldest first, as one text. */
static char *
branch_commits(struct kagent_variant_repository *repository)
{
	struct kagent_variant_commit *commits = NULL;
	size_t count = 0, index;
	char *cause = NULL, *text = kagent_strdup("");

	CHECK_INT(kagent_variant_repository_list_run(repository, "r1", &commits, &count, &cause),
		  0);
	for (index = 0; index < count; index++) {
		char *longer = kagent_asprintf("%s%s ", text, commits[index].commit_id);

		free(text);
		text = longer;
	}
	kagent_variant_commits_free(commits, count);
	return text;
}

static void
test_rebuild_makes_the_same_commits_elsewhere(void)
{
	struct fixture original, elsewhere, old_trace;
	struct promoted promoted = {0};
	struct kagent_variant *first, *second, *third;
	json_t *fast = verdict("correct", 2.0, 0, 7), *wrong = verdict("incorrect", 0, 0, 8);
	json_t *failure = json_pack("{s:s}", "message", "no worker"), *records, *item;
	char *cause = NULL, *commits, *rebuilt, *best = NULL, *best_again = NULL, *path, *file;
	size_t index, size;

	fixture_open(&original, KAGENT_TARGET_BEST);
	/* A call whose source is refused makes no variant; the next call's source is v1. */
	trace_evaluate_call(&original, "import torch\n", "refused");
	trace_evaluate_call(&original, VARIANT_SOURCE, "first");
	first = kagent_variants_add(original.variants, VARIANT_SOURCE, "first", 3, &cause);
	kagent_variants_take_verdict(original.variants, first, KAGENT_VARIANTS_EVALUATE, 0, fast);
	trace_evaluate_call(&original, VARIANT_SOURCE "# 2\n", "");
	second = kagent_variants_add(original.variants, VARIANT_SOURCE "# 2\n", "", 3, &cause);
	kagent_variants_take_verdict(original.variants, second, KAGENT_VARIANTS_EVALUATE, -EIO,
				     failure);
	trace_evaluate_call(&original, VARIANT_SOURCE "# 3\n", "third");
	third = kagent_variants_add(original.variants, VARIANT_SOURCE "# 3\n", "third", 3, &cause);
	kagent_variants_take_verdict(original.variants, third, KAGENT_VARIANTS_EVALUATE, 0, wrong);
	original.confirmation = verdict("correct", 1.9, 0, 11);
	kagent_variants_promote(original.variants, first, "", promote_done, &promoted);
	CHECK_INT(promoted.moved, 1);
	json_array_foreach(original.records, index, item)
	    json_object_set_new(item, "turn", json_integer(3));
	commits = branch_commits(original.repository);
	CHECK_INT(kagent_variant_repository_best(original.repository, "r1", &best, &cause), 0);

	/* Another machine: the same commits, files and best from the records alone. */
	fixture_open(&elsewhere, KAGENT_TARGET_BEST);
	records = json_deep_copy(original.records);
	CHECK_INT(kagent_variants_rebuild(elsewhere.variants, records, &cause), 0);
	CHECK(json_equal(records, original.records));
	CHECK_INT(json_array_size(elsewhere.records), 0);
	rebuilt = branch_commits(elsewhere.repository);
	CHECK_STRING(rebuilt, commits);
	CHECK_INT(kagent_variant_repository_best(elsewhere.repository, "r1", &best_again, &cause),
		  0);
	CHECK_STRING(best_again, best);
	CHECK_STRING(kagent_variants_find(elsewhere.variants, "v3")->source, third->source);
	CHECK(kagent_variants_find(elsewhere.variants, "v2")->commit_id == NULL);
	path = kagent_asprintf("%s/best.py", elsewhere.worktree);
	CHECK_INT(kagent_fileio_read(path, 1 << 20, &file, &size, &cause), 0);
	CHECK_STRING(file, VARIANT_SOURCE);
	free(file);
	free(path);
	free(rebuilt);
	json_decref(records);

	/* Records whose commit times differ make other commits: the records name the new ones. */
	fixture_open(&old_trace, KAGENT_TARGET_BEST);
	records = json_deep_copy(original.records);
	json_array_foreach(records, index, item)
	{
		if (json_object_get(item, "committed_at") != NULL)
			json_object_set_new(item, "committed_at", json_integer(1000));
	}
	CHECK_INT(kagent_variants_rebuild(old_trace.variants, records, &cause), 2);
	rebuilt = branch_commits(old_trace.repository);
	CHECK(strcmp(rebuilt, commits) != 0);
	json_array_foreach(records, index, item)
	{
		const char *commit = json_string_value(json_object_get(item, "commit"));

		if (commit != NULL)
			CHECK(strstr(rebuilt, commit) != NULL);
	}
	free(rebuilt);
	json_decref(records);
	fixture_close(&old_trace);

	/* A verdict without the call that carried its source cannot be rebuilt. */
	fixture_open(&old_trace, KAGENT_TARGET_BEST);
	records = json_pack("[{s:s, s:s, s:s, s:s}]", "type", "verdict", "variant", "v1", "purpose",
			    "evaluate", "status", "error");
	CHECK_INT(kagent_variants_rebuild(old_trace.variants, records, &cause), -EINVAL);
	CHECK_CONTAINS(cause, "no evaluate call with the source of v1");
	free(cause);
	json_decref(records);
	fixture_close(&old_trace);

	free(commits);
	free(best);
	free(best_again);
	free(promoted.message);
	json_decref(fast);
	json_decref(wrong);
	json_decref(failure);
	fixture_close(&elsewhere);
	fixture_close(&original);
}

/* A variant's parent is the earlier one sharing the most lines with it (at least a fifth of
 * its own; the later one on a tie), and the verdict record names it. */
static void
test_parent_is_read_from_the_sources(void)
{
	struct fixture fixture;
	struct kagent_variant *first, *second, *other, *fourth, *fifth;
	const char *base = "import torch\nimport triton\n\nclass ModelNew(torch.nn.Module):\n"
			   "    def forward(self, x):\n        return torch.relu(x)\n";
	const char *tuned = "import torch\nimport triton\n\nclass ModelNew(torch.nn.Module):\n"
			    "    def forward(self, x):\n        return torch.relu(x) * 1\n";
	const char *unrelated = "# a rewrite\nimport numpy\nclass ModelNew:\n    a = 1\n"
				"    b = 2\n    c = 3\n    d = 4\n    e = 5\n    f = 6\n";
	char *cause = NULL;
	json_t *record = NULL, *judgement;
	size_t index;

	fixture_open(&fixture, KAGENT_TARGET_EAGER);
	first = kagent_variants_add(fixture.variants, base, NULL, 1, &cause);
	second = kagent_variants_add(fixture.variants, tuned, NULL, 2, &cause);
	other = kagent_variants_add(fixture.variants, unrelated, NULL, 3, &cause);
	fourth = kagent_variants_add(fixture.variants, base, NULL, 4, &cause);
	fifth = kagent_variants_add(fixture.variants, tuned, NULL, 5, &cause);
	CHECK(first != NULL && second != NULL && other != NULL && fourth != NULL && fifth != NULL);
	CHECK(first->parent == NULL);
	CHECK(second->parent == first);
	CHECK(other->parent == NULL);	/* one shared line of nine: not its parent */
	CHECK(fourth->parent == first); /* all its lines; v2 shares one fewer */
	CHECK(fifth->parent == second);
	judgement = verdict("correct", 1.5, 0, 11);
	kagent_variants_take_verdict(fixture.variants, second, KAGENT_VARIANTS_EVALUATE, 0,
				     judgement);
	json_decref(judgement);
	for (index = 0; index < json_array_size(fixture.records); index++) {
		record = json_array_get(fixture.records, index);
		if (json_object_get(record, "parent") != NULL)
			break;
	}
	CHECK(index < json_array_size(fixture.records));
	CHECK_STRING(json_string_value(json_object_get(record, "parent")), "v1");
	fixture_close(&fixture);
}

static const struct kagent_test tests[] = {
    {"add_and_find", test_add_and_find},
    {"speedup_follows_the_baseline", test_speedup_follows_the_baseline},
    {"verdicts_are_traced_and_committed", test_verdicts_are_traced_and_committed},
    {"promotion_moves_best_on_a_faster_confirmation",
     test_promotion_moves_best_on_a_faster_confirmation},
    {"uncredited_speedups_never_count", test_uncredited_speedups_never_count},
    {"unseen_seeds_avoid_the_seen_ones", test_unseen_seeds_avoid_the_seen_ones},
    {"resume_takes_back_files_and_records", test_resume_takes_back_files_and_records},
    {"rebuild_makes_the_same_commits_elsewhere", test_rebuild_makes_the_same_commits_elsewhere},
    {"parent_is_read_from_the_sources", test_parent_is_read_from_the_sources},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
