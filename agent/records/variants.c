/*
 * The variants of one run (see include/kagent/records/variants.h): in memory
 * in the order they arrived, each also a file in the run's variants folder
 * (what evaluations read and --resume reads back), each evaluated one a commit
 * on runs/<run>, and the best one behind best/<run> and best.py.
 */
#include "kagent/records/variants.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/log.h"
#include "kagent/records/variant_repository.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* A variant's source, as the model sends it and as --resume reads it back: a candidate file
 * larger than this is not a kernel. */
#define VARIANTS_SOURCE_CAP ((size_t)1 << 20)

struct kagent_variants {
	struct kagent_variant_repository *repository;
	char *run_id;
	char *worktree;
	char *directory;
	enum kagent_target_baseline baseline;
	kagent_variants_evaluate_function evaluate;
	kagent_variants_record_function record;
	void *data;

	struct kagent_variant **items;
	size_t count;
	struct kagent_variant *best;
	double best_speedup;
	json_t *seen_seeds;
};

int
kagent_variants_create(const struct kagent_variants_options *options,
		       struct kagent_variants **variants_out, char **cause)
{
	struct kagent_variants *variants = kagent_calloc(1, sizeof *variants);
	int status;

	variants->repository = options->repository;
	variants->run_id = kagent_strdup(options->run_id);
	variants->worktree = kagent_strdup(options->worktree);
	variants->directory = kagent_asprintf(
	    "%s/variants/%s", kagent_variant_repository_directory(options->repository),
	    options->run_id);
	variants->baseline = options->baseline;
	variants->evaluate = options->evaluate;
	variants->record = options->record;
	variants->data = options->data;
	variants->seen_seeds = json_array();
	status = kagent_fileio_make_directories(variants->directory, 0755, cause);
	if (status < 0) {
		kagent_variants_free(variants);
		variants = NULL;
	}
	*variants_out = variants;
	return status;
}

static void
variants__free_variant(struct kagent_variant *variant)
{
	free(variant->id);
	free(variant->source);
	free(variant->path);
	free(variant->note);
	json_decref(variant->verdict);
	free(variant->commit_id);
	free(variant->line_hashes);
	free(variant);
}

void
kagent_variants_free(struct kagent_variants *variants)
{
	size_t index;

	if (variants == NULL)
		return;
	for (index = 0; index < variants->count; index++)
		variants__free_variant(variants->items[index]);
	free(variants->items);
	json_decref(variants->seen_seeds);
	free(variants->run_id);
	free(variants->worktree);
	free(variants->directory);
	free(variants);
}

/* Appends a variant whose source is already on disk at path (new or resumed). */
static int
variants__compare_hashes(const void *left, const void *right)
{
	uint64_t a = *(const uint64_t *)left, b = *(const uint64_t *)right;

	return a < b ? -1 : a > b;
}

/* The hashes (FNV-1a) of a source's lines without their surrounding blanks, blank lines left
 * out, sorted. */
static uint64_t *
variants__line_hashes(const char *source, size_t *count_out)
{
	uint64_t *hashes = NULL;
	size_t count = 0, capacity = 0;
	const char *line = source;

	while (*line != '\0') {
		const char *end = strchr(line, '\n'), *last;
		uint64_t hash = 14695981039346656037ULL;

		if (end == NULL)
			end = line + strlen(line);
		last = end;
		while (line < last && (*line == ' ' || *line == '\t'))
			line++;
		while (last > line && (last[-1] == ' ' || last[-1] == '\t' || last[-1] == '\r'))
			last--;
		if (last > line) {
			for (; line < last; line++)
				hash = (hash ^ (unsigned char)*line) * 1099511628211ULL;
			if (count == capacity) {
				capacity = capacity ? 2 * capacity : 64;
				hashes = kagent_realloc(hashes, capacity * sizeof *hashes);
			}
			hashes[count++] = hash;
		}
		line = *end == '\n' ? end + 1 : end;
	}
	if (count > 1)
		qsort(hashes, count, sizeof *hashes, variants__compare_hashes);
	*count_out = count;
	return hashes;
}

