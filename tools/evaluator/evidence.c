/*
 * Evidence bundles (include/kagent/evaluator/evidence.h, docs/verdict.md): what someone needs
 * to check a verdict on another machine. The bundle names its files by sha256, so a bundle
 * whose problem or candidate was edited afterwards is refused rather than re-verified.
 */
#include "kagent/evaluator/evidence.h"
#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/sha256.h"
#include "kagent/evaluator/verdict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EVIDENCE_FILE "evidence.json"
#define EVIDENCE_VERDICT_FILE "verdict.json"
#define EVIDENCE_PROBLEM_FILE "problem.py"
#define EVIDENCE_CANDIDATE_FILE "candidate.py"
/* Sources are small; a verdict with 3 x 4096 samples is well under a MiB. */
#define EVIDENCE_SOURCE_CAP (16u << 20)
#define EVIDENCE_JSON_CAP (64u << 20)
/* The timing arms whose samples the bundle keeps. */
static const char *const evidence__arms[] = {"candidate", "eager", "compile"};
/* A summary's keys that evidence.json repeats beside the samples. */
static const char *const evidence__summary_keys[] = {"calls", "stop", "median_ms", "ci95_ms",
						     "samples_ms"};

static const char *
evidence__string(const json_t *object, const char *key)
{
	return json_string_value(json_object_get(object, key));
}

static json_t *
evidence__copy_or_null(const json_t *value)
{
	return value != NULL ? json_deep_copy(value) : json_null();
}

/* Copies a source into the bundle, refusing one whose content is no longer what was judged. */
static int
evidence__copy_source(const char *directory, const char *from, const char *name, const char *sha256,
		      char **cause)
{
	char hex[KAGENT_SHA256_HEX_SIZE], *data = NULL, *path;
	size_t size = 0;
	int status;

	if (from == NULL || sha256 == NULL) {
		*cause = kagent_asprintf("the verdict names no %s and its sha256", name);
		return -EINVAL;
	}
	status = kagent_fileio_read(from, EVIDENCE_SOURCE_CAP, &data, &size, cause);
	if (status < 0)
		return status;
	kagent_sha256_hex(data, size, hex);
	if (strcmp(hex, sha256) != 0) {
		*cause = kagent_asprintf("%s changed since it was evaluated (sha256 %s, now %s)",
					 from, sha256, hex);
		free(data);
		return -ESTALE;
	}
	path = kagent_asprintf("%s/%s", directory, name);
	status = kagent_fileio_write_atomic(path, data, size, cause);
	free(path);
	free(data);
	return status;
}

static int
evidence__write_json(const char *directory, const char *name, const json_t *value, char **cause)
{
	char *text = json_dumps(value, JSON_INDENT(2)), *path;
	int status;

	if (text == NULL) {
		*cause = kagent_asprintf("cannot encode %s", name);
		return -ENOMEM;
	}
	path = kagent_asprintf("%s/%s", directory, name);
	status = kagent_fileio_write_atomic(path, text, strlen(text), cause);
	free(path);
	free(text);
	return status;
}

/* The trials' first seed: the base of every seed, whether given or drawn. */
static json_t *
evidence__seed_base(const json_t *verdict, const struct kagent_evaluation_options *options)
{
	const json_t *trial;
	size_t index;

	if (options->seed != 0)
		return json_integer((json_int_t)options->seed);
	json_array_foreach(json_object_get(verdict, "trials"), index, trial)
	{
		const char *distribution = evidence__string(trial, "distribution");

		if (distribution != NULL && strcmp(distribution, "problem") == 0 &&
		    json_is_integer(json_object_get(trial, "seed")))
			return json_copy(json_object_get(trial, "seed"));
	}
	return json_null();
}

