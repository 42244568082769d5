/*
 * From a worker result to a verdict (see include/kagent/evaluator/verdict.h and
 * docs/verdict.md). Everything in a result came from another process, and parts
 * of it (the candidate's output tails, error messages) from the candidate
 * itself: every field is read through type-checking accessors and copied, never
 * trusted to exist or to have the documented type.
 */
#include "kagent/evaluator/verdict.h"
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/cuda/cuda_driver.h"
#include "kagent/evaluator/statistics.h"
#include "kagent/evaluator/tolerance.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* How much of a candidate-controlled message goes into a reason. */
#define VERDICT_MESSAGE_CAP 400
/* A roofline floor below this share of the measured time is a violation. */
#define VERDICT_ROOFLINE_FRACTION 0.5

const char *const kagent_verdict_status_names[KAGENT_VERDICT_STATUS_COUNT] = {
    [KAGENT_VERDICT_TIMEOUT] = "timeout",
    [KAGENT_VERDICT_COMPILE_ERROR] = "compile_error",
    [KAGENT_VERDICT_REJECTED] = "rejected",
    [KAGENT_VERDICT_CRASHED] = "crashed",
    [KAGENT_VERDICT_RUNTIME_ERROR] = "runtime_error",
    [KAGENT_VERDICT_INCORRECT] = "incorrect",
    [KAGENT_VERDICT_CORRECT] = "correct",
};

const char *const kagent_verdict_basis_names[KAGENT_VERDICT_BASIS_COUNT + 1] = {
    [KAGENT_VERDICT_BASIS_DEVICE] = "device",
    [KAGENT_VERDICT_BASIS_WALL] = "wall",
    [KAGENT_VERDICT_BASIS_COUNT] = NULL,
};

/* The timing arms, in the order of a basis object's keys. */
enum verdict__arm_index {
	VERDICT_CANDIDATE,
	VERDICT_EAGER,
	VERDICT_COMPILE,
	VERDICT_ARM_COUNT,
};
static const char *const verdict__arm_names[VERDICT_ARM_COUNT] = {
    [VERDICT_CANDIDATE] = "candidate",
    [VERDICT_EAGER] = "eager",
    [VERDICT_COMPILE] = "compile",
};

/* The state of one build: the violations found so far and the first reason of each kind. */
struct verdict__state {
	json_t *violations; /* [{"check", "detail"}] in the order found */
	json_t *counts;	    /* check -> how many times seen, to fold repeats */
	json_t *warnings;
	char *incorrect_reason; /* the first failing trial's explanation */
	char *rejected_reason;	/* the first rejection's explanation, after tampering */
	json_t *timing;		/* the verdict's timing object */
	json_t *credit;		/* the verdict's credit object */
};

const char *
kagent_verdict_status_name(enum kagent_verdict_status status)
{
	if ((int)status < 0 || status >= KAGENT_VERDICT_STATUS_COUNT)
		return "unknown";
	return kagent_verdict_status_names[status];
}

int
kagent_verdict_status_from_name(const char *name)
{
	int index;

	for (index = 0; name != NULL && index < KAGENT_VERDICT_STATUS_COUNT; index++) {
		if (strcmp(kagent_verdict_status_names[index], name) == 0)
			return index;
	}
	return -EINVAL;
}

const char *
kagent_verdict_basis_name(enum kagent_verdict_basis basis)
{
	if ((int)basis < 0 || basis >= KAGENT_VERDICT_BASIS_COUNT)
		return "unknown";
	return kagent_verdict_basis_names[basis];
}

int
kagent_verdict_basis_from_name(const char *name)
{
	int index;

	for (index = 0; name != NULL && index < KAGENT_VERDICT_BASIS_COUNT; index++) {
		if (strcmp(kagent_verdict_basis_names[index], name) == 0)
			return index;
	}
	return -EINVAL;
}

/* A number that may arrive as a JSON integer or real; false when absent or another type. */
static int
verdict__number(const json_t *object, const char *key, double *value)
{
	const json_t *field = json_object_get(object, key);

	if (!json_is_number(field))
		return 0;
	*value = json_number_value(field);
	return isfinite(*value) || isinf(*value);
}

static const char *
verdict__string(const json_t *object, const char *key)
{
	return json_string_value(json_object_get(object, key));
}

/* A copy of a peer's text, capped and cut at the first line break, for a one-line reason. */
static char *
verdict__first_line(const char *text)
{
	size_t length;

	if (text == NULL)
		return kagent_strdup("");
	while (*text == '\n' || *text == ' ')
		text++;
	length = strcspn(text, "\n");
	if (length > VERDICT_MESSAGE_CAP)
		length = VERDICT_MESSAGE_CAP;
	return kagent_strndup(text, length);
}

/* %.3g, keeping a ".0" on whole numbers so "1.0" does not read as a count. */
static void
verdict__format_number(char *buffer, size_t size, double value)
{
	snprintf(buffer, size, "%.3g", value);
	if (strpbrk(buffer, ".eni") == NULL && strlen(buffer) + 3 <= size)
		strcat(buffer, ".0");
}

/* "[0, 3]" for a JSON array of indices; "[...]" past a sane length. */
static char *
verdict__format_index(const json_t *index)
{
	char buffer[128];
	size_t used = 0, position;
	const json_t *item;

	if (json_is_integer(index))
		return kagent_asprintf("[%lld]", (long long)json_integer_value(index));
	if (!json_is_array(index))
		return NULL;
	buffer[used++] = '[';
	json_array_foreach(index, position, item)
	{
		int written =
		    snprintf(buffer + used, sizeof buffer - used, "%s%lld",
			     position > 0 ? ", " : "", (long long)json_integer_value(item));

		if (written < 0 || (size_t)written >= sizeof buffer - used - 5) {
			snprintf(buffer + used, sizeof buffer - used, ", ...");
			used = strlen(buffer);
			break;
		}
		used += (size_t)written;
	}
	snprintf(buffer + used, sizeof buffer - used, "]");
	return kagent_strdup(buffer);
}

static char *
verdict__format_shape(const json_t *shape)
{
	char *text = verdict__format_index(shape);

	return text != NULL ? text : kagent_strdup("(none)");
}

/* Records a failed check; a repeat of a check only raises its count. */
static void
verdict__violation(struct verdict__state *state, const char *check, char *detail)
{
	json_t *count = json_object_get(state->counts, check);

	if (count != NULL) {
		json_integer_set(count, json_integer_value(count) + 1);
		free(detail);
		return;
	}
	json_object_set_new(state->counts, check, json_integer(1));
	json_array_append_new(state->violations,
			      json_pack("{s:s, s:s}", "check", check, "detail", detail));
	free(detail);
}

/* "trial 2 (seed 102)", with the distribution when it is not the problem's own. */
static char *
verdict__trial_label(const json_t *trial, size_t index)
{
	const char *distribution = verdict__string(trial, "distribution");
	const json_t *seed = json_object_get(trial, "seed");

	if (json_is_integer(seed))
		return kagent_asprintf(
		    "trial %zu (seed %lld%s)", index + 1, (long long)json_integer_value(seed),
		    distribution != NULL && strcmp(distribution, "signed") == 0 ? ", signed inputs"
										: "");
	return kagent_asprintf("trial %zu", index + 1);
}

/* A copy of judge[key] when it has the expected type, else the fallback (owned either way). */
static json_t *
verdict__copy(const json_t *judge, const char *key, json_type expected, json_t *fallback)
{
	const json_t *value = json_object_get(judge, key);

	if (value == NULL || json_typeof(value) != expected)
		return fallback;
	json_decref(fallback);
	return json_deep_copy(value);
}