/* How many lines two sorted hash lists share, counted as multisets. */
static size_t
variants__shared_lines(const uint64_t *a, size_t a_count, const uint64_t *b, size_t b_count)
{
	size_t i = 0, j = 0, shared = 0;

	while (i < a_count && j < b_count) {
		if (a[i] == b[j]) {
			shared++;
			i++;
			j++;
		} else if (a[i] < b[j])
			i++;
		else
			j++;
	}
	return shared;
}

/* The parent of variant among the variants before it (see struct kagent_variant). */
static const struct kagent_variant *
variants__parent(const struct kagent_variants *variants, const struct kagent_variant *variant)
{
	const struct kagent_variant *parent = NULL;
	size_t index, best = 0;

	for (index = 0; index < variants->count && variants->items[index] != variant; index++) {
		const struct kagent_variant *earlier = variants->items[index];
		size_t shared = variants__shared_lines(variant->line_hashes, variant->line_count,
						       earlier->line_hashes, earlier->line_count);

		if (shared > 0 && shared >= best) {
			parent = earlier;
			best = shared;
		}
	}
	return parent != NULL && 5 * best >= variant->line_count ? parent : NULL;
}

static struct kagent_variant *
variants__append(struct kagent_variants *variants, char *source, char *path, const char *note,
		 int turn)
{
	struct kagent_variant *variant = kagent_calloc(1, sizeof *variant);

	variants->items =
	    kagent_realloc(variants->items, (variants->count + 1) * sizeof *variants->items);
	variants->items[variants->count++] = variant;
	variant->number = (int)variants->count;
	variant->id = kagent_asprintf("v%d", variant->number);
	variant->turn = turn;
	variant->source = source;
	variant->path = path;
	variant->note = kagent_strdup(note != NULL ? note : "");
	variant->line_hashes = variants__line_hashes(source, &variant->line_count);
	variant->parent = variants__parent(variants, variant);
	return variant;
}

/* The path of the next variant's file. */
static char *
variants__next_path(const struct kagent_variants *variants)
{
	return kagent_asprintf("%s/v%zu.py", variants->directory, variants->count + 1);
}

struct kagent_variant *
kagent_variants_add(struct kagent_variants *variants, const char *source, const char *note,
		    int turn, char **cause)
{
	char *path;
	size_t length = source != NULL ? strlen(source) : 0;

	if (length == 0) {
		*cause = kagent_strdup("the source is empty: pass the whole Python file");
		return NULL;
	}
	if (length > VARIANTS_SOURCE_CAP) {
		*cause = kagent_asprintf("the source is %zu bytes; the limit is %zu", length,
					 VARIANTS_SOURCE_CAP);
		return NULL;
	}
	if (strstr(source, "ModelNew") == NULL) {
		*cause = kagent_strdup("the source defines no class ModelNew: write the whole "
				       "Python file, with ModelNew and its kernels");
		return NULL;
	}
	path = variants__next_path(variants);
	if (kagent_fileio_write_atomic(path, source, length, cause) < 0) {
		free(path);
		return NULL;
	}
	return variants__append(variants, kagent_strdup(source), path, note, turn);
}

void
kagent_variants_load(struct kagent_variants *variants)
{
	for (;;) {
		char *path = variants__next_path(variants), *source = NULL, *cause = NULL;
		size_t size;

		if (kagent_fileio_read(path, VARIANTS_SOURCE_CAP, &source, &size, &cause) < 0) {
			free(path);
			free(cause);
			return;
		}
		variants__append(variants, source, path, "", 0);
	}
}