/* {"candidate", "eager", "compile"}: each arm's summary keys from a verdict's basis object. */
static json_t *
evidence__arm_samples(const json_t *timing)
{
	json_t *samples = json_object();
	size_t arm, key;

	for (arm = 0; arm < sizeof evidence__arms / sizeof *evidence__arms; arm++) {
		const json_t *summary = json_object_get(timing, evidence__arms[arm]);
		json_t *kept = json_null();

		if (json_is_object(summary)) {
			kept = json_object();
			for (key = 0;
			     key < sizeof evidence__summary_keys / sizeof *evidence__summary_keys;
			     key++)
				json_object_set_new(kept, evidence__summary_keys[key],
						    evidence__copy_or_null(json_object_get(
							summary, evidence__summary_keys[key])));
		}
		json_object_set_new(samples, evidence__arms[arm], kept);
	}
	return samples;
}

/*
 * The arms of the verdict's basis at the top, as before there were two, and each basis's under
 * "device" and "wall" (null where the verdict has none), so both clocks can be rechecked.
 */
static json_t *
evidence__samples(const json_t *timing)
{
	static const char *const bases[] = {"device", "wall"};
	json_t *samples = evidence__arm_samples(timing);
	const char *basis = evidence__string(timing, "basis");
	size_t index;

	json_object_set_new(samples, "basis", basis != NULL ? json_string(basis) : json_null());
	for (index = 0; index < sizeof bases / sizeof *bases; index++) {
		const json_t *numbers = json_object_get(timing, bases[index]);

		json_object_set_new(samples, bases[index],
				    json_is_object(numbers) ? evidence__arm_samples(numbers)
							    : json_null());
	}
	return samples;
}

static json_t *
evidence__build(const json_t *verdict, const struct kagent_evaluation_options *options)
{
	const json_t *timing = json_object_get(verdict, "timing");
	const json_t *problem = json_object_get(verdict, "problem");
	const json_t *candidate = json_object_get(verdict, "candidate");
	int signed_trials = options->signed_trials == 0 ? 2 : options->signed_trials;
	json_t *seeds = json_array(), *trial;
	size_t index;

	json_array_foreach(json_object_get(verdict, "trials"), index, trial)
	    json_array_append_new(seeds, evidence__copy_or_null(json_object_get(trial, "seed")));
	return json_pack(
	    "{s:s, s:s, s:s?, s:{s:s, s:s?}, s:{s:s, s:s?, s:s?}, s:{s:o, s:o}, "
	    "s:{s:s, s:i, s:i, s:i, s:b, s:s}, s:o, s:o, s:{s:o, s:o, s:o, s:o, s:o}, s:o, s:o, "
	    "s:o}",
	    "schema", KAGENT_EVIDENCE_SCHEMA, "verdict", EVIDENCE_VERDICT_FILE, "status",
	    evidence__string(verdict, "status"), "problem", "file", EVIDENCE_PROBLEM_FILE, "sha256",
	    evidence__string(problem, "sha256"), "candidate", "file", EVIDENCE_CANDIDATE_FILE,
	    "sha256", evidence__string(candidate, "sha256"), "backend",
	    evidence__string(candidate, "backend"), "seeds", "base",
	    evidence__seed_base(verdict, options), "trials", seeds, "options", "device",
	    options->device != NULL ? options->device : "cuda", "gpu_index", options->gpu_index,
	    "trials", options->trials > 0 ? options->trials : 3, "signed_trials",
	    signed_trials < 0 ? 0 : signed_trials, "measure_compile", options->measure_compile,
	    "speedup_basis", kagent_verdict_basis_name(options->speedup_basis), "environment",
	    evidence__copy_or_null(json_object_get(verdict, "environment")), "samples",
	    evidence__samples(timing), "speedup", "vs_eager",
	    evidence__copy_or_null(json_object_get(timing, "speedup_vs_eager")), "vs_eager_ci95",
	    evidence__copy_or_null(json_object_get(timing, "speedup_vs_eager_ci95")), "vs_compile",
	    evidence__copy_or_null(json_object_get(timing, "speedup_vs_compile")),
	    "vs_compile_ci95",
	    evidence__copy_or_null(json_object_get(timing, "speedup_vs_compile_ci95")),
	    "sol_fraction", evidence__copy_or_null(json_object_get(timing, "sol_fraction")),
	    "kernels", evidence__copy_or_null(json_object_get(verdict, "kernels")), "credit",
	    evidence__copy_or_null(json_object_get(verdict, "credit")), "roofline",
	    evidence__copy_or_null(json_object_get(verdict, "roofline")));
}