/* Why one output failed, as a named check and a sentence; the check is a static string. */
static const char *
verdict__explain_output(const json_t *output, const char *trial_label, char **detail)
{
	const char *path = verdict__string(output, "path");
	const char *reason = verdict__string(output, "reason");
	const char *dtype = verdict__string(output, "dtype");
	const char *candidate_dtype = verdict__string(output, "candidate_dtype");
	const json_t *shape = json_object_get(output, "shape");
	const json_t *candidate_shape = json_object_get(output, "candidate_shape");
	const char *kind = verdict__string(output, "kind");
	const struct kagent_tolerance *tolerance = kagent_tolerance_lookup(dtype);
	double nonfinite = 0, fraction = 0, norm = 0;
	char *text = NULL, *first = NULL, *a = NULL, *b = NULL;
	const char *check;

	if (path == NULL)
		path = "an output";
	if (reason != NULL &&
	    (strstr(reason, "missing") != NULL || strstr(reason, "extra") != NULL ||
	     strstr(reason, "structure") != NULL || strstr(reason, "kind") != NULL ||
	     strstr(reason, "not a tensor") != NULL ||
	     (kind != NULL && strcmp(kind, "missing") == 0))) {
		check = "output_structure";
		text = verdict__first_line(reason);
		*detail = kagent_asprintf("%s in %s: %s", path, trial_label, text);
		goto out;
	}
	if (dtype != NULL && candidate_dtype != NULL && strcmp(dtype, candidate_dtype) != 0) {
		check = "dtype_mismatch";
		*detail = kagent_asprintf("%s has dtype %s in %s, the reference %s", path,
					  candidate_dtype, trial_label, dtype);
		goto out;
	}
	if (json_is_array(shape) && json_is_array(candidate_shape) &&
	    !json_equal((json_t *)shape, (json_t *)candidate_shape)) {
		check = "shape_mismatch";
		a = verdict__format_shape(candidate_shape);
		b = verdict__format_shape(shape);
		*detail = kagent_asprintf("%s has shape %s in %s, the reference %s", path, a,
					  trial_label, b);
		goto out;
	}
	if (verdict__number(output, "nonfinite", &nonfinite) && nonfinite > 0) {
		check = "nonfinite_output";
		*detail = kagent_asprintf("%s has %.0f NaN or Inf values in %s where the reference "
					  "is finite",
					  path, nonfinite, trial_label);
		goto out;
	}
	check = "output_mismatch";
	{
		char percent[32] = "", norm_text[32] = "", bound[32] = "", clause[96] = "";

		if (verdict__number(output, "mismatch_fraction", &fraction)) {
			verdict__format_number(percent, sizeof percent, fraction * 100.0);
			snprintf(clause, sizeof clause, "%s%% of elements outside tolerance",
				 percent);
		}
		if (verdict__number(output, "norm_rel", &norm)) {
			size_t used = strlen(clause);

			verdict__format_number(norm_text, sizeof norm_text, norm);
			if (tolerance != NULL && norm > tolerance->norm)
				verdict__format_number(bound, sizeof bound, tolerance->norm);
			snprintf(clause + used, sizeof clause - used,
				 "%snorm-relative error %s%s%s", used > 0 ? ", " : "", norm_text,
				 bound[0] ? " > " : "", bound);
		}
		first = verdict__format_index(json_object_get(output, "first_mismatch"));
		if (clause[0] == '\0' && reason != NULL) {
			text = verdict__first_line(reason);
			snprintf(clause, sizeof clause, "%s", text);
		}
		*detail = kagent_asprintf(
		    "%s mismatches in %s%s%s%s%s", path, trial_label, clause[0] ? ": " : "", clause,
		    first != NULL ? "; first mismatch at " : "", first != NULL ? first : "");
	}
out:
	free(text);
	free(first);
	free(a);
	free(b);
	return check;
}

static void
verdict__check_trials(struct verdict__state *state, const json_t *trials)
{
	const json_t *trial, *output;
	size_t index, position;

	json_array_foreach(trials, index, trial)
	{
		char *label;
		int explained = 0;

		if (json_is_true(json_object_get(trial, "passed")))
			continue;
		label = verdict__trial_label(trial, index);
		if (json_is_false(json_object_get(trial, "inputs_unchanged"))) {
			char *detail =
			    kagent_asprintf("the candidate changed its inputs in %s", label);

			if (state->incorrect_reason == NULL)
				state->incorrect_reason = kagent_strdup(detail);
			verdict__violation(state, "input_mutation", detail);
			explained = 1;
		}
		json_array_foreach(json_object_get(trial, "outputs"), position, output)
		{
			char *detail = NULL;
			const char *check;

			if (!json_is_false(json_object_get(output, "passed")))
				continue;
			check = verdict__explain_output(output, label, &detail);
			if (state->incorrect_reason == NULL)
				state->incorrect_reason = kagent_strdup(detail);
			verdict__violation(state, check, detail);
			explained = 1;
		}
		if (!explained) {
			/* A failed trial whose outputs all passed: a count or kind mismatch. */
			char *why = verdict__first_line(verdict__string(trial, "reason"));
			char *detail = kagent_asprintf("%s failed: %s", label,
						       why[0] ? why
							      : "the outputs do not match "
								"the reference's structure");

			if (state->incorrect_reason == NULL)
				state->incorrect_reason = kagent_strdup(detail);
			verdict__violation(state, "output_structure", detail);
			free(why);
		}
		free(label);
	}
}

/* Up to three names of torch kernels the forward launched, for the no_own_kernel reason. */
static char *
verdict__foreign_kernels(const json_t *kernels)
{
	char buffer[256] = "";
	const json_t *launch;
	size_t index;
	int shown = 0;

	json_array_foreach(json_object_get(kernels, "launches"), index, launch)
	{
		const char *name = verdict__string(launch, "name");
		size_t used = strlen(buffer);

		if (name == NULL || json_is_true(json_object_get(launch, "own")))
			continue;
		if (shown == 3) {
			snprintf(buffer + used, sizeof buffer - used, ", ...");
			break;
		}
		snprintf(buffer + used, sizeof buffer - used, "%s%.60s", shown ? ", " : "", name);
		shown++;
	}
	return shown ? kagent_strdup(buffer) : NULL;
}

static void
verdict__check_rejections(struct verdict__state *state, const json_t *judge, const char *device)
{
	/* the chosen basis's median: either clock under the floor is equally impossible */
	const json_t *candidate = json_object_get(state->timing, "candidate");
	const json_t *timing = json_object_get(judge, "timing");
	const json_t *kernels = json_object_get(judge, "kernels");
	const json_t *roofline = json_object_get(judge, "roofline");
	const json_t *tamper = json_object_get(judge, "tamper"), *item;
	double failures = 0, verified = 0, median = 0, floor_ms = 0, own_ms = 0, total_ms = 0;
	char *detail;
	size_t index;

	json_array_foreach(tamper, index, item)
	{
		char *what = verdict__first_line(json_string_value(item));

		detail = kagent_asprintf("the candidate tampered with the timer: %s",
					 what[0] ? what : "(no detail)");
		verdict__violation(state, "timer_tampering", detail);
		free(what);
	}
	if (verdict__number(timing, "verification_failures", &failures) && failures > 0) {
		verdict__number(timing, "verified_calls", &verified);
		detail = kagent_asprintf("outputs during timing differed from the reference in "
					 "%.0f of %.0f verified calls (caching, lazy or deferred "
					 "work)",
					 failures, verified > failures ? verified : failures);
		if (state->rejected_reason == NULL)
			state->rejected_reason = kagent_strdup(detail);
		verdict__violation(state, "timed_output_mismatch", detail);
	}
	if (device != NULL && strcmp(device, "cuda") == 0 && json_is_object(kernels)) {
		int has_own_ms = verdict__number(kernels, "own_ms", &own_ms);

		if ((has_own_ms && own_ms <= 0) ||
		    json_array_size(json_object_get(kernels, "own_names")) == 0) {
			char total[32] = "?";
			char *names = verdict__foreign_kernels(kernels);

			if (verdict__number(kernels, "total_ms", &total_ms))
				verdict__format_number(total, sizeof total, total_ms);
			detail = kagent_asprintf(
			    "forward launched no kernel of its own: all %s ms of "
			    "GPU time was in torch kernels%s%s%s",
			    total, names ? " (" : "", names ? names : "", names ? ")" : "");
			if (state->rejected_reason == NULL)
				state->rejected_reason = kagent_strdup(detail);
			verdict__violation(state, "no_own_kernel", detail);
			free(names);
		}
	}
	if (verdict__number(candidate, "median_ms", &median) &&
	    verdict__number(roofline, "floor_ms", &floor_ms) && floor_ms > 0 &&
	    median < VERDICT_ROOFLINE_FRACTION * floor_ms) {
		char measured[32], floor_text[32];
		double bytes = 0;

		verdict__format_number(measured, sizeof measured, median);
		verdict__format_number(floor_text, sizeof floor_text, floor_ms);
		verdict__number(roofline, "bytes", &bytes);
		detail = kagent_asprintf("measured %s ms is below the roofline floor of %s ms for "
					 "%.3g GB moved: impossible at this GPU's memory bandwidth",
					 measured, floor_text, bytes / 1e9);
		if (state->rejected_reason == NULL)
			state->rejected_reason = kagent_strdup(detail);
		verdict__violation(state, "below_roofline", detail);
	}
}

