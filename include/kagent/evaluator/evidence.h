/*
 * Evidence bundles (docs/verdict.md): `kagent eval --evidence DIR` writes the verdict, the raw
 * samples, the kernel summary, the environment and the seeds beside copies of the problem and
 * the candidate, and `kagent verify DIR` re-runs that evaluation and compares the two verdicts.
 */
#ifndef KAGENT_EVIDENCE_H
#define KAGENT_EVIDENCE_H

#include "kagent/evaluator/evaluation.h"

#include <jansson.h>
#include <stdio.h>

#define KAGENT_EVIDENCE_SCHEMA "kagent.evidence/1"

/* A loaded bundle; the paths point into its folder. */
struct kagent_evidence {
	char *problem_path;
	char *candidate_path;
	json_t *verdict;  /* verdict.json */
	json_t *evidence; /* evidence.json */
};

/*
 * Writes DIR/verdict.json, DIR/evidence.json, DIR/problem.py and DIR/candidate.py, each
 * atomically, creating DIR. options are those the verdict came from. Returns 0, or a negative
 * errno with *cause (-ESTALE when a file no longer has the verdict's sha256).
 */
int kagent_evidence_write(const char *directory, const json_t *verdict,
			  const struct kagent_evaluation_options *options, char **cause);
/*
 * Loads DIR and checks it: both JSON files with their schemas, and problem.py and
 * candidate.py with the sha256 that evidence.json and verdict.json record. Returns 0, or a
 * negative errno with *cause (-EINVAL for a bundle that is not whole or was changed).
 */
int kagent_evidence_load(const char *directory, struct kagent_evidence *bundle, char **cause);
void kagent_evidence_free(struct kagent_evidence *bundle);
/* The options that re-run the bundle's evaluation: its files, seeds, trials and device. */
void kagent_evidence_options(const struct kagent_evidence *bundle,
			     struct kagent_evaluation_options *options);
/*
 * The options that re-run the evaluation a verdict records (kagent replay): its seeds (the
 * first trial's), trial counts on the problem's own and signed inputs, device and speedup
 * basis. The files and everything else are left to the caller.
 */
void kagent_evidence_options_from_verdict(const json_t *verdict,
					  struct kagent_evaluation_options *options);
/*
 * The default floor on a speedup interval's half-width when two runs are compared, as a
 * fraction of the speedup: verdicts of one kernel move by 1-3% between runs (docs/benchmarks.md,
 * timing fidelity) while one run's bootstrap interval can be 0.1% wide.
 */
#define KAGENT_EVIDENCE_INTERVAL_FLOOR 0.02
/*
 * then's verdict against now's: statuses, GPUs, speedups with their intervals and whether they
 * overlap once each is widened to at least interval_floor (a fraction) of its speedup on either
 * side, and "verified": the statuses match and, on the same GPU model, the eager speedup's
 * widened intervals overlap. A new object.
 */
json_t *kagent_evidence_compare(const json_t *then, const json_t *now, double interval_floor);
/* The floor from a percentage, 0 to 100 ("2" or "2.5", as --interval-floor takes it): 0 and
 * *fraction, or -EINVAL. */
int kagent_evidence_interval_floor_parse(const char *percent, double *fraction);
/* The comparison side by side, for people. */
void kagent_evidence_render_comparison(const json_t *comparison, FILE *stream);

#endif