int
kagent_evidence_write(const char *directory, const json_t *verdict,
		      const struct kagent_evaluation_options *options, char **cause)
{
	json_t *evidence = NULL;
	int status = kagent_fileio_make_directories(directory, 0755, cause);

	if (status < 0)
		return status;
	status = evidence__copy_source(
	    directory, options->problem_path, EVIDENCE_PROBLEM_FILE,
	    evidence__string(json_object_get(verdict, "problem"), "sha256"), cause);
	if (status == 0)
		status = evidence__copy_source(
		    directory, options->candidate_path, EVIDENCE_CANDIDATE_FILE,
		    evidence__string(json_object_get(verdict, "candidate"), "sha256"), cause);
	if (status == 0)
		status = evidence__write_json(directory, EVIDENCE_VERDICT_FILE, verdict, cause);
	if (status == 0) {
		evidence = evidence__build(verdict, options);
		/* written last: a folder with evidence.json is a whole bundle */
		status = evidence__write_json(directory, EVIDENCE_FILE, evidence, cause);
	}
	json_decref(evidence);
	return status;
}

static int
evidence__load_json(const char *directory, const char *name, const char *schema, json_t **value,
		    char **cause)
{
	char *path = kagent_asprintf("%s/%s", directory, name), *text = NULL;
	json_error_t error;
	size_t size;
	int status = kagent_fileio_read(path, EVIDENCE_JSON_CAP, &text, &size, cause);

	if (status < 0)
		goto out;
	*value = json_loadb(text, size, 0, &error);
	if (*value == NULL) {
		*cause = kagent_asprintf("%s is not JSON: %s", path, error.text);
		status = -EINVAL;
	} else if (evidence__string(*value, "schema") == NULL ||
		   strcmp(evidence__string(*value, "schema"), schema) != 0) {
		*cause = kagent_asprintf("%s is not a %s object", path, schema);
		status = -EINVAL;
	}
out:
	free(text);
	free(path);
	return status;
}

/* A bundle's source: present, with the sha256 both JSON files record. */
static int
evidence__check_source(struct kagent_evidence *bundle, const char *directory, const char *key,
		       char **path_out, char **cause)
{
	const char *recorded = evidence__string(json_object_get(bundle->evidence, key), "sha256");
	const char *judged = evidence__string(json_object_get(bundle->verdict, key), "sha256");
	const char *name = evidence__string(json_object_get(bundle->evidence, key), "file");
	char hex[KAGENT_SHA256_HEX_SIZE];
	int status;

	if (recorded == NULL || name == NULL || strchr(name, '/') != NULL) {
		*cause = kagent_asprintf("evidence.json records no %s file and sha256", key);
		return -EINVAL;
	}
	if (judged == NULL || strcmp(recorded, judged) != 0) {
		*cause = kagent_asprintf(
		    "evidence.json and verdict.json disagree on the %s's sha256", key);
		return -EINVAL;
	}
	*path_out = kagent_asprintf("%s/%s", directory, name);
	status = kagent_sha256_file_hex(*path_out, hex, cause);
	if (status < 0)
		return status;
	if (strcmp(hex, recorded) != 0) {
		*cause = kagent_asprintf("%s does not match its sha256 in evidence.json (recorded "
					 "%s, now %s): the bundle was changed",
					 *path_out, recorded, hex);
		return -EINVAL;
	}
	return 0;
}