/*
 * CUPTI's kernel time for one forward against the judge's clock (issue: two independent
 * measurements). The clock should see at least the kernels' time; much less means the two
 * disagree, much more means the forward spends its time launching, not computing. The wall
 * basis is the clock whatever basis the speedups use.
 */
static void
verdict__cross_check_timing(struct verdict__state *state, const json_t *judge)
{
	const json_t *candidate =
	    json_object_get(json_object_get(state->timing, "wall"), "candidate");
	double median = 0, device_ms = 0;

	if (!verdict__number(candidate, "median_ms", &median) || median <= 0 ||
	    !verdict__number(json_object_get(judge, "kernels"), "total_ms", &device_ms) ||
	    device_ms <= 0)
		return;
	if (device_ms > 1.5 * median + 0.02)
		json_array_append_new(
		    state->warnings,
		    json_sprintf(
			"the timings disagree: CUPTI saw %.4g ms of kernels in one forward, "
			"the clock %.4g ms per call (kernels on concurrent streams can "
			"overlap; otherwise distrust the timing)",
			device_ms, median));
	else if (device_ms < 0.5 * median)
		json_array_append_new(
		    state->warnings,
		    json_sprintf(
			"launch-bound: the kernels ran %.4g ms of the %.4g ms per call; the "
			"rest is launching them (fewer, larger launches would help)",
			device_ms, median));
}

static void
verdict__collect_warnings(struct verdict__state *state, const json_t *judge, const char *device)
{
	const json_t *degenerate = json_object_get(judge, "degenerate");
	const char *skipped = verdict__string(judge, "signed_skipped");
	const char *compile_error =
	    verdict__string(json_object_get(judge, "baselines"), "compile_error");

	verdict__cross_check_timing(state, judge);
	if (json_is_true(json_object_get(degenerate, "constant_output")))
		json_array_append_new(
		    state->warnings, json_string("this problem is degenerate: its reference output "
						 "is the same for every input"));
	if (json_is_true(json_object_get(degenerate, "zeros_pass")))
		json_array_append_new(
		    state->warnings,
		    json_string("this problem is degenerate: returning zeros would "
				"pass its checks"));
	if (json_is_true(json_object_get(degenerate, "identity_pass")))
		json_array_append_new(state->warnings,
				      json_string("this problem is degenerate: returning the input "
						  "unchanged would pass its checks"));
	if (skipped != NULL) {
		char *why = verdict__first_line(skipped);

		json_array_append_new(
		    state->warnings,
		    json_sprintf("the signed input distribution was not tried: %s", why));
		free(why);
	}
	if (compile_error != NULL) {
		char *why = verdict__first_line(compile_error);
		/* past the cap on waiting for it, the compile was given up, not broken */
		int abandoned = json_is_number(json_object_get(json_object_get(judge, "baselines"),
							       "compile_timeout_seconds"));

		json_array_append_new(state->warnings,
				      json_sprintf("the torch.compile baseline %s: %s",
						   abandoned ? "was abandoned" : "failed", why));
		free(why);
	}
	if (device != NULL && strcmp(device, "cuda") == 0 &&
	    !json_is_object(json_object_get(judge, "kernels")) &&
	    strcmp(verdict__string(judge, "phase") ? verdict__string(judge, "phase") : "",
		   "done") == 0)
		json_array_append_new(
		    state->warnings,
		    json_string("no kernel profile was recorded: the no_own_kernel "
				"check could not run"));
}

/* "killed by signal 9 (SIGKILL)" or "exited with status 3"; NULL when neither is known. */
static char *
verdict__process_end(const json_t *process)
{
	const json_t *signal_number = json_object_get(process, "signal");
	const json_t *exit_code = json_object_get(process, "exit_code");

	if (json_is_integer(signal_number)) {
		int number = (int)json_integer_value(signal_number);
		const char *name = number > 0 && number < 65 ? sigabbrev_np(number) : NULL;

		return kagent_asprintf("was killed by signal %d (SIG%s)", number,
				       name ? name : "?");
	}
	if (json_is_integer(exit_code))
		return kagent_asprintf("exited with status %lld",
				       (long long)json_integer_value(exit_code));
	return NULL;
}

/*
 * Steps 1, 2, 4 and 5 of the order in docs/verdict.md, from candidate_error and the
 * child's end. Returns the status, or KAGENT_VERDICT_CORRECT when none applies.
 */
static enum kagent_verdict_status
verdict__classify_error(const json_t *result, const json_t *judge, char **reason)
{
	const json_t *error = json_object_get(judge, "candidate_error");
	const json_t *process = json_object_get(result, "candidate_process");
	const char *kind = verdict__string(error, "kind");
	const char *phase = verdict__string(error, "phase");
	char *message = verdict__first_line(verdict__string(error, "message"));
	char *end = NULL;
	enum kagent_verdict_status status = KAGENT_VERDICT_CORRECT;

	if (phase == NULL)
		phase = verdict__string(judge, "phase");
	if (phase == NULL)
		phase = "an unknown phase";
	if (json_is_true(json_object_get(process, "killed_for_timeout")) ||
	    (kind != NULL && strcmp(kind, "timeout") == 0)) {
		status = KAGENT_VERDICT_TIMEOUT;
		*reason = kagent_asprintf("candidate process was killed for exceeding its time "
					  "limit during %s%s%s",
					  phase, message[0] ? ": " : "", message);
		goto out;
	}
	if (kind != NULL && strcmp(kind, "compile") == 0) {
		status = KAGENT_VERDICT_COMPILE_ERROR;
		*reason = kagent_asprintf("candidate failed to compile or import%s%s",
					  message[0] ? ": " : "", message);
		goto out;
	}
	/* Tampering (step 3) is checked by the caller between this and the rest. */
	if (json_is_array(json_object_get(judge, "tamper")) &&
	    json_array_size(json_object_get(judge, "tamper")) > 0) {
		status = KAGENT_VERDICT_REJECTED;
		goto out;
	}
	end = verdict__process_end(process);
	/* Only the judge's word counts: after the judge is done, the worker kills the child. */
	if (kind != NULL && (strcmp(kind, "crash") == 0 || strcmp(kind, "protocol") == 0)) {
		status = KAGENT_VERDICT_CRASHED;
		if (strcmp(kind, "protocol") == 0)
			*reason = kagent_asprintf("candidate process broke the protocol during "
						  "%s%s%s",
						  phase, message[0] ? ": " : "", message);
		else if (end != NULL)
			*reason = kagent_asprintf("candidate process %s during %s%s%s", end, phase,
						  message[0] ? ": " : "", message);
		else
			*reason = kagent_asprintf("candidate process stopped answering during "
						  "%s%s%s",
						  phase, message[0] ? ": " : "", message);
		goto out;
	}
	if (kind != NULL || json_is_object(error)) {
		status = KAGENT_VERDICT_RUNTIME_ERROR;
		if (kind != NULL && strcmp(kind, "oom") == 0)
			*reason = kagent_asprintf("candidate ran out of device memory during "
						  "%s%s%s",
						  phase, message[0] ? ": " : "", message);
		else if (kind != NULL && strcmp(kind, "structure") == 0)
			*reason =
			    kagent_asprintf("candidate cannot be used%s%s", message[0] ? ": " : "",
					    message[0] ? message : "no usable class ModelNew");
		else
			*reason = kagent_asprintf("candidate's forward raised during %s%s%s", phase,
						  message[0] ? ": " : "", message);
		goto out;
	}
out:
	free(end);
	free(message);
	return status;
}