struct kagent_variant *
kagent_variants_find(const struct kagent_variants *variants, const char *name)
{
	char *end;
	long number;

	if (name == NULL || variants->count == 0)
		return NULL;
	if (strcmp(name, "latest") == 0)
		return variants->items[variants->count - 1];
	if (name[0] == 'v' || name[0] == 'V')
		name++;
	number = strtol(name, &end, 10);
	if (end == name || *end != '\0' || number < 1 || (size_t)number > variants->count)
		return NULL;
	return variants->items[number - 1];
}

struct kagent_variant *
kagent_variants_previous(const struct kagent_variants *variants,
			 const struct kagent_variant *variant)
{
	return variant->number > 1 ? variants->items[variant->number - 2] : NULL;
}

struct kagent_variant *
kagent_variants_best(const struct kagent_variants *variants)
{
	return variants->best;
}

double
kagent_variants_best_speedup(const struct kagent_variants *variants)
{
	return variants->best_speedup;
}

struct kagent_variant *
kagent_variants_final_candidate(const struct kagent_variants *variants)
{
	struct kagent_variant *fastest = NULL;
	size_t index;

	if (variants->best != NULL)
		return variants->best;
	for (index = 0; index < variants->count; index++) {
		struct kagent_variant *variant = variants->items[index];

		if (variant->speedup > 0 && variant->commit_id != NULL &&
		    (fastest == NULL || variant->speedup > fastest->speedup))
			fastest = variant;
	}
	return fastest;
}

/* ---- verdicts and seeds ---- */

static double variants__measured_speedup(enum kagent_target_baseline baseline,
					 const json_t *verdict);

struct kagent_variant *
kagent_variants_best_evaluated(const struct kagent_variants *variants)
{
	struct kagent_variant *best = NULL;
	double best_speedup = 0.0;
	size_t index;

	for (index = 0; index < variants->count; index++) {
		struct kagent_variant *variant = variants->items[index];
		double speedup;

		if (variant->verdict == NULL)
			continue;
		speedup = variants__measured_speedup(variants->baseline, variant->verdict);
		if (speedup > best_speedup || (best_speedup == 0.0 && speedup == 0.0)) {
			best = variant;
			best_speedup = speedup;
		}
	}
	return best;
}

static double
variants__timing_number(const json_t *verdict, const char *key)
{
	const json_t *value = json_object_get(json_object_get(verdict, "timing"), key);

	return json_is_number(value) ? json_number_value(value) : 0.0;
}

/* The speedup against baseline whether credited or not; 0 unless correct. */
static double
variants__measured_speedup(enum kagent_target_baseline baseline, const json_t *verdict)
{
	const char *status = json_string_value(json_object_get(verdict, "status"));
	double eager = variants__timing_number(verdict, "speedup_vs_eager");
	double compile = variants__timing_number(verdict, "speedup_vs_compile");

	if (status == NULL || strcmp(status, "correct") != 0)
		return 0.0;
	switch (baseline) {
	case KAGENT_TARGET_EAGER:
		return eager;
	case KAGENT_TARGET_COMPILE:
		return compile > 0 ? compile : eager;
	case KAGENT_TARGET_BEST:
	default:
		/* Against the faster baseline the speedup is the smaller of the two. */
		return compile > 0 && compile < eager ? compile : eager;
	}
}

/* The credit rule (docs/verdict.md): a correct verdict that says credited: false. One from
 * before the rule has no credit object and keeps its speedup. */
static int
variants__uncredited(const json_t *verdict)
{
	const char *status = json_string_value(json_object_get(verdict, "status"));

	return status != NULL && strcmp(status, "correct") == 0 &&
	       json_is_false(json_object_get(json_object_get(verdict, "credit"), "credited"));
}

/* Why a verdict is not credited, for a message. */
static const char *
variants__credit_reason(const json_t *verdict)
{
	const char *reason =
	    json_string_value(json_object_get(json_object_get(verdict, "credit"), "reason"));

	return reason != NULL ? reason : "its own kernels ran too little of the GPU time";
}

double
kagent_variants_verdict_speedup(enum kagent_target_baseline baseline, const json_t *verdict)
{
	return variants__uncredited(verdict) ? 0.0 : variants__measured_speedup(baseline, verdict);
}

