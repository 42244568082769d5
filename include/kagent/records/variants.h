/*
 * The variants of one run: the candidates the model wrote (v1, v2, ...) with
 * their files and verdicts, the seeds the run's evaluations have used, a commit
 * on the run's branch for every evaluated variant (variant_repository.h, the
 * verdict in Kagent-* trailers), and the run's best variant, which moves
 * (best/<run>, best.py) only once a confirmation on unseen seeds shows it
 * correct and faster.
 *
 * Nothing here runs an evaluation or writes the trace: the owner (the session)
 * gives the function that evaluates a variant and the one that writes a trace
 * record, so the model's tools and the session promote a variant the same way.
 */
#ifndef KAGENT_VARIANTS_H
#define KAGENT_VARIANTS_H

#include <jansson.h>
#include <stdint.h>

#include "kagent/records/config.h"

struct kagent_variant_repository;
struct kagent_variants;

/* A candidate the model wrote, numbered v1, v2, ... in the order it arrived. */
struct kagent_variant {
	char *id;	 /* "v3" */
	int number;	 /* 3 */
	int turn;	 /* the turn that wrote it */
	char *source;	 /* the Python file */
	char *path;	 /* a copy on disk: <problem>/variants/<run>/v3.py */
	char *note;	 /* the model's note, "" when none */
	json_t *verdict; /* its evaluation, or NULL before (or without) one */
	char *commit_id; /* NULL until committed */
	double speedup;	 /* against the configured baseline; 0 unless correct */
	/* The earlier variant it was written from: the one sharing the most lines with it (at
	 * least a fifth of its own; the later one on a tie), or NULL. The model rewrites whole
	 * files and names no parent, so the lineage is read from the sources, the same way for
	 * the trace, the viewer, exports and spans. */
	const struct kagent_variant *parent;
	uint64_t *line_hashes; /* its lines' hashes, sorted, for the next variants' parents */
	size_t line_count;
};

enum kagent_variants_purpose {
	KAGENT_VARIANTS_EVALUATE, /* a new variant: verdict kept, committed to the run branch */
	KAGENT_VARIANTS_PROFILE,  /* kagent profile of a variant */
	KAGENT_VARIANTS_CONFIRM,  /* unseen seeds, before moving the best ref */
	KAGENT_VARIANTS_FINAL,	  /* unseen seeds in a fresh worker process, before announcing */
};

/* status 0 and a verdict, or a negative errno and an error object; both borrowed. */
typedef void (*kagent_variants_verdict_callback)(int status, const json_t *verdict, void *data);
/* Starts an evaluation of variant; callback runs once, later, with its outcome. */
typedef void (*kagent_variants_evaluate_function)(void *data, struct kagent_variant *variant,
						  enum kagent_variants_purpose purpose,
						  kagent_variants_verdict_callback callback,
						  void *callback_data);
/* Writes a trace record of this type; fields are taken over. */
typedef void (*kagent_variants_record_function)(void *data, const char *type, json_t *fields);

struct kagent_variants_options {
	struct kagent_variant_repository *repository; /* borrowed, like the strings */
	const char *run_id;
	const char *worktree;			    /* the run's worktree, where best.py goes */
	enum kagent_target_baseline baseline;	    /* what a speedup is measured against */
	kagent_variants_evaluate_function evaluate; /* the confirmations of promote */
	kagent_variants_record_function record;	    /* the verdict, commit and best records */
	void *data;				    /* for evaluate and record */
};

/*
 * Creates the run's variants, with their folder <repository>/variants/<run>.
 * Returns 0 or a negative errno with *cause set.
 */
int kagent_variants_create(const struct kagent_variants_options *options,
			   struct kagent_variants **variants_out, char **cause);
void kagent_variants_free(struct kagent_variants *variants);

/* For --resume: the variant files already in the folder, v1.py, v2.py, ... up to a gap. */
void kagent_variants_load(struct kagent_variants *variants);
/* For --resume: takes back what a verdict, commit or best record said; ignores the others. */
void kagent_variants_replay(struct kagent_variants *variants, const json_t *record);
/*
 * Makes a run's variants again from its trace records (an array in seq order), where the
 * run's files are gone (a session taken over on another machine, docs/store.md): each
 * evaluate call's source becomes the variant its verdict names (file vN.py), each commit
 * record is committed again on the run's branch (started from "problem", no commit yet) at
 * the time it records, so with the same id, and each best record moves best/<run>. Nothing
 * is recorded. Where a commit comes out with another id (a trace from before committed_at),
 * the records naming it are changed to name the new one. Returns how many commits got a new
 * id, or a negative errno with *cause set.
 */
int kagent_variants_rebuild(struct kagent_variants *variants, json_t *records, char **cause);

/* Records a new variant (numbered, written to disk). Returns NULL with *cause on a bad source. */
struct kagent_variant *kagent_variants_add(struct kagent_variants *variants, const char *source,
					   const char *note, int turn, char **cause);
/* "v3", "3" or "latest"; NULL when there is no such variant. */
struct kagent_variant *kagent_variants_find(const struct kagent_variants *variants,
					    const char *name);
/* The variant evaluated just before this one, or NULL. */
struct kagent_variant *kagent_variants_previous(const struct kagent_variants *variants,
						const struct kagent_variant *variant);
/* The best variant, or NULL before one is confirmed. */
struct kagent_variant *kagent_variants_best(const struct kagent_variants *variants);
/* The speedup the best variant was confirmed at. */
double kagent_variants_best_speedup(const struct kagent_variants *variants);
/* The variant to announce: the best, else the fastest correct committed one; or NULL. */
struct kagent_variant *kagent_variants_final_candidate(const struct kagent_variants *variants);

/* What a run that confirmed nothing still shows (reports): the correct variant fastest as
 * measured against the configured baseline, credited or not, else the last one evaluated;
 * NULL before any verdict. */
struct kagent_variant *kagent_variants_best_evaluated(const struct kagent_variants *variants);

/* The speedup a verdict shows against the configured baseline; 0 unless correct. */
double kagent_variants_speedup(const struct kagent_variants *variants, const json_t *verdict);
/* The same against baseline, for a verdict outside a live run (kagent replay). */
double kagent_variants_verdict_speedup(enum kagent_target_baseline baseline, const json_t *verdict);
/* A seed base whose next few seeds no evaluation of this run has used. */
uint64_t kagent_variants_unseen_seed(const struct kagent_variants *variants);
/*
 * Takes an evaluation's outcome: traces it as a verdict record and remembers
 * its seeds; a new variant's verdict (KAGENT_VARIANTS_EVALUATE) is kept and
 * committed to the run's branch.
 */
void kagent_variants_take_verdict(struct kagent_variants *variants, struct kagent_variant *variant,
				  enum kagent_variants_purpose purpose, int status,
				  const json_t *verdict);
/* Moves best to variant, confirmed at speedup. Returns 0 or a negative errno with *cause. */
int kagent_variants_move_best(struct kagent_variants *variants, struct kagent_variant *variant,
			      double speedup, char **cause);

/*
 * Confirms variant on unseen seeds and moves the best ref to it when it is
 * correct and faster than the current best. moved says whether best moved;
 * message explains either way.
 */
typedef void (*kagent_variants_promote_callback)(int moved, const char *message, void *data);
void kagent_variants_promote(struct kagent_variants *variants, struct kagent_variant *variant,
			     const char *message, kagent_variants_promote_callback callback,
			     void *data);

#endif