/* One timing arm: the judge's summary and the per-call samples kept from it. */
struct verdict__arm {
	json_t *summary; /* the verdict's copy, or null */
	double *samples; /* the first KAGENT_STATISTICS_SAMPLE_CAP, in call order */
	size_t count;	 /* 0 when the judge sent none, or sent something else */
	/* the calls of each process the arm was timed in (the judge's process_calls), or none */
	size_t process_calls[KAGENT_STATISTICS_GROUP_CAP];
	size_t processes;
};

static json_t *
verdict__interval_json(const struct kagent_interval *interval)
{
	return json_pack("[f, f]", interval->low, interval->high);
}

/* The arm's samples as the statistics take them: in its processes' groups, if any. */
static struct kagent_samples
verdict__arm_samples(const struct verdict__arm *arm)
{
	struct kagent_samples samples = {.values = arm->samples, .count = arm->count};

	if (arm->processes > 1) {
		samples.group_counts = arm->process_calls;
		samples.groups = arm->processes;
	}
	return samples;
}

/* The judge's process_calls, where they are two to KAGENT_STATISTICS_GROUP_CAP positive
 * counts adding up to the samples kept; else the samples are one group. */
static void
verdict__arm_processes(struct verdict__arm *arm, const json_t *summary)
{
	const json_t *calls = json_object_get(summary, "process_calls"), *item;
	size_t index, total = 0;

	arm->processes = 0;
	if (!json_is_array(calls) || json_array_size(calls) < 2 ||
	    json_array_size(calls) > KAGENT_STATISTICS_GROUP_CAP)
		return;
	json_array_foreach(calls, index, item)
	{
		if (!json_is_integer(item) || json_integer_value(item) < 1 ||
		    (size_t)json_integer_value(item) > arm->count)
			return;
		arm->process_calls[index] = (size_t)json_integer_value(item);
		total += arm->process_calls[index];
	}
	if (total == arm->count)
		arm->processes = json_array_size(calls);
}

/*
 * Reads an arm's summary: a copy whose samples_ms is the checked, capped list (null when
 * there is none), whose median_ms is computed from it (the mean of its processes' medians
 * where process_calls groups them) and ci95_ms is its bootstrap interval. Samples that are
 * not all finite, non-negative numbers are dropped whole.
 */
static void
verdict__arm_read(struct verdict__arm *arm, const json_t *summary)
{
	const json_t *list = json_object_get(summary, "samples_ms"), *item;
	struct kagent_interval interval;
	struct kagent_samples samples;
	json_t *kept;
	double median;
	size_t index;

	memset(arm, 0, sizeof *arm);
	if (!json_is_object(summary)) {
		arm->summary = json_null();
		return;
	}
	arm->summary = json_deep_copy(summary);
	arm->samples = kagent_malloc(KAGENT_STATISTICS_SAMPLE_CAP * sizeof *arm->samples);
	json_array_foreach(list, index, item)
	{
		double value = json_number_value(item);

		if (!json_is_number(item) || !isfinite(value) || value < 0) {
			arm->count = 0;
			break;
		}
		if (arm->count < KAGENT_STATISTICS_SAMPLE_CAP)
			arm->samples[arm->count++] = value;
	}
	kept = arm->count > 0 ? json_array() : json_null();
	for (index = 0; index < arm->count; index++)
		json_array_append_new(kept, json_real(arm->samples[index]));
	json_object_set_new(arm->summary, "samples_ms", kept);
	verdict__arm_processes(arm, summary);
	samples = verdict__arm_samples(arm);
	if (kagent_statistics_median(&samples, &median) == 0 &&
	    kagent_statistics_median_interval(&samples, &interval) == 0) {
		json_object_set_new(arm->summary, "median_ms", json_real(median));
		json_object_set_new(arm->summary, "ci95_ms", verdict__interval_json(&interval));
	} else {
		json_object_set_new(arm->summary, "ci95_ms", json_null());
	}
}

static void
verdict__arm_free(struct verdict__arm *arm)
{
	json_decref(arm->summary);
	free(arm->samples);
}

/* baseline / candidate median into timing[key], and its bootstrap interval into key_ci95. */
static void
verdict__speedup(json_t *timing, const char *key, const struct verdict__arm *baseline,
		 const struct verdict__arm *candidate)
{
	struct kagent_interval interval;
	struct kagent_samples top = verdict__arm_samples(baseline),
			      bottom = verdict__arm_samples(candidate);
	char ci_key[48];
	double base = 0, own = 0;
	int measured = verdict__number(baseline->summary, "median_ms", &base) &&
		       verdict__number(candidate->summary, "median_ms", &own) && own > 0 &&
		       base > 0;

	snprintf(ci_key, sizeof ci_key, "%s_ci95", key);
	json_object_set_new(timing, key, measured ? json_real(base / own) : json_null());
	json_object_set_new(timing, ci_key,
			    measured &&
				    kagent_statistics_ratio_interval(&top, &bottom, &interval) == 0
				? verdict__interval_json(&interval)
				: json_null());
}

/*
 * The speed of light's share of the measured time: the higher of the roofline's floor (bytes
 * over bandwidth) and the compute floor (kagent profile), over the candidate's median; null
 * without a floor or a median.
 */
static json_t *
verdict__sol_fraction(const json_t *judge, const json_t *candidate)
{
	double floor_ms = 0, compute_ms = 0, median = 0;

	verdict__number(json_object_get(judge, "roofline"), "floor_ms", &floor_ms);
	if (verdict__number(json_object_get(judge, "compute"), "floor_ms", &compute_ms) &&
	    compute_ms > floor_ms)
		floor_ms = compute_ms;
	if (floor_ms <= 0 || !verdict__number(candidate, "median_ms", &median) || median <= 0)
		return json_null();
	return json_real(floor_ms / median);
}

/*
 * One arm's summary in one basis, from the judge's pair {"device": SUMMARY or null, "wall":
 * SUMMARY}. An older judge (or a cached baseline it measured) sent a bare SUMMARY, which has
 * median_ms or samples_ms at the top: that was the judge's clock, the wall basis. NULL when
 * absent or malformed: the arm is then null, whatever else the pair holds.
 */
static const json_t *
verdict__pair_get(const json_t *pair, enum kagent_verdict_basis basis)
{
	const json_t *summary;

	if (!json_is_object(pair))
		return NULL;
	if (json_object_get(pair, "median_ms") != NULL ||
	    json_object_get(pair, "samples_ms") != NULL)
		return basis == KAGENT_VERDICT_BASIS_WALL ? pair : NULL;
	summary = json_object_get(pair, kagent_verdict_basis_names[basis]);
	return json_is_object(summary) ? summary : NULL;
}

/* The judge's pair of each arm: timing.candidate, baselines.eager, baselines.compile. */
static void
verdict__pairs(const json_t *judge, const json_t *pairs[VERDICT_ARM_COUNT])
{
	const json_t *baselines = json_object_get(judge, "baselines");

	pairs[VERDICT_CANDIDATE] = json_object_get(json_object_get(judge, "timing"), "candidate");
	pairs[VERDICT_EAGER] = json_object_get(baselines, "eager");
	pairs[VERDICT_COMPILE] = json_object_get(baselines, "compile");
}

/*
 * One basis's numbers: {"candidate", "eager", "compile", "speedup_vs_eager",
 * "speedup_vs_eager_ci95", "speedup_vs_compile", "speedup_vs_compile_ci95"}, from the judge's
 * summaries in that basis; *measured is how many arms had one.
 */
static json_t *
verdict__basis(const json_t *judge, enum kagent_verdict_basis basis, int *measured)
{
	const json_t *pairs[VERDICT_ARM_COUNT];
	struct verdict__arm arms[VERDICT_ARM_COUNT];
	json_t *object = json_object();
	size_t index;

	verdict__pairs(judge, pairs);
	*measured = 0;
	for (index = 0; index < VERDICT_ARM_COUNT; index++) {
		verdict__arm_read(&arms[index], verdict__pair_get(pairs[index], basis));
		*measured += json_is_object(arms[index].summary);
		json_object_set(object, verdict__arm_names[index], arms[index].summary);
	}
	verdict__speedup(object, "speedup_vs_eager", &arms[VERDICT_EAGER],
			 &arms[VERDICT_CANDIDATE]);
	verdict__speedup(object, "speedup_vs_compile", &arms[VERDICT_COMPILE],
			 &arms[VERDICT_CANDIDATE]);
	for (index = 0; index < VERDICT_ARM_COUNT; index++)
		verdict__arm_free(&arms[index]);
	return object;
}