double
kagent_variants_speedup(const struct kagent_variants *variants, const json_t *verdict)
{
	return kagent_variants_verdict_speedup(variants->baseline, verdict);
}

/* Remembers every seed a verdict used, so confirmations can pick unseen ones. */
static void
variants__remember_seeds(struct kagent_variants *variants, const json_t *verdict)
{
	const json_t *trial;
	size_t index;

	json_array_foreach(json_object_get(verdict, "trials"), index, trial)
	{
		json_t *seed = json_object_get(trial, "seed");

		if (json_is_integer(seed))
			json_array_append(variants->seen_seeds, seed);
	}
}

uint64_t
kagent_variants_unseen_seed(const struct kagent_variants *variants)
{
	for (;;) {
		uint64_t seed = 0;
		const json_t *item;
		size_t index;
		int clash = 0;

		if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
			seed = (uint64_t)time(NULL) * 2654435761u;
		/* Positive and far from overflow, as the runner's generators want it. */
		seed = (seed >> 2) % ((uint64_t)1 << 52) + 1;
		json_array_foreach(variants->seen_seeds, index, item)
		{
			uint64_t seen = (uint64_t)json_integer_value(item);

			if (seen >= seed && seen < seed + 64)
				clash = 1;
		}
		if (!clash)
			return seed;
	}
}

static const char *
variants__purpose_name(enum kagent_variants_purpose purpose)
{
	switch (purpose) {
	case KAGENT_VARIANTS_PROFILE:
		return "profile";
	case KAGENT_VARIANTS_CONFIRM:
		return "confirm";
	case KAGENT_VARIANTS_FINAL:
		return "final";
	case KAGENT_VARIANTS_EVALUATE:
	default:
		return "evaluate";
	}
}

static char *
variants__trailer_number(double value)
{
	return kagent_asprintf("%.4g", value);
}

/* Commits an evaluated variant with its verdict in the trailers, as of seconds (since 1970):
 * the same variant, verdict and time make the same commit on any machine. */
static int
variants__commit_at(struct kagent_variants *variants, struct kagent_variant *variant,
		    const json_t *verdict, long long seconds, char **commit_id, char **cause)
{
	const json_t *environment = json_object_get(verdict, "environment");
	const json_t *first_trial = json_array_get(json_object_get(verdict, "trials"), 0);
	const char *status = json_string_value(json_object_get(verdict, "status"));
	const char *gpu = json_string_value(json_object_get(environment, "gpu"));
	char *subject, *eager, *compile, *milliseconds, *turn, *seed;
	int result;

	eager = variants__trailer_number(variants__timing_number(verdict, "speedup_vs_eager"));
	compile = variants__trailer_number(variants__timing_number(verdict, "speedup_vs_compile"));
	milliseconds = variants__trailer_number(json_number_value(json_object_get(
	    json_object_get(json_object_get(verdict, "timing"), "candidate"), "median_ms")));
	turn = kagent_asprintf("%d", variant->turn);
	seed = kagent_asprintf("%lld",
			       (long long)json_integer_value(json_object_get(first_trial, "seed")));
	subject = variants__uncredited(verdict)
		      ? kagent_asprintf("%s: %s, %.2fx, not credited", variant->id, status,
					variants__measured_speedup(variants->baseline, verdict))
		      : kagent_asprintf("%s: %s, %.2fx", variant->id, status ? status : "unknown",
					variant->speedup);
	{
		const struct kagent_trailer trailers[] = {
		    {"Kagent-Run", variants->run_id},
		    {"Kagent-Variant", variant->id},
		    {"Kagent-Turn", turn},
		    {"Kagent-Status", status ? status : "unknown"},
		    {"Kagent-Speedup-Eager", eager},
		    {"Kagent-Speedup-Compile", compile},
		    {"Kagent-Candidate-Ms", milliseconds},
		    {"Kagent-Seed", seed},
		    {"Kagent-GPU", gpu != NULL ? gpu : "none"},
		};

		result = kagent_variant_repository_commit(
		    variants->repository, variants->run_id, "candidate.py", variant->source,
		    subject, variant->note[0] != '\0' ? variant->note : NULL, trailers,
		    sizeof trailers / sizeof trailers[0], seconds, commit_id, cause);
	}
	free(subject);
	free(eager);
	free(compile);
	free(milliseconds);
	free(turn);
	free(seed);
	return result;
}