int
kagent_evidence_load(const char *directory, struct kagent_evidence *bundle, char **cause)
{
	int status;

	memset(bundle, 0, sizeof *bundle);
	status = evidence__load_json(directory, EVIDENCE_FILE, KAGENT_EVIDENCE_SCHEMA,
				     &bundle->evidence, cause);
	if (status == 0)
		status = evidence__load_json(directory, EVIDENCE_VERDICT_FILE, "kagent.verdict/1",
					     &bundle->verdict, cause);
	if (status == 0)
		status = evidence__check_source(bundle, directory, "problem", &bundle->problem_path,
						cause);
	if (status == 0)
		status = evidence__check_source(bundle, directory, "candidate",
						&bundle->candidate_path, cause);
	if (status < 0)
		kagent_evidence_free(bundle);
	return status;
}

void
kagent_evidence_free(struct kagent_evidence *bundle)
{
	free(bundle->problem_path);
	free(bundle->candidate_path);
	json_decref(bundle->verdict);
	json_decref(bundle->evidence);
	memset(bundle, 0, sizeof *bundle);
}

/* The hardware queues the timed children's contexts had (the verdict's environment), so that
 * a re-check times them alike; 0 (the default) where the environment does not say. */
static int
evidence__device_queues(const json_t *environment)
{
	const json_t *queues = json_object_get(environment, "device_queues");

	if (!json_is_integer(queues) || json_integer_value(queues) < 1 ||
	    json_integer_value(queues) > KAGENT_EVALUATION_DEVICE_QUEUES_MAX)
		return 0;
	return (int)json_integer_value(queues);
}

void
kagent_evidence_options(const struct kagent_evidence *bundle,
			struct kagent_evaluation_options *options)
{
	const json_t *recorded = json_object_get(bundle->evidence, "options");
	json_int_t base =
	    json_integer_value(json_object_get(json_object_get(bundle->evidence, "seeds"), "base"));
	json_int_t trials = json_integer_value(json_object_get(recorded, "trials"));
	json_int_t signed_trials = json_integer_value(json_object_get(recorded, "signed_trials"));
	const char *device = evidence__string(recorded, "device");

	options->problem_path = bundle->problem_path;
	options->candidate_path = bundle->candidate_path;
	options->device = device != NULL && strcmp(device, "cpu") == 0 ? "cpu" : "cuda";
	options->device_queues =
	    evidence__device_queues(json_object_get(bundle->evidence, "environment"));
	options->seed = base > 0 ? (uint64_t)base : 0;
	options->trials = trials > 0 && trials <= 1000 ? (int)trials : 0;
	options->signed_trials =
	    signed_trials > 0 && signed_trials <= 1000 ? (int)signed_trials : -1;
	options->measure_compile = !json_is_false(json_object_get(recorded, "measure_compile"));
	/* A bundle from before the choice existed was judged on the wall clock. */
	options->speedup_basis =
	    kagent_verdict_basis_from_name(evidence__string(recorded, "speedup_basis")) ==
		    KAGENT_VERDICT_BASIS_DEVICE
		? KAGENT_VERDICT_BASIS_DEVICE
		: KAGENT_VERDICT_BASIS_WALL;
}

void
kagent_evidence_options_from_verdict(const json_t *verdict,
				     struct kagent_evaluation_options *options)
{
	const json_t *timing = json_object_get(verdict, "timing"), *trial;
	const char *device = evidence__string(json_object_get(verdict, "environment"), "device");
	json_t *base;
	int trials = 0, signed_trials = 0;
	size_t index;