/*
 * Why this verdict cannot use device time, or NULL when it can: an arm the judge timed on its
 * clock has no device summary (a CPU run, CUPTI unavailable, an older judge). Mixing the bases
 * would compare a device median with a wall one, so one such arm moves every number to wall.
 */
static char *
verdict__device_missing(const json_t *judge)
{
	const json_t *pairs[VERDICT_ARM_COUNT];
	const char *why = verdict__string(json_object_get(judge, "timing"), "device_note");
	struct kagent_buffer arms = {0};
	char *reason, *note;
	size_t index;

	verdict__pairs(judge, pairs);
	for (index = 0; index < VERDICT_ARM_COUNT; index++) {
		if (verdict__pair_get(pairs[index], KAGENT_VERDICT_BASIS_WALL) == NULL ||
		    verdict__pair_get(pairs[index], KAGENT_VERDICT_BASIS_DEVICE) != NULL)
			continue;
		kagent_buffer_appendf(&arms, "%s%s", arms.length > 0 ? ", " : "",
				      verdict__arm_names[index]);
	}
	if (arms.length == 0)
		return NULL;
	reason = verdict__first_line(why);
	note = kagent_asprintf("device time was asked for, but the judge measured none for the "
			       "%s arm%s (%s): the speedups are in wall time",
			       arms.data, strchr(arms.data, ',') != NULL ? "s" : "",
			       reason[0] ? reason : "no reason given");
	free(reason);
	kagent_buffer_free(&arms);
	return note;
}

/*
 * The verdict's timing object: each basis's numbers under "device" and "wall", and the chosen
 * basis's at the top level, where every reader of a speedup looks. A fallback to wall is said
 * in basis_note and, except on the CPU (where there is never device time), in a warning.
 */
static json_t *
verdict__timing(struct verdict__state *state, const json_t *judge,
		const struct kagent_verdict_input *in, const char *device)
{
	const json_t *timing = json_object_get(judge, "timing");
	const json_t *baselines = json_object_get(judge, "baselines");
	const json_t *boundary = json_object_get(timing, "boundary");
	const char *method = verdict__string(timing, "method");
	const char *order = verdict__string(timing, "order");
	const char *device_note = verdict__string(timing, "device_note");
	const char *compile_error = verdict__string(baselines, "compile_error");
	enum kagent_verdict_basis basis = in->basis == KAGENT_VERDICT_BASIS_WALL
					      ? KAGENT_VERDICT_BASIS_WALL
					      : KAGENT_VERDICT_BASIS_DEVICE;
	json_t *bases[KAGENT_VERDICT_BASIS_COUNT], *object;
	int measured[KAGENT_VERDICT_BASIS_COUNT], index;
	double overhead = 0, verified = 0;
	char *note = NULL;

	if (!json_is_object(timing) && !json_is_object(baselines))
		return json_null();
	for (index = 0; index < KAGENT_VERDICT_BASIS_COUNT; index++)
		bases[index] = verdict__basis(judge, index, &measured[index]);
	if (basis == KAGENT_VERDICT_BASIS_DEVICE &&
	    (note = verdict__device_missing(judge)) != NULL) {
		basis = KAGENT_VERDICT_BASIS_WALL;
		if (device == NULL || strcmp(device, "cpu") != 0)
			json_array_append_new(state->warnings, json_string(note));
	}
	/* A copy, not shared references: a reader editing one number must not edit two. */
	object = json_deep_copy(bases[basis]);
	json_object_set_new(object, "sol_fraction",
			    verdict__sol_fraction(judge, json_object_get(object, "candidate")));
	json_object_set_new(object, "basis", json_string(kagent_verdict_basis_name(basis)));
	json_object_set_new(object, "basis_note", note != NULL ? json_string(note) : json_null());
	json_object_set_new(object, "device_note",
			    device_note != NULL ? json_string(device_note) : json_null());
	if (compile_error != NULL) {
		char *why = verdict__first_line(compile_error);

		json_object_set_new(object, "compile_note", json_string(why));
		free(why);
	} else {
		json_object_set_new(object, "compile_note", json_null());
	}
	json_object_set_new(object, "boundary",
			    json_is_object(boundary) ? json_deep_copy(boundary) : json_null());
	for (index = 0; index < KAGENT_VERDICT_BASIS_COUNT; index++)
		json_object_set_new(object, kagent_verdict_basis_names[index],
				    measured[index] > 0 ? json_incref(bases[index]) : json_null());
	json_object_set_new(object, "baselines_cached",
			    json_boolean(in->baselines_cached ||
					 json_is_false(json_object_get(baselines, "measured"))));
	json_object_set_new(object, "method", method ? json_string(method) : json_null());
	json_object_set_new(object, "order", order ? json_string(order) : json_null());
	/* how many processes timed each arm, and why any were left out (the judge's) */
	json_object_set_new(object, "processes",
			    json_is_object(json_object_get(timing, "processes"))
				? json_deep_copy(json_object_get(timing, "processes"))
				: json_null());
	json_object_set_new(object, "null_overhead_ms",
			    verdict__number(timing, "null_overhead_ms", &overhead)
				? json_real(overhead)
				: json_null());
	json_object_set_new(object, "verified_calls",
			    verdict__number(timing, "verified_calls", &verified)
				? json_integer((json_int_t)verified)
				: json_null());
	for (index = 0; index < KAGENT_VERDICT_BASIS_COUNT; index++)
		json_decref(bases[index]);
	free(note);
	return object;
}

/* "0.015%", "20%": a share of device time for a sentence. */
static void
verdict__format_percent(char *buffer, size_t size, double share)
{
	snprintf(buffer, size, "%.3g%%", share * 100.0);
}

json_t *
kagent_verdict_credit(const json_t *kernels, double threshold, double eager_ms)
{
	double own = 0, total = 0, share;
	char share_text[32], threshold_text[32];
	json_t *credit;

	if (!(threshold > 0 && threshold <= 1))
		threshold = KAGENT_VERDICT_CREDIT_THRESHOLD;
	verdict__format_percent(threshold_text, sizeof threshold_text, threshold);
	if (!verdict__number(kernels, "own_ms", &own) ||
	    !verdict__number(kernels, "total_ms", &total) || !(total > 0) || !(own >= 0) ||
	    !isfinite(total))
		return json_pack("{s:n, s:n, s:n, s:n, s:n, s:b, s:f, s:s}", "own_share",
				 "library_share", "own_ms", "library_ms", "own_saved_ms",
				 "credited", 1, "threshold", threshold, "reason",
				 "share not measured: no kernel profile was recorded (a CPU run, "
				 "or CUPTI unavailable), so the speedup is credited");
	/* The profile comes from the candidate's process: hold it to a share. */
	if (own > total)
		own = total;
	share = own / total;
	verdict__format_percent(share_text, sizeof share_text, share);
	credit = json_pack("{s:f, s:f, s:f, s:f, s:b, s:f}", "own_share", share, "library_share",
			   1.0 - share, "own_ms", own, "library_ms", total - own, "credited",
			   share >= threshold, "threshold", threshold);
	/*
	 * Eager's time less the library kernels (assumed to cost what they cost in the
	 * reference) is the reference work the own kernels replaced; less the own kernels' time,
	 * what they saved. Negative: they are slower than the work they replaced.
	 */
	json_object_set_new(credit, "own_saved_ms",
			    isfinite(eager_ms) && eager_ms > 0
				? json_real(eager_ms - (total - own) - own)
				: json_null());
	json_object_set_new(
	    credit, "reason",
	    share >= threshold
		? json_sprintf("own kernels ran %s of the GPU time, at least the %s threshold",
			       share_text, threshold_text)
		: json_sprintf("own kernels ran %s of the GPU time, under the %s threshold: the "
			       "speedup is library kernels' work, not the candidate's",
			       share_text, threshold_text));
	return credit;
}