/* Commits an evaluated variant now and records the commit, with its time. */
static void
variants__commit(struct kagent_variants *variants, struct kagent_variant *variant,
		 const json_t *verdict)
{
	long long seconds = (long long)time(NULL);
	char *commit_id = NULL, *cause = NULL, *branch;

	if (variants__commit_at(variants, variant, verdict, seconds, &commit_id, &cause) < 0) {
		kagent_log(KAGENT_LOG_ERROR, "commit of %s failed: %s", variant->id, cause);
		free(cause);
		return;
	}
	branch = kagent_asprintf("runs/%s", variants->run_id);
	free(variant->commit_id);
	variant->commit_id = commit_id;
	variants->record(variants->data, "commit",
			 json_pack("{s:s, s:s, s:s, s:I}", "variant", variant->id, "commit",
				   commit_id, "branch", branch, "committed_at", seconds));
	free(branch);
}

void
kagent_variants_take_verdict(struct kagent_variants *variants, struct kagent_variant *variant,
			     enum kagent_variants_purpose purpose, int status,
			     const json_t *verdict)
{
	double speedup;
	json_t *record;

	if (status != 0) {
		variants->record(variants->data, "verdict",
				 json_pack("{s:s, s:s, s:s, s:O}", "variant", variant->id,
					   "purpose", variants__purpose_name(purpose), "status",
					   "error", "reason", json_object_get(verdict, "message")));
		return;
	}
	speedup = kagent_variants_speedup(variants, verdict);
	variants__remember_seeds(variants, verdict);
	record = json_pack(
	    "{s:s, s:s, s:O, s:O, s:f, s:f, s:f, s:f, s:O}", "variant", variant->id, "purpose",
	    variants__purpose_name(purpose), "status", json_object_get(verdict, "status"), "reason",
	    json_object_get(verdict, "reason"), "speedup", speedup, "speedup_vs_eager",
	    variants__timing_number(verdict, "speedup_vs_eager"), "speedup_vs_compile",
	    variants__timing_number(verdict, "speedup_vs_compile"), "candidate_ms",
	    json_number_value(json_object_get(
		json_object_get(json_object_get(verdict, "timing"), "candidate"), "median_ms")),
	    "verdict", verdict);
	/* speedup is the credited one; reports tell an uncredited variant by this */
	json_object_set_new(record, "credited", json_boolean(!variants__uncredited(verdict)));
	json_object_set_new(record, "parent",
			    variant->parent != NULL ? json_string(variant->parent->id)
						    : json_null());
	variants->record(variants->data, "verdict", record);
	if (purpose != KAGENT_VARIANTS_EVALUATE)
		return;
	json_decref(variant->verdict);
	variant->verdict = json_incref((json_t *)verdict);
	variant->speedup = speedup;
	variants__commit(variants, variant, verdict);
}

/* ---- the best ref ---- */

/* Writes the best variant's source beside the worktree's files as best.py. */
static void
variants__write_best_file(const struct kagent_variants *variants,
			  const struct kagent_variant *variant)
{
	char *path = kagent_asprintf("%s/best.py", variants->worktree), *cause = NULL;

	if (kagent_fileio_write_atomic(path, variant->source, strlen(variant->source), &cause) <
	    0) {
		kagent_log(KAGENT_LOG_ERROR, "%s", cause);
		free(cause);
	}
	free(path);
}