	options->seed = 0;
	base = evidence__seed_base(verdict, options);
	options->seed = json_integer_value(base) > 0 ? (uint64_t)json_integer_value(base) : 0;
	json_decref(base);
	json_array_foreach(json_object_get(verdict, "trials"), index, trial)
	{
		const char *distribution = evidence__string(trial, "distribution");

		if (distribution != NULL && strcmp(distribution, "problem") == 0)
			trials++;
		else if (distribution != NULL && strcmp(distribution, "signed") == 0)
			signed_trials++;
	}
	options->trials = trials > 0 && trials <= 1000 ? trials : 0;
	options->signed_trials = signed_trials > 0 && signed_trials <= 1000 ? signed_trials : -1;
	options->device = device != NULL && strcmp(device, "cpu") == 0 ? "cpu" : "cuda";
	options->device_queues = evidence__device_queues(json_object_get(verdict, "environment"));
	/* the basis the numbers were read in, a fallback to wall included */
	options->speedup_basis = kagent_verdict_basis_from_name(
				     evidence__string(timing, "basis")) == KAGENT_VERDICT_BASIS_WALL
				     ? KAGENT_VERDICT_BASIS_WALL
				     : KAGENT_VERDICT_BASIS_DEVICE;
}

/* [low, high] from a verdict's interval, or 0 without one. */
static int
evidence__interval(const json_t *value, double *low, double *high)
{
	if (!json_is_array(value) || json_array_size(value) != 2 ||
	    !json_is_number(json_array_get(value, 0)) || !json_is_number(json_array_get(value, 1)))
		return 0;
	*low = json_number_value(json_array_get(value, 0));
	*high = json_number_value(json_array_get(value, 1));
	return 1;
}

/*
 * [low, high] of a speedup's interval, widened to at least floor (a fraction) of the speedup
 * on either side: one run's bootstrap interval is tighter than two runs of one kernel agree.
 */
static int
evidence__widened(const json_t *timing, const char *key, const char *ci_key, double floor,
		  double *low, double *high)
{
	const json_t *value = json_object_get(timing, key);
	double centre;

	if (!evidence__interval(json_object_get(timing, ci_key), low, high))
		return 0;
	centre = json_is_number(value) ? json_number_value(value) : (*low + *high) / 2;
	if (centre * (1 - floor) < *low)
		*low = centre * (1 - floor);
	if (centre * (1 + floor) > *high)
		*high = centre * (1 + floor);
	return 1;
}

/* One speedup then and now: {then, then_ci95, now, now_ci95, overlap (null: not both)}, the
 * overlap of the intervals widened to the floor. */
static json_t *
evidence__speedup(const json_t *then, const json_t *now, const char *key, double floor,
		  int *overlap)
{
	char ci_key[64];
	const json_t *then_timing = json_object_get(then, "timing");
	const json_t *now_timing = json_object_get(now, "timing");
	double then_low, then_high, now_low, now_high;
	json_t *overlaps = json_null();

	snprintf(ci_key, sizeof ci_key, "%s_ci95", key);
	*overlap = -1;
	if (evidence__widened(then_timing, key, ci_key, floor, &then_low, &then_high) &&
	    evidence__widened(now_timing, key, ci_key, floor, &now_low, &now_high)) {
		*overlap = then_low <= now_high && now_low <= then_high;
		json_decref(overlaps);
		overlaps = json_boolean(*overlap);
	}
	return json_pack("{s:o, s:o, s:o, s:o, s:o}", "then",
			 evidence__copy_or_null(json_object_get(then_timing, key)), "then_ci95",
			 evidence__copy_or_null(json_object_get(then_timing, ci_key)), "now",
			 evidence__copy_or_null(json_object_get(now_timing, key)), "now_ci95",
			 evidence__copy_or_null(json_object_get(now_timing, ci_key)), "overlap",
			 overlaps);
}