/* The GPU's clocks the judge read right after the timed calls (NVML): the known keys, each a
 * non-negative integer or null; null when the judge sent none. */
static json_t *
verdict__clocks(const json_t *reported)
{
	static const char *const keys[] = {"sm_mhz", "memory_mhz", "sm_max_mhz", "memory_max_mhz"};
	json_t *object;
	size_t index;

	if (!json_is_object(reported))
		return json_null();
	object = json_object();
	for (index = 0; index < sizeof keys / sizeof keys[0]; index++) {
		const json_t *value = json_object_get(reported, keys[index]);

		json_object_set_new(object, keys[index],
				    json_is_integer(value) && json_integer_value(value) >= 0
					? json_integer(json_integer_value(value))
					: json_null());
	}
	return object;
}

static json_t *
verdict__environment(const struct kagent_verdict_input *in, const json_t *judge)
{
	static const char *const keys[] = {
	    "device", "gpu", "compute_capability", "torch", "triton", "cuda_runtime", "python"};
	const json_t *reported = json_object_get(judge, "environment");
	json_t *object = json_object();
	size_t index;

	for (index = 0; index < sizeof keys / sizeof keys[0]; index++) {
		const char *value = verdict__string(reported, keys[index]);

		if (value == NULL)
			value = verdict__string(in->hello, keys[index]);
		if (value == NULL && strcmp(keys[index], "device") == 0)
			value = in->device;
		if (value == NULL && in->gpu != NULL && strcmp(keys[index], "gpu") == 0)
			value = in->gpu->name;
		if (value == NULL && in->gpu != NULL &&
		    strcmp(keys[index], "compute_capability") == 0)
			value = in->gpu->compute_capability;
		json_object_set_new(object, keys[index], value ? json_string(value) : json_null());
	}
	json_object_set_new(object, "driver",
			    in->gpu != NULL && in->gpu->driver[0] ? json_string(in->gpu->driver)
								  : json_null());
	json_object_set_new(object, "clocks", verdict__clocks(json_object_get(reported, "clocks")));
	/* what every timed child's context was made with: it bears on the timings */
	json_object_set_new(
	    object, "device_queues",
	    json_is_integer(json_object_get(reported, "device_queues"))
		? json_integer(json_integer_value(json_object_get(reported, "device_queues")))
		: json_null());
	return object;
}

static json_t *
verdict__candidate_output(const json_t *result)
{
	const json_t *process = json_object_get(result, "candidate_process");
	const char *out = verdict__string(process, "stdout");
	const char *err = verdict__string(process, "stderr");
	double out_bytes = 0, err_bytes = 0;

	verdict__number(process, "stdout_bytes", &out_bytes);
	verdict__number(process, "stderr_bytes", &err_bytes);
	return json_pack("{s:s, s:s, s:I, s:I}", "stdout", out ? out : "", "stderr", err ? err : "",
			 "stdout_bytes", (json_int_t)out_bytes, "stderr_bytes",
			 (json_int_t)err_bytes);
}

static json_t *
verdict__degenerate(const json_t *judge)
{
	const json_t *degenerate = json_object_get(judge, "degenerate");

	return json_pack("{s:b, s:b, s:b}", "constant_output",
			 json_is_true(json_object_get(degenerate, "constant_output")), "zeros_pass",
			 json_is_true(json_object_get(degenerate, "zeros_pass")), "identity_pass",
			 json_is_true(json_object_get(degenerate, "identity_pass")));
}

/* Why there is no judge object to judge by: the judge died, or the result is not one. */
static char *
verdict__judge_missing(const json_t *result)
{
	const json_t *process = json_object_get(result, "judge_process");
	char *end = verdict__process_end(process);
	const char *tail = verdict__string(process, "stderr");
	char *last = NULL, *text;

	if (tail != NULL) {
		/* The last non-empty line of the judge's stderr usually names the exception. */
		const char *line = tail + strlen(tail);

		while (line > tail && (line[-1] == '\n' || line[-1] == ' '))
			line--;
		while (line > tail && line[-1] != '\n')
			line--;
		last = verdict__first_line(line);
	}
	if (!json_is_null(json_object_get(result, "judge")) || !json_is_object(process))
		text = kagent_strdup("the worker's result has no judge object");
	else
		text = kagent_asprintf("the judge process %s%s%s", end ? end : "died",
				       last && last[0] ? ": " : "", last ? last : "");
	free(end);
	free(last);
	return text;
}

/*
 * A build's first step: is the worker's answer a result with a judge to judge by? Returns 0
 * and the judge object, or fills *cause: -EINVAL when the problem itself cannot be used,
 * -EPROTO for an error message, a malformed result, a dead or failed judge, or a sandbox
 * that could not be entered (which says nothing about the candidate).
 */
static int
verdict__validate(const json_t *result, const json_t **judge_out, char **cause)
{
	const char *type = verdict__string(result, "type");
	const json_t *judge = json_object_get(result, "judge");
	const json_t *candidate_error = json_object_get(judge, "candidate_error");
	const char *error_kind = verdict__string(candidate_error, "kind");
	const char *problem_error = verdict__string(judge, "problem_error");
	const char *internal_error = verdict__string(judge, "internal_error");
	char *message = NULL;
	int error = -EPROTO;

	if (!json_is_object(result)) {
		*cause = kagent_strdup("the worker's answer is not a JSON object");
	} else if (type != NULL && strcmp(type, "error") == 0) {
		message = verdict__first_line(verdict__string(result, "message"));
		*cause = kagent_asprintf("the worker reported an error: %s",
					 message[0] ? message : "(no message)");
	} else if (type == NULL || strcmp(type, "result") != 0) {
		*cause = kagent_asprintf("the worker answered with a message of type %s, not a "
					 "result",
					 type ? type : "(none)");
	} else if (!json_is_object(judge)) {
		*cause = verdict__judge_missing(result);
	} else if (problem_error != NULL) {
		error = -EINVAL;
		message = verdict__first_line(problem_error);
		*cause = kagent_asprintf("the problem cannot be used: %s", message);
	} else if (internal_error != NULL) {
		message = verdict__first_line(internal_error);
		*cause = kagent_asprintf("the judge failed: %s", message);
	} else if (error_kind != NULL && strcmp(error_kind, "sandbox") == 0) {
		message = verdict__first_line(verdict__string(candidate_error, "message"));
		*cause =
		    kagent_asprintf("the candidate's sandbox could not be set up: %s", message);
	} else {
		*judge_out = judge;
		error = 0;
	}
	free(message);
	return error;
}

/* Step 3 of docs/verdict.md: the first tampering's detail says what was replaced. */
static char *
verdict__tampering_reason(const struct verdict__state *state)
{
	const json_t *item;
	size_t index;

	json_array_foreach(state->violations, index, item)
	{
		if (strcmp(verdict__string(item, "check"), "timer_tampering") == 0)
			return kagent_strdup(verdict__string(item, "detail"));
	}
	return kagent_strdup("the candidate tampered with the timer");
}

/*
 * "all 3 trials passed; 1.50x the speed of eager PyTorch", for a correct verdict; an
 * uncredited one says so, and the warning says what follows.
 */
static char *
verdict__correct_reason(struct verdict__state *state, const json_t *judge)
{
	double eager = json_number_value(json_object_get(state->timing, "speedup_vs_eager"));
	size_t trials = json_array_size(json_object_get(judge, "trials"));
	const char *credit = verdict__string(state->credit, "reason");

	if (json_is_true(json_object_get(state->credit, "credited")))
		return eager > 0 ? kagent_asprintf("all %zu trials passed; %.2fx the speed of "
						   "eager PyTorch",
						   trials, eager)
				 : kagent_asprintf("all %zu trials passed", trials);
	json_array_append_new(state->warnings,
			      json_sprintf("not credited: %s; the speedup is reported but counts "
					   "toward no best variant, target or report",
					   credit));
	return eager > 0
		   ? kagent_asprintf("all %zu trials passed; %.2fx the speed of eager "
				     "PyTorch, not credited: %s",
				     trials, eager, credit)
		   : kagent_asprintf("all %zu trials passed; not credited: %s", trials, credit);
}