int
kagent_variants_move_best(struct kagent_variants *variants, struct kagent_variant *variant,
			  double speedup, char **cause)
{
	int status = kagent_variant_repository_move_best(variants->repository, variants->run_id,
							 variant->commit_id, cause);
	json_t *previous = variants->best != NULL ? json_real(variants->best_speedup) : json_null();

	if (status < 0) {
		json_decref(previous);
		return status;
	}
	variants->best = variant;
	variants->best_speedup = speedup;
	variants__write_best_file(variants, variant);
	variants->record(variants->data, "best",
			 json_pack("{s:s, s:s, s:f, s:s, s:o}", "variant", variant->id, "commit",
				   variant->commit_id, "speedup", speedup, "baseline",
				   kagent_target_baseline_name(variants->baseline), "previous",
				   previous));
	return 0;
}

struct variants__promotion {
	struct kagent_variants *variants;
	struct kagent_variant *variant;
	kagent_variants_promote_callback callback;
	void *data;
};

static void
variants__confirmed(int status, const json_t *verdict, void *data)
{
	struct variants__promotion *promotion = data;
	struct kagent_variants *variants = promotion->variants;
	struct kagent_variant *variant = promotion->variant;
	double speedup = status == 0 ? kagent_variants_speedup(variants, verdict) : 0.0;
	char *message, *cause = NULL;
	int moved = 0;

	if (status < 0)
		message = kagent_asprintf("%s could not be confirmed: %s", variant->id,
					  json_string_value(json_object_get(verdict, "message")));
	else if (variants__uncredited(verdict))
		message = kagent_asprintf("%s is not credited on unseen seeds: %s; best not moved",
					  variant->id, variants__credit_reason(verdict));
	else if (speedup <= 0)
		message = kagent_asprintf("%s failed on unseen seeds: %s: %s; best not moved",
					  variant->id,
					  json_string_value(json_object_get(verdict, "status")),
					  json_string_value(json_object_get(verdict, "reason")));
	else if (variants->best != NULL && speedup <= variants->best_speedup)
		message = kagent_asprintf("%s confirmed at %.2fx, not faster than the best %s at "
					  "%.2fx; best not moved",
					  variant->id, speedup, variants->best->id,
					  variants->best_speedup);
	else if (kagent_variants_move_best(variants, variant, speedup, &cause) < 0)
		message = kagent_asprintf("%s confirmed at %.2fx, but the best ref could not "
					  "move: %s",
					  variant->id, speedup, cause);
	else {
		moved = 1;
		message = kagent_asprintf("%s confirmed on unseen seeds at %.2fx: best/%s now "
					  "points at it",
					  variant->id, speedup, variants->run_id);
	}
	free(cause);
	promotion->callback(moved, message, promotion->data);
	free(message);
	free(promotion);
}

void
kagent_variants_promote(struct kagent_variants *variants, struct kagent_variant *variant,
			const char *message, kagent_variants_promote_callback callback, void *data)
{
	struct variants__promotion *promotion;
	char *text;

	if (variants__uncredited(variant->verdict)) {
		text = kagent_asprintf("%s cannot become the best: its speedup is not credited "
				       "(%s)",
				       variant->id, variants__credit_reason(variant->verdict));
		callback(0, text, data);
		free(text);
		return;
	}
	if (variant->verdict == NULL || variant->speedup <= 0 || variant->commit_id == NULL) {
		text = kagent_asprintf("%s cannot become the best: only a correct, evaluated "
				       "variant can (its status: %s)",
				       variant->id,
				       variant->verdict != NULL ? json_string_value(json_object_get(
								      variant->verdict, "status"))
								: "not evaluated");
		callback(0, text, data);
		free(text);
		return;
	}
	promotion = kagent_calloc(1, sizeof *promotion);
	promotion->variants = variants;
	promotion->variant = variant;
	promotion->callback = callback;
	promotion->data = data;
	if (message != NULL && message[0] != '\0')
		kagent_log(KAGENT_LOG_INFO, "promote %s: %s", variant->id, message);
	variants->evaluate(variants->data, variant, KAGENT_VARIANTS_CONFIRM, variants__confirmed,
			   promotion);
}