json_t *
kagent_evidence_compare(const json_t *then, const json_t *now, double interval_floor)
{
	const char *then_status = evidence__string(then, "status");
	const char *now_status = evidence__string(now, "status");
	const char *then_gpu = evidence__string(json_object_get(then, "environment"), "gpu");
	const char *now_gpu = evidence__string(json_object_get(now, "environment"), "gpu");
	int status_match =
	    then_status != NULL && now_status != NULL && strcmp(then_status, now_status) == 0;
	int same_gpu = then_gpu != NULL && now_gpu != NULL && strcmp(then_gpu, now_gpu) == 0;
	int eager_overlap, compile_overlap;
	json_t *eager =
	    evidence__speedup(then, now, "speedup_vs_eager", interval_floor, &eager_overlap);
	json_t *compile =
	    evidence__speedup(then, now, "speedup_vs_compile", interval_floor, &compile_overlap);
	/* On another GPU model (or the CPU) speeds differ for good reasons: only the status must.
	 */
	int verified = status_match && !(same_gpu && eager_overlap == 0);
	const char *reason =
	    !status_match ? "the status differs"
	    : !verified	  ? "the eager speedup's intervals do not overlap on the same GPU model"
	    : same_gpu	  ? "the status matches and the speedup's intervals overlap"
		       : "the status matches (another GPU model or the CPU: speeds not compared)";

	return json_pack("{s:s, s:s?, s:s?, s:b, s:s?, s:s?, s:b, s:o, s:o, s:f, s:b, s:s}",
			 "schema", "kagent.verify/1", "status_then", then_status, "status_now",
			 now_status, "status_match", status_match, "gpu_then", then_gpu, "gpu_now",
			 now_gpu, "same_gpu", same_gpu, "speedup_vs_eager", eager,
			 "speedup_vs_compile", compile, "interval_floor", interval_floor,
			 "verified", verified, "reason", reason);
}

int
kagent_evidence_interval_floor_parse(const char *percent, double *fraction)
{
	char *end;
	double value;

	errno = 0;
	value = strtod(percent, &end);
	if (end == percent || *end != '\0' || errno != 0 || !(value >= 0 && value <= 100))
		return -EINVAL;
	*fraction = value / 100;
	return 0;
}

static void
evidence__render_speedup(FILE *stream, const char *label, const json_t *speedup)
{
	const json_t *overlap = json_object_get(speedup, "overlap");
	const char *moments[] = {"then", "now"};
	size_t index;

	if (!json_is_number(json_object_get(speedup, "then")) &&
	    !json_is_number(json_object_get(speedup, "now")))
		return;
	fprintf(stream, "  %-11s", label);
	for (index = 0; index < 2; index++) {
		char key[16];
		double low, high;
		const json_t *value = json_object_get(speedup, moments[index]);

		snprintf(key, sizeof key, "%s_ci95", moments[index]);
		fprintf(stream, "%s %s ", index ? "," : "", moments[index]);
		if (json_is_number(value))
			fprintf(stream, "%.2fx", json_number_value(value));
		else
			fputs("-", stream);
		if (evidence__interval(json_object_get(speedup, key), &low, &high))
			fprintf(stream, " [%.2f, %.2f]", low, high);
	}
	fprintf(stream, "%s\n",
		json_is_null(overlap)	? ""
		: json_is_true(overlap) ? ": overlap"
					: ": no overlap");
}

void
kagent_evidence_render_comparison(const json_t *comparison, FILE *stream)
{
	const char *then_gpu = evidence__string(comparison, "gpu_then");
	const char *now_gpu = evidence__string(comparison, "gpu_now");

	fprintf(stream, "%s: %s\n",
		json_is_true(json_object_get(comparison, "verified")) ? "verified" : "not verified",
		evidence__string(comparison, "reason"));
	fprintf(stream, "  status      then %s, now %s\n",
		evidence__string(comparison, "status_then")
		    ? evidence__string(comparison, "status_then")
		    : "?",
		evidence__string(comparison, "status_now")
		    ? evidence__string(comparison, "status_now")
		    : "?");
	fprintf(stream, "  gpu         then %s, now %s\n", then_gpu ? then_gpu : "none (CPU)",
		now_gpu ? now_gpu : "none (CPU)");
	evidence__render_speedup(stream, "vs eager",
				 json_object_get(comparison, "speedup_vs_eager"));
	evidence__render_speedup(stream, "vs compile",
				 json_object_get(comparison, "speedup_vs_compile"));
}