/*
 * A build's second step: runs every check into the state, then decides the status and its
 * reason in the order of docs/verdict.md. Returns 0, or -EPROTO with *cause when the judge
 * reports no failure yet did not finish or ran no trial: such a result proves nothing.
 */
static int
verdict__decide(struct verdict__state *state, const struct kagent_verdict_input *in,
		const json_t *judge, enum kagent_verdict_status *status_out, char **reason_out,
		char **cause)
{
	const char *device = verdict__string(json_object_get(judge, "environment"), "device");
	const char *phase = verdict__string(judge, "phase");
	enum kagent_verdict_status status;
	char *reason = NULL;
	double eager_ms = NAN;

	if (device == NULL)
		device = in->device;
	state->violations = json_array();
	state->counts = json_object();
	state->warnings = json_array();
	state->timing = verdict__timing(state, judge, in, device);
	if (!verdict__number(json_object_get(state->timing, "eager"), "median_ms", &eager_ms))
		eager_ms = NAN;
	state->credit = kagent_verdict_credit(device != NULL && strcmp(device, "cuda") == 0
						  ? json_object_get(judge, "kernels")
						  : NULL,
					      in->credit_threshold, eager_ms);
	verdict__check_trials(state, json_object_get(judge, "trials"));
	verdict__check_rejections(state, judge, device);
	verdict__collect_warnings(state, judge, device);

	status = verdict__classify_error(in->result, judge, &reason);
	if (status == KAGENT_VERDICT_REJECTED) {
		reason = verdict__tampering_reason(state);
	} else if (status != KAGENT_VERDICT_CORRECT) {
		/* Decided by the candidate's error. */
	} else if (state->incorrect_reason != NULL) {
		status = KAGENT_VERDICT_INCORRECT;
		reason = kagent_strdup(state->incorrect_reason);
	} else if (phase == NULL || strcmp(phase, "done") != 0) {
		*cause = kagent_asprintf("the judge stopped in phase %s without a verdict or an "
					 "error",
					 phase ? phase : "(unknown)");
		return -EPROTO;
	} else if (json_array_size(json_object_get(judge, "trials")) == 0) {
		*cause = kagent_strdup("the judge ran no correctness trial");
		return -EPROTO;
	} else if (state->rejected_reason != NULL) {
		status = KAGENT_VERDICT_REJECTED;
		reason = kagent_strdup(state->rejected_reason);
	} else {
		reason = verdict__correct_reason(state, judge);
	}
	*status_out = status;
	*reason_out = reason;
	return 0;
}

/*
 * The sizes of a generalisation report, kept where each is [old, new] in integers: the copy
 * goes into *sizes_out, "batch_size 16 -> 9, dim 16384 -> 8193" is returned.
 */
static char *
verdict__generalisation_sizes(const json_t *sizes, json_t **sizes_out)
{
	struct kagent_buffer text = {0};
	const char *name;
	const json_t *pair;

	*sizes_out = json_object();
	json_object_foreach((json_t *)sizes, name, pair)
	{
		const json_t *old = json_array_get(pair, 0), *new = json_array_get(pair, 1);

		if (json_array_size(pair) != 2 || !json_is_integer(old) || !json_is_integer(new))
			continue;
		json_object_set_new(*sizes_out, name, json_deep_copy(pair));
		kagent_buffer_appendf(&text, "%s%s %lld -> %lld", text.length > 0 ? ", " : "", name,
				      (long long)json_integer_value(old),
				      (long long)json_integer_value(new));
	}
	return text.length > 0 ? kagent_buffer_take(&text) : kagent_strdup("(none)");
}

json_t *
kagent_verdict_generalisation(const json_t *report)
{
	const json_t *trial = json_object_get(report, "trial");
	const json_t *error = json_object_get(report, "candidate_error");
	const char *skipped = verdict__string(report, "skipped");
	json_t *sizes = NULL, *generalises = json_null(), *object;
	char *listed = verdict__generalisation_sizes(json_object_get(report, "sizes"), &sizes);
	char *reason, *message;
	int checked = 1;

	if (!json_is_object(report) || skipped != NULL) {
		checked = 0;
		reason = kagent_strdup(skipped != NULL ? skipped : "not checked");
	} else if (json_is_object(error)) {
		message = verdict__first_line(verdict__string(error, "message"));
		generalises = json_false();
		reason = kagent_asprintf(
		    "at sizes %s the candidate failed (%s)%s%s", listed,
		    verdict__string(error, "kind") ? verdict__string(error, "kind") : "unknown",
		    message[0] ? ": " : "", message);
		free(message);
	} else if (json_is_object(trial) && json_is_true(json_object_get(trial, "passed"))) {
		generalises = json_true();
		reason = kagent_asprintf("correct at sizes %s", listed);
	} else if (json_is_object(trial)) {
		message = verdict__first_line(verdict__string(trial, "reason"));
		generalises = json_false();
		reason = kagent_asprintf("at sizes %s the output is wrong%s%s", listed,
					 message[0] ? ": " : "", message);
		free(message);
	} else {
		checked = 0;
		reason = kagent_strdup("the judge reported neither a trial nor an error");
	}
	object = json_pack("{s:b, s:o, s:o, s:s, s:o}", "checked", checked, "sizes", sizes,
			   "generalises", generalises, "reason", reason, "trial",
			   json_is_object(trial) && checked ? json_deep_copy(trial) : json_null());
	free(listed);
	free(reason);
	return object;
}

/* A build's last step: the verdict object of docs/verdict.md, from the decision and the judge. */
static json_t *
verdict__assemble(const struct kagent_verdict_input *in, const json_t *judge,
		  const struct verdict__state *state, enum kagent_verdict_status status,
		  const char *reason)
{
	json_t *verdict = json_object();

	json_object_set_new(verdict, "schema", json_string(KAGENT_VERDICT_SCHEMA));
	json_object_set_new(verdict, "status", json_string(kagent_verdict_status_name(status)));
	json_object_set_new(verdict, "reason", json_string(reason));
	json_object_set_new(
	    verdict, "problem",
	    json_pack("{s:s?, s:s?}", "path", in->problem_path, "sha256", in->problem_sha256));
	json_object_set_new(verdict, "candidate",
			    json_pack("{s:s?, s:s?, s:s}", "path", in->candidate_path, "sha256",
				      in->candidate_sha256, "backend",
				      in->backend ? in->backend : "unknown"));
	json_object_set_new(verdict, "trials",
			    verdict__copy(judge, "trials", JSON_ARRAY, json_array()));
	json_object_set(verdict, "timing", state->timing);
	json_object_set(verdict, "credit", state->credit);
	json_object_set_new(
	    verdict, "generalisation",
	    kagent_verdict_generalisation(json_object_get(judge, "generalisation")));
	json_object_set_new(verdict, "kernels",
			    verdict__copy(judge, "kernels", JSON_OBJECT, json_null()));
	json_object_set_new(verdict, "environment", verdict__environment(in, judge));
	json_object_set_new(verdict, "violations", json_incref(state->violations));
	json_object_set_new(verdict, "warnings", json_incref(state->warnings));
	json_object_set_new(verdict, "degenerate", verdict__degenerate(judge));
	/* what `kagent profile` renders; null when not recorded */
	json_object_set_new(verdict, "reference_kernels",
			    verdict__copy(judge, "reference_kernels", JSON_OBJECT, json_null()));
	json_object_set_new(verdict, "roofline",
			    verdict__copy(judge, "roofline", JSON_OBJECT, json_null()));
	json_object_set_new(verdict, "compute",
			    verdict__copy(judge, "compute", JSON_OBJECT, json_null()));
	json_object_set_new(verdict, "counters",
			    verdict__copy(judge, "counters", JSON_OBJECT, json_null()));
	json_object_set_new(verdict, "reference_counters",
			    verdict__copy(judge, "reference_counters", JSON_OBJECT, json_null()));
	json_object_set_new(verdict, "timing_window",
			    verdict__copy(judge, "timing_window", JSON_OBJECT, json_null()));
	json_object_set_new(verdict, "phase_seconds",
			    verdict__copy(judge, "phase_seconds", JSON_OBJECT, json_object()));
	json_object_set_new(verdict, "phase_peak_bytes",
			    verdict__copy(judge, "phase_peak_bytes", JSON_OBJECT, json_object()));
	json_object_set_new(verdict, "candidate_output", verdict__candidate_output(in->result));
	json_object_set_new(verdict, "candidate_prepared",
			    json_boolean(json_is_true(json_object_get(
				json_object_get(in->result, "candidate_process"), "prepared"))));
	json_object_set_new(verdict, "wall_seconds", json_real(in->wall_seconds));
	return verdict;
}

