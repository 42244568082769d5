/*
 * The git history of an optimization (libgit2): one repository per problem,
 * one worktree per run, one commit per evaluated candidate with its verdict in
 * the message's trailers, and a best ref per run that moves only on a
 * confirmed improvement. The layout, under the output directory:
 *
 *   <output>/<problem>/repository.git    bare; branch "problem" holds problem.py
 *   <output>/<problem>/<run-id>/          worktree of branch "runs/<run-id>":
 *                                         problem.py, candidate.py (the latest variant)
 *   refs/heads/runs/<run-id>              every evaluated variant, in order
 *   refs/heads/best/<run-id>              the best confirmed variant of the run
 *
 * kagent writes only branches it created under runs/ and best/, and never one
 * that a worktree other than the run's own has checked out.
 */
#ifndef KAGENT_VARIANT_REPOSITORY_H
#define KAGENT_VARIANT_REPOSITORY_H

#include <stddef.h>

struct kagent_variant_repository;

struct kagent_trailer {
	const char *key;   /* e.g. "Kagent-Status" */
	const char *value; /* one line */
};

struct kagent_variant_commit {
	char *commit_id; /* 40 hex digits */
	char *subject;
	struct kagent_trailer_copy {
		char *key;
		char *value;
	} * trailers;
	size_t trailer_count;
};

/*
 * Opens <output>/<problem_name>/repository.git, creating it (and its "problem"
 * branch holding problem.py with problem_source) when missing. A repository
 * whose problem.py differs from problem_source is an error: a different
 * problem under the same name. Returns 0 or a negative errno with *cause set.
 */
int kagent_variant_repository_open(const char *output_directory, const char *problem_name,
				   const char *problem_source,
				   struct kagent_variant_repository **repository_out, char **cause);
void kagent_variant_repository_close(struct kagent_variant_repository *repository);
/* <output>/<problem_name>, the folder holding the repository, worktrees and traces. */
const char *kagent_variant_repository_directory(const struct kagent_variant_repository *repository);

/*
 * Creates the worktree of a new run (branch runs/<run_id> from "problem") and
 * returns its path in *path_out (caller frees). With resume set, the run must
 * exist and its worktree is reused (recreated when it was deleted).
 */
int kagent_variant_repository_start_run(struct kagent_variant_repository *repository,
					const char *run_id, int resume, char **path_out,
					char **cause);
/*
 * Removes run_id's worktree and its branches runs/<run_id> and best/<run_id> (those that
 * exist), so that the run can be made again: a rebuild from the store cut short.
 */
int kagent_variant_repository_forget_run(struct kagent_variant_repository *repository,
					 const char *run_id, char **cause);
/*
 * Writes file_name (e.g. "candidate.py") with source into the run's worktree
 * and commits it on runs/<run_id> with a message made of subject, body (may be
 * NULL) and the trailers, as of seconds (since 1970, UTC: the author's and committer's
 * time, given so that the same commit can be made again elsewhere with the same id).
 * Returns the commit id in *commit_id_out (caller frees).
 */
int kagent_variant_repository_commit(struct kagent_variant_repository *repository,
				     const char *run_id, const char *file_name, const char *source,
				     const char *subject, const char *body,
				     const struct kagent_trailer *trailers, size_t trailer_count,
				     long long seconds, char **commit_id_out, char **cause);
/* Points best/<run_id> at commit_id, which must be on runs/<run_id>. */
int kagent_variant_repository_move_best(struct kagent_variant_repository *repository,
					const char *run_id, const char *commit_id, char **cause);
/* The commit best/<run_id> points at, or NULL in *commit_id_out when there is none. */
int kagent_variant_repository_best(struct kagent_variant_repository *repository, const char *run_id,
				   char **commit_id_out, char **cause);
/* The run's commits, oldest first, with their parsed trailers (for resume). */
int kagent_variant_repository_list_run(struct kagent_variant_repository *repository,
				       const char *run_id,
				       struct kagent_variant_commit **commits_out,
				       size_t *count_out, char **cause);
void kagent_variant_commits_free(struct kagent_variant_commit *commits, size_t count);
/* The content of file_name at commit_id (caller frees). */
int kagent_variant_repository_read(struct kagent_variant_repository *repository,
				   const char *commit_id, const char *file_name, char **source_out,
				   char **cause);
/*
 * A unified diff between two texts (libgit2's patch from buffers), with
 * old_name and new_name in its header and context_lines of context. Returns
 * "" when they are equal. The caller frees *diff_out.
 */
int kagent_variant_diff_texts(const char *old_text, const char *old_name, const char *new_text,
			      const char *new_name, int context_lines, char **diff_out,
			      char **cause);

#endif