/* ---- resume ---- */

void
kagent_variants_replay(struct kagent_variants *variants, const json_t *record)
{
	const char *type = json_string_value(json_object_get(record, "type"));
	struct kagent_variant *variant =
	    kagent_variants_find(variants, json_string_value(json_object_get(record, "variant")));

	if (type == NULL)
		return;
	if (strcmp(type, "verdict") == 0) {
		const json_t *verdict = json_object_get(record, "verdict");
		const char *purpose = json_string_value(json_object_get(record, "purpose"));

		variants__remember_seeds(variants, verdict);
		if (variant == NULL || purpose == NULL || strcmp(purpose, "evaluate") != 0 ||
		    !json_is_object(verdict))
			return;
		json_decref(variant->verdict);
		variant->verdict = json_incref((json_t *)verdict);
		variant->speedup = kagent_variants_speedup(variants, verdict);
		variant->turn = (int)json_integer_value(json_object_get(record, "turn"));
	} else if (strcmp(type, "commit") == 0) {
		if (variant != NULL && json_is_string(json_object_get(record, "commit"))) {
			free(variant->commit_id);
			variant->commit_id =
			    kagent_strdup(json_string_value(json_object_get(record, "commit")));
		}
	} else if (strcmp(type, "best") == 0) {
		if (variant != NULL) {
			variants->best = variant;
			variants->best_speedup =
			    json_number_value(json_object_get(record, "speedup"));
		}
	}
}

/* ---- rebuild from a trace ---- */

struct variants__rebuild {
	struct kagent_variants *variants;
	char *source; /* of the last evaluate call, until its verdict names its variant */
	char *note;
	json_t *renamed; /* commit ids of the trace -> those made here, where they differ */
};

static void
variants__rebuild_call(struct variants__rebuild *rebuild, const json_t *record)
{
	const char *name = json_string_value(json_object_get(record, "name"));
	const char *arguments = json_string_value(json_object_get(record, "arguments"));
	json_t *parsed;

	if (name == NULL || strcmp(name, "evaluate") != 0 || arguments == NULL)
		return;
	free(rebuild->source);
	free(rebuild->note);
	rebuild->source = rebuild->note = NULL;
	parsed = json_loads(arguments, JSON_DECODE_ANY, NULL);
	if (json_is_string(json_object_get(parsed, "source")))
		rebuild->source =
		    kagent_strdup(json_string_value(json_object_get(parsed, "source")));
	if (json_is_string(json_object_get(parsed, "note")))
		rebuild->note = kagent_strdup(json_string_value(json_object_get(parsed, "note")));
	json_decref(parsed);
}

/* The verdict of an evaluate call: the variant it names is the call's source. */
static int
variants__rebuild_verdict(struct variants__rebuild *rebuild, const json_t *record, char **cause)
{
	struct kagent_variants *variants = rebuild->variants;
	const char *name = json_string_value(json_object_get(record, "variant"));
	const char *purpose = json_string_value(json_object_get(record, "purpose"));
	const json_t *verdict = json_object_get(record, "verdict");
	int turn = (int)json_integer_value(json_object_get(record, "turn"));
	struct kagent_variant *variant;
	char *expected;
	int status = 0;

	if (purpose == NULL || strcmp(purpose, "evaluate") != 0 || name == NULL)
		return 0;
	expected = kagent_asprintf("v%zu", variants->count + 1);
	if (strcmp(name, expected) != 0) {
		if (kagent_variants_find(variants, name) == NULL) {
			*cause = kagent_asprintf(
			    "the trace has a verdict of %s where %s comes next", name, expected);
			status = -EINVAL;
		}
		goto out;
	}
	if (rebuild->source == NULL) {
		*cause =
		    kagent_asprintf("the trace has no evaluate call with the source of %s", name);
		status = -EINVAL;
		goto out;
	}
	variant = kagent_variants_add(variants, rebuild->source, rebuild->note, turn, cause);
	if (variant == NULL) {
		status = -EINVAL;
		goto out;
	}
	free(rebuild->source);
	free(rebuild->note);
	rebuild->source = rebuild->note = NULL;
	if (json_is_object(verdict)) {
		variant->verdict = json_incref((json_t *)verdict);
		variant->speedup = kagent_variants_speedup(variants, verdict);
	}
out:
	free(expected);
	return status;
}