int
kagent_verdict_build(const struct kagent_verdict_input *in, json_t **verdict_out, char **cause)
{
	struct verdict__state state = {0};
	const json_t *judge = NULL;
	enum kagent_verdict_status status = KAGENT_VERDICT_CORRECT;
	char *reason = NULL;
	int error;

	*verdict_out = NULL;
	error = verdict__validate(in->result, &judge, cause);
	if (error < 0)
		goto out;
	error = verdict__decide(&state, in, judge, &status, &reason, cause);
	if (error < 0)
		goto out;
	*verdict_out = verdict__assemble(in, judge, &state, status, reason);
out:
	free(reason);
	free(state.incorrect_reason);
	free(state.rejected_reason);
	json_decref(state.violations);
	json_decref(state.counts);
	json_decref(state.warnings);
	json_decref(state.timing);
	json_decref(state.credit);
	return error;
}

int
kagent_verdict_exit_status(const json_t *verdict)
{
	const char *status = verdict__string(verdict, "status");

	return status != NULL && strcmp(status, "correct") == 0 ? 0 : 1;
}

json_t *
kagent_verdict_error_json(const char *kind, const char *message)
{
	return json_pack("{s:s, s:s, s:s}", "schema", KAGENT_ERROR_SCHEMA, "error",
			 kind ? kind : "worker", "message", message ? message : "");
}

/* " [1.45, 1.55]" for a two-number interval, "" for anything else. */
static void
verdict__format_interval(char *buffer, size_t size, const json_t *interval, int digits,
			 const char *unit)
{
	buffer[0] = '\0';
	if (json_array_size(interval) == 2 && json_is_number(json_array_get(interval, 0)) &&
	    json_is_number(json_array_get(interval, 1))) {
		char low[32], high[32];

		snprintf(low, sizeof low, "%.*f%s", digits,
			 json_number_value(json_array_get(interval, 0)), unit);
		snprintf(high, sizeof high, "%.*f%s", digits,
			 json_number_value(json_array_get(interval, 1)), unit);
		snprintf(buffer, size, " [%s, %s]", low, high);
	}
}

static void
verdict__render_summary(FILE *stream, const char *label, const json_t *summary,
			const json_t *speedup, const json_t *speedup_interval)
{
	char interval[80];
	double median = 0, calls = 0;

	if (!verdict__number(summary, "median_ms", &median))
		return;
	verdict__number(summary, "calls", &calls);
	verdict__format_interval(interval, sizeof interval, json_object_get(summary, "ci95_ms"), 4,
				 "");
	fprintf(stream, "  %-10s %9.4f ms (median of %.0f calls%s%s)", label, median, calls,
		interval[0] ? "; 95% CI" : "", interval);
	if (json_is_number(speedup)) {
		verdict__format_interval(interval, sizeof interval, speedup_interval, 2, "x");
		fprintf(stream, "   candidate speedup %.2fx%s", json_number_value(speedup),
			interval);
	}
	fputc('\n', stream);
}

/* "wall time: 0.62x eager, 0.80x compile": the basis not used, so a reader sees both clocks. */
static void
verdict__render_other_basis(FILE *stream, const json_t *timing)
{
	const char *basis = verdict__string(timing, "basis");
	const char *other = basis != NULL && strcmp(basis, "wall") == 0 ? "device" : "wall";
	const json_t *numbers = json_object_get(timing, other);
	const json_t *eager = json_object_get(numbers, "speedup_vs_eager");
	const json_t *compile = json_object_get(numbers, "speedup_vs_compile");

	if (basis == NULL || (!json_is_number(eager) && !json_is_number(compile)))
		return;
	fprintf(stream, "  %s time: ", other);
	if (json_is_number(eager))
		fprintf(stream, "%.2fx eager", json_number_value(eager));
	if (json_is_number(compile))
		fprintf(stream, "%s%.2fx compile", json_is_number(eager) ? ", " : "",
			json_number_value(compile));
	fputc('\n', stream);
}

void
kagent_verdict_render_text(const json_t *verdict, FILE *stream)
{
	const json_t *timing = json_object_get(verdict, "timing");
	const json_t *kernels = json_object_get(verdict, "kernels");
	const json_t *environment = json_object_get(verdict, "environment");
	const json_t *credit = json_object_get(verdict, "credit");
	const json_t *generalisation = json_object_get(verdict, "generalisation");
	const json_t *item;
	const char *status = verdict__string(verdict, "status");
	const char *gpu = verdict__string(environment, "gpu");
	double share = 0;
	size_t index;

	fprintf(stream, "%s: %s\n", status ? status : "unknown",
		verdict__string(verdict, "reason") ? verdict__string(verdict, "reason") : "");
	fprintf(stream, "  candidate  %s (%s)\n",
		verdict__string(json_object_get(verdict, "candidate"), "path")
		    ? verdict__string(json_object_get(verdict, "candidate"), "path")
		    : "?",
		verdict__string(json_object_get(verdict, "candidate"), "backend")
		    ? verdict__string(json_object_get(verdict, "candidate"), "backend")
		    : "unknown");
	if (verdict__string(environment, "device") != NULL)
		fprintf(stream, "  device     %s%s%s\n", verdict__string(environment, "device"),
			gpu ? ", " : "", gpu ? gpu : "");
	if (json_is_object(timing)) {
		const char *basis = verdict__string(timing, "basis");
		const char *basis_note = verdict__string(timing, "basis_note");

		if (basis != NULL)
			fprintf(stream, "  timing     %s time%s%s%s\n", basis,
				basis_note ? " (" : "", basis_note ? basis_note : "",
				basis_note ? ")" : "");
		verdict__render_summary(stream, "timed", json_object_get(timing, "candidate"), NULL,
					NULL);
		verdict__render_summary(stream, "eager", json_object_get(timing, "eager"),
					json_object_get(timing, "speedup_vs_eager"),
					json_object_get(timing, "speedup_vs_eager_ci95"));
		verdict__render_summary(stream, "compile", json_object_get(timing, "compile"),
					json_object_get(timing, "speedup_vs_compile"),
					json_object_get(timing, "speedup_vs_compile_ci95"));
		verdict__render_other_basis(stream, timing);
		if (json_is_true(json_object_get(timing, "baselines_cached")))
			fprintf(stream, "  (baselines from the cache)\n");
	}
	if (verdict__number(kernels, "own_share", &share)) {
		double own = 0, total = 0;

		verdict__number(kernels, "own_ms", &own);
		verdict__number(kernels, "total_ms", &total);
		fprintf(stream,
			"  kernels    %.0f%% of GPU time in own kernels (%.4f of %.4f ms)\n",
			share * 100.0, own, total);
	}
	/* Shown where the share was measured: "not measured" tells a person nothing. */
	if (json_is_number(json_object_get(credit, "own_share")) &&
	    verdict__string(credit, "reason") != NULL)
		fprintf(stream, "  credit     %s: %s\n",
			json_is_false(json_object_get(credit, "credited")) ? "not credited"
									   : "credited",
			verdict__string(credit, "reason"));
	if (json_is_true(json_object_get(generalisation, "checked")))
		fprintf(stream, "  sizes      %s: %s\n",
			json_is_true(json_object_get(generalisation, "generalises"))
			    ? "generalises"
			    : "does not generalise",
			verdict__string(generalisation, "reason"));
	json_array_foreach(json_object_get(verdict, "violations"), index, item)
	    fprintf(stream, "  violation  %s: %s\n",
		    verdict__string(item, "check") ? verdict__string(item, "check") : "?",
		    verdict__string(item, "detail") ? verdict__string(item, "detail") : "");
	json_array_foreach(json_object_get(verdict, "warnings"), index, item) fprintf(
	    stream, "  warning    %s\n", json_string_value(item) ? json_string_value(item) : "");
}