static int
variants__rebuild_commit(struct variants__rebuild *rebuild, json_t *record, char **cause)
{
	struct kagent_variants *variants = rebuild->variants;
	struct kagent_variant *variant =
	    kagent_variants_find(variants, json_string_value(json_object_get(record, "variant")));
	const char *recorded = json_string_value(json_object_get(record, "commit"));
	const json_t *seconds = json_object_get(record, "committed_at");
	char *commit_id = NULL;
	int status;

	if (variant == NULL || variant->verdict == NULL || recorded == NULL) {
		*cause = kagent_asprintf("the trace commits %s, which it never evaluated",
					 json_string_value(json_object_get(record, "variant")));
		return -EINVAL;
	}
	/* A trace from before committed_at cannot give the same ids: the commit is made now. */
	status = variants__commit_at(variants, variant, variant->verdict,
				     json_is_integer(seconds) ? json_integer_value(seconds)
							      : (long long)time(NULL),
				     &commit_id, cause);
	if (status < 0)
		return status;
	if (strcmp(commit_id, recorded) != 0)
		json_object_set_new(rebuild->renamed, recorded, json_string(commit_id));
	free(variant->commit_id);
	variant->commit_id = commit_id;
	return 0;
}

static int
variants__rebuild_best(struct variants__rebuild *rebuild, const json_t *record, char **cause)
{
	struct kagent_variants *variants = rebuild->variants;
	struct kagent_variant *variant =
	    kagent_variants_find(variants, json_string_value(json_object_get(record, "variant")));
	int status;

	if (variant == NULL || variant->commit_id == NULL) {
		*cause = kagent_asprintf("the trace makes %s the best, which it never committed",
					 json_string_value(json_object_get(record, "variant")));
		return -EINVAL;
	}
	status = kagent_variant_repository_move_best(variants->repository, variants->run_id,
						     variant->commit_id, cause);
	if (status < 0)
		return status;
	variants->best = variant;
	variants->best_speedup = json_number_value(json_object_get(record, "speedup"));
	variants__write_best_file(variants, variant);
	return 0;
}

int
kagent_variants_rebuild(struct kagent_variants *variants, json_t *records, char **cause)
{
	struct variants__rebuild rebuild = {.variants = variants, .renamed = json_object()};
	json_t *record;
	size_t index;
	int status = 0, renamed;

	json_array_foreach(records, index, record)
	{
		const char *type = json_string_value(json_object_get(record, "type"));
		const json_t *made;

		if (type == NULL)
			continue;
		if (strcmp(type, "tool_call") == 0)
			variants__rebuild_call(&rebuild, record);
		else if (strcmp(type, "verdict") == 0)
			status = variants__rebuild_verdict(&rebuild, record, cause);
		else if (strcmp(type, "commit") == 0)
			status = variants__rebuild_commit(&rebuild, record, cause);
		else if (strcmp(type, "best") == 0)
			status = variants__rebuild_best(&rebuild, record, cause);
		if (status < 0)
			goto out;
		/* Every record naming a commit made again under another id names the new one. */
		made = json_object_get(rebuild.renamed,
				       json_string_value(json_object_get(record, "commit")));
		if (made != NULL)
			json_object_set(record, "commit", (json_t *)made);
	}
out:
	renamed = (int)json_object_size(rebuild.renamed);
	free(rebuild.source);
	free(rebuild.note);
	json_decref(rebuild.renamed);
	return status < 0 ? status : renamed;
}
