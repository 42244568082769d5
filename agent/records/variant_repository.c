/*
 * The git history of an optimization with libgit2 (see
 * include/kagent/records/variant_repository.h): a bare repository per problem, a worktree per run,
 * a commit per evaluated candidate made through the run's own worktree so that its files, index and
 * branch always agree.
 */
#include "kagent/records/variant_repository.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"

#include <errno.h>
#include <git2.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define VARIANT_REPOSITORY_NAME_MAX 64
/* Each text given to kagent_variant_diff_texts at most. */
#define VARIANT_REPOSITORY_DIFF_INPUT_CAP ((size_t)8 << 20)
#define VARIANT_REPOSITORY_PROBLEM_BRANCH "refs/heads/problem"
#define VARIANT_REPOSITORY_PROBLEM_FILE "problem.py"
/* A fixed identity, so that committing works without any git configuration. */
#define VARIANT_REPOSITORY_AUTHOR_NAME "kagent"
#define VARIANT_REPOSITORY_AUTHOR_EMAIL "kagent@localhost"
/* The problem commit's time: fixed, so that every machine makes the same problem commit and a
 * run's branch rebuilt elsewhere from the store gets the same commit ids (docs/store.md). */
#define VARIANT_REPOSITORY_PROBLEM_TIME 0

/* Used by one thread at a time: libgit2 wants one git_repository per thread. */
struct kagent_variant_repository {
	/* Open only during an operation (see variant_repository__acquire), else NULL. */
	git_repository *git;
	int open_count;
	char *directory; /* <output>/<problem>, absolute */
};

static pthread_once_t variant_repository__library_once = PTHREAD_ONCE_INIT;
static int variant_repository__library_result;

static void
variant_repository__library_initialize(void)
{
	/* Never shut down: libgit2's global state lives as long as the process. */
	variant_repository__library_result = git_libgit2_init();
}

static int
variant_repository__initialize(char **cause)
{
	pthread_once(&variant_repository__library_once, variant_repository__library_initialize);
	if (variant_repository__library_result < 0) {
		*cause = kagent_asprintf("cannot initialize libgit2");
		return -EIO;
	}
	return 0;
}

/* Sets *cause to the message and libgit2's reason; returns the matching negative errno. */
static int variant_repository__git_failure(int code, char **cause, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int
variant_repository__git_failure(int code, char **cause, const char *format, ...)
{
	const git_error *last = git_error_last();
	va_list arguments;
	char *message;

	va_start(arguments, format);
	message = kagent_vasprintf(format, arguments);
	va_end(arguments);
	*cause = kagent_asprintf("%s: %s", message,
				 last != NULL && last->message != NULL ? last->message
								       : "unknown libgit2 error");
	free(message);
	switch (code) {
	case GIT_ENOTFOUND:
		return -ENOENT;
	case GIT_EEXISTS:
		return -EEXIST;
	case GIT_ELOCKED:
	case GIT_EMODIFIED:
		return -EBUSY;
	default:
		return -EIO;
	}
}

/* Names that become folder and branch names: letters, digits, '-', '_', '.', no leading '.'. */
static int
variant_repository__validate_name(const char *kind, const char *name, char **cause)
{
	size_t length = name != NULL ? strlen(name) : 0;

	if (length == 0 || length > VARIANT_REPOSITORY_NAME_MAX || name[0] == '.' ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
		length) {
		*cause =
		    kagent_asprintf("invalid %s \"%s\": use 1 to %d letters, digits, '-', "
				    "'_' or '.', not starting with '.'",
				    kind, name != NULL ? name : "", VARIANT_REPOSITORY_NAME_MAX);
		return -EINVAL;
	}
	return 0;
}

/* A run id must also make valid branch names ("a..b" or "x.lock" would not). */
static int
variant_repository__validate_run_id(const char *run_id, char **cause)
{
	char *reference_name;
	int valid = 0, result;

	result = variant_repository__validate_name("run id", run_id, cause);
	if (result < 0)
		return result;
	reference_name = kagent_asprintf("refs/heads/runs/%s", run_id);
	if (git_reference_name_is_valid(&valid, reference_name) < 0 || !valid) {
		*cause = kagent_asprintf("invalid run id \"%s\": not usable in a branch name "
					 "(no \"..\", no trailing \".\" or \".lock\")",
					 run_id);
		result = -EINVAL;
	}
	free(reference_name);
	return result;
}

static int
variant_repository__parse_commit_id(const char *commit_id, git_oid *oid, char **cause)
{
	if (commit_id == NULL || strlen(commit_id) != GIT_OID_HEXSZ ||
	    strspn(commit_id, "0123456789abcdefABCDEF") != GIT_OID_HEXSZ ||
	    git_oid_fromstr(oid, commit_id) < 0) {
		*cause = kagent_asprintf("invalid commit id \"%s\": expected %d hex digits",
					 commit_id != NULL ? commit_id : "", GIT_OID_HEXSZ);
		return -EINVAL;
	}
	return 0;
}

static char *
variant_repository__format_oid(const git_oid *oid)
{
	char hex[GIT_OID_HEXSZ + 1];

	git_oid_tostr(hex, sizeof(hex), oid);
	return kagent_strdup(hex);
}

/* The content of path in commit oid as a new NUL-terminated string. */
static int
variant_repository__read_file(git_repository *git, const git_oid *oid, const char *path,
			      char **content_out, size_t *size_out, char **cause)
{
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	git_tree_entry *entry = NULL;
	git_blob *blob = NULL;
	char hex[GIT_OID_HEXSZ + 1];
	size_t size;
	int result = 0, code;

	git_oid_tostr(hex, sizeof(hex), oid);
	if ((code = git_commit_lookup(&commit, git, oid)) < 0 ||
	    (code = git_commit_tree(&tree, commit)) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot read commit %s", hex);
		goto out;
	}
	code = git_tree_entry_bypath(&entry, tree, path);
	if (code == GIT_ENOTFOUND) {
		result = -ENOENT;
		*cause = kagent_asprintf("commit %s has no file %s", hex, path);
		goto out;
	}
	if (code < 0) {
		result = variant_repository__git_failure(code, cause, "cannot find %s in commit %s",
							 path, hex);
		goto out;
	}
	if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB) {
		result = -EISDIR;
		*cause = kagent_asprintf("%s in commit %s is not a file", path, hex);
		goto out;
	}
	if ((code = git_blob_lookup(&blob, git, git_tree_entry_id(entry))) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot read %s in commit %s",
							 path, hex);
		goto out;
	}
	size = (size_t)git_blob_rawsize(blob);
	*content_out = kagent_malloc(size + 1);
	memcpy(*content_out, git_blob_rawcontent(blob), size);
	(*content_out)[size] = '\0';
	*size_out = size;
out:
	git_blob_free(blob);
	git_tree_entry_free(entry);
	git_tree_free(tree);
	git_commit_free(commit);
	return result;
}

/* The first commit of the repository: branch "problem" holding problem.py alone. */
static int
variant_repository__commit_problem(git_repository *git, const char *problem_source, char **cause)
{
	git_treebuilder *builder = NULL;
	git_signature *signature = NULL;
	git_tree *tree = NULL;
	git_oid blob_oid, tree_oid, commit_oid;
	int result = 0, code;

	if ((code = git_blob_create_from_buffer(&blob_oid, git, problem_source,
						strlen(problem_source))) < 0 ||
	    (code = git_treebuilder_new(&builder, git, NULL)) < 0 ||
	    (code = git_treebuilder_insert(NULL, builder, VARIANT_REPOSITORY_PROBLEM_FILE,
					   &blob_oid, GIT_FILEMODE_BLOB)) < 0 ||
	    (code = git_treebuilder_write(&tree_oid, builder)) < 0 ||
	    (code = git_tree_lookup(&tree, git, &tree_oid)) < 0 ||
	    (code = git_signature_new(&signature, VARIANT_REPOSITORY_AUTHOR_NAME,
				      VARIANT_REPOSITORY_AUTHOR_EMAIL,
				      VARIANT_REPOSITORY_PROBLEM_TIME, 0)) < 0 ||
	    (code =
		 git_commit_create(&commit_oid, git, VARIANT_REPOSITORY_PROBLEM_BRANCH, signature,
				   signature, NULL, "Add the problem\n", tree, 0, NULL)) < 0)
		result = variant_repository__git_failure(
		    code, cause, "cannot commit the problem in %s", git_repository_path(git));
	git_signature_free(signature);
	git_tree_free(tree);
	git_treebuilder_free(builder);
	return result;
}

/*
 * Opens the repository for an operation, released after it: a daemon's sessions would
 * otherwise each keep one open for their whole run (libgit2 holds a snapshot of its
 * configuration and caches for every open repository), to commit now and then.
 */
static int
variant_repository__acquire(struct kagent_variant_repository *repository, char **cause)
{
	char *path;
	int code, result = 0;

	if (repository->open_count++ > 0)
		return 0;
	path = kagent_asprintf("%s/repository.git", repository->directory);
	if ((code = git_repository_open_bare(&repository->git, path)) < 0) {
		repository->open_count = 0;
		repository->git = NULL;
		result = variant_repository__git_failure(code, cause, "cannot open %s", path);
	}
	free(path);
	return result;
}

static void
variant_repository__release(struct kagent_variant_repository *repository)
{
	if (--repository->open_count > 0)
		return;
	git_repository_free(repository->git);
	repository->git = NULL;
}

/* Opens the bare repository at path, or creates it when nothing is there. */
static int
variant_repository__open_or_create(const char *path, git_repository **git_out, char **cause)
{
	git_repository_init_options options;
	git_config *config = NULL;
	struct stat status;
	int result = 0, code;

	if (stat(path, &status) == 0) {
		if ((code = git_repository_open_bare(git_out, path)) < 0)
			result = variant_repository__git_failure(
			    code, cause, "%s exists but is not a bare git repository", path);
		goto out;
	}
	/* The _INIT macros leave fields out, which -Wextra rejects: use the functions. */
	git_repository_init_options_init(&options, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	options.flags =
	    GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT | GIT_REPOSITORY_INIT_MKDIR;
	options.initial_head = "problem";
	if ((code = git_repository_init_ext(git_out, path, &options)) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot create %s", path);
		goto out;
	}
	/* Bare repositories keep no reflogs by default: keep them, to see how best/ moved. */
	if ((code = git_repository_config(&config, *git_out)) < 0 ||
	    (code = git_config_set_bool(config, "core.logAllRefUpdates", 1)) < 0)
		result = variant_repository__git_failure(code, cause, "cannot configure %s", path);
out:
	git_config_free(config);
	if (result < 0) {
		git_repository_free(*git_out);
		*git_out = NULL;
	}
	return result;
}

int
kagent_variant_repository_open(const char *output_directory, const char *problem_name,
			       const char *problem_source,
			       struct kagent_variant_repository **repository_out, char **cause)
{
	struct kagent_variant_repository *repository = NULL;
	char *directory = NULL, *repository_path = NULL, *existing = NULL;
	char resolved[PATH_MAX];
	git_oid problem_oid;
	size_t existing_size;
	int result, code;

	*repository_out = NULL;
	if ((result = variant_repository__initialize(cause)) < 0 ||
	    (result = variant_repository__validate_name("problem name", problem_name, cause)) < 0)
		goto out;
	directory = kagent_asprintf("%s/%s", output_directory, problem_name);
	if ((result = kagent_fileio_make_directories(directory, 0755, cause)) < 0)
		goto out;
	/* Absolute, so that the worktree paths handed out stay valid after a chdir. */
	if (realpath(directory, resolved) == NULL) {
		result = -errno;
		*cause = kagent_asprintf("cannot resolve %s: %s", directory, strerror(errno));
		goto out;
	}
	repository = kagent_calloc(1, sizeof(*repository));
	repository->directory = kagent_strdup(resolved);
	repository_path = kagent_asprintf("%s/repository.git", repository->directory);
	if ((result =
		 variant_repository__open_or_create(repository_path, &repository->git, cause)) < 0)
		goto out;
	code = git_reference_name_to_id(&problem_oid, repository->git,
					VARIANT_REPOSITORY_PROBLEM_BRANCH);
	if (code == GIT_ENOTFOUND) {
		/* A new repository, or one whose creation was interrupted before its commit. */
		result = variant_repository__commit_problem(repository->git, problem_source, cause);
		goto out;
	}
	if (code < 0) {
		result =
		    variant_repository__git_failure(code, cause, "cannot read %s", repository_path);
		goto out;
	}
	if ((result = variant_repository__read_file(repository->git, &problem_oid,
						    VARIANT_REPOSITORY_PROBLEM_FILE, &existing,
						    &existing_size, cause)) < 0)
		goto out;
	if (existing_size != strlen(problem_source) ||
	    memcmp(existing, problem_source, existing_size) != 0) {
		result = -EEXIST;
		*cause = kagent_asprintf(
		    "%s already holds a different problem named \"%s\": give this problem another "
		    "name (rename its file) or choose another output directory",
		    repository_path, problem_name);
		goto out;
	}
out:
	if (result < 0) {
		kagent_variant_repository_close(repository);
	} else {
		/* Checked: from now on it is opened for each operation only. */
		git_repository_free(repository->git);
		repository->git = NULL;
		*repository_out = repository;
	}
	free(existing);
	free(repository_path);
	free(directory);
	return result;
}

void
kagent_variant_repository_close(struct kagent_variant_repository *repository)
{
	if (repository == NULL)
		return;
	git_repository_free(repository->git);
	free(repository->directory);
	free(repository);
}

const char *
kagent_variant_repository_directory(const struct kagent_variant_repository *repository)
{
	return repository->directory;
}

/*
 * Refuses (-EBUSY) when reference_name is the HEAD of a worktree other than own_worktree
 * (NULL: any worktree): committing there would leave that worktree's files and index stale
 * behind its branch, and it may be a person's.
 */
static int
variant_repository__check_not_checked_out(git_repository *git, const char *reference_name,
					  const char *own_worktree, char **cause)
{
	git_strarray names = {0};
	git_reference *reference = NULL;
	int result = 0, code;
	size_t i;

	code = git_reference_lookup(&reference, git, reference_name);
	if (code == GIT_ENOTFOUND)
		goto out;
	if (code < 0 || (code = git_branch_is_checked_out(reference)) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot inspect %s",
							 reference_name);
		goto out;
	}
	if (code == 0)
		goto out;
	/* Checked out somewhere: find out whether only by the run's own worktree. */
	if ((code = git_worktree_list(&names, git)) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot list worktrees of %s",
							 git_repository_path(git));
		goto out;
	}
	for (i = 0; i < names.count && result == 0; i++) {
		git_worktree *worktree = NULL;
		git_repository *worktree_git = NULL;
		git_reference *head = NULL;

		if (own_worktree != NULL && strcmp(names.strings[i], own_worktree) == 0)
			continue;
		/* As git_branch_is_checked_out does, a worktree whose folder is gone is skipped. */
		if (git_worktree_lookup(&worktree, git, names.strings[i]) == 0 &&
		    git_repository_open_from_worktree(&worktree_git, worktree) == 0 &&
		    git_reference_lookup(&head, worktree_git, "HEAD") == 0 &&
		    git_reference_type(head) == GIT_REFERENCE_SYMBOLIC &&
		    strcmp(git_reference_symbolic_target(head), reference_name) == 0) {
			result = -EBUSY;
			*cause = kagent_asprintf(
			    "%s is checked out in worktree \"%s\" (%s), and kagent never writes to "
			    "a branch checked out elsewhere: switch that worktree to another "
			    "branch",
			    reference_name, names.strings[i], git_worktree_path(worktree));
		}
		git_reference_free(head);
		git_repository_free(worktree_git);
		git_worktree_free(worktree);
	}
out:
	git_strarray_dispose(&names);
	git_reference_free(reference);
	return result;
}

/* Adds the worktree of run_id at path with branch checked out; the path must not exist. */
static int
variant_repository__add_worktree(git_repository *git, const char *run_id, const char *path,
				 git_reference *branch, char **cause)
{
	git_worktree_add_options options;
	git_worktree *worktree = NULL;
	struct stat status;
	int result = 0, code;

	/* libgit2 would create the worktree's git folder before noticing. */
	if (lstat(path, &status) == 0) {
		*cause = kagent_asprintf("%s already exists but is not the worktree of run %s: "
					 "move it away or pick another run id",
					 path, run_id);
		result = -EEXIST;
		goto out;
	}
	git_worktree_add_options_init(&options, GIT_WORKTREE_ADD_OPTIONS_VERSION);
	options.ref = branch;
	if ((code = git_worktree_add(&worktree, git, run_id, path, &options)) < 0)
		result = variant_repository__git_failure(
		    code, cause, "cannot create the worktree of run %s at %s", run_id, path);
out:
	git_worktree_free(worktree);
	return result;
}

/* Reuses the worktree of a run, or recreates it when its folder was deleted or pruned. */
static int
variant_repository__resume_worktree(git_repository *git, const char *run_id, const char *path,
				    git_reference *branch, char **cause)
{
	git_worktree *worktree = NULL;
	int result = 0, code;

	code = git_worktree_lookup(&worktree, git, run_id);
	if (code == 0 && git_worktree_validate(worktree) == 0)
		goto out;
	if (code == 0 && (code = git_worktree_prune(worktree, NULL)) < 0) {
		result = variant_repository__git_failure(
		    code, cause, "cannot prune the stale worktree of run %s", run_id);
		goto out;
	}
	result = variant_repository__add_worktree(git, run_id, path, branch, cause);
out:
	git_worktree_free(worktree);
	return result;
}

int
kagent_variant_repository_start_run(struct kagent_variant_repository *repository,
				    const char *run_id, int resume, char **path_out, char **cause)
{
	git_reference *branch = NULL;
	git_commit *problem = NULL;
	char *branch_name = NULL, *path = NULL;
	git_oid problem_oid;
	int result, code;

	*path_out = NULL;
	if ((result = variant_repository__acquire(repository, cause)) < 0)
		return result;
	if ((result = variant_repository__validate_run_id(run_id, cause)) < 0)
		goto out;
	branch_name = kagent_asprintf("runs/%s", run_id);
	path = kagent_asprintf("%s/%s", repository->directory, run_id);
	code = git_branch_lookup(&branch, repository->git, branch_name, GIT_BRANCH_LOCAL);
	if (code < 0 && code != GIT_ENOTFOUND) {
		result = variant_repository__git_failure(code, cause, "cannot look up branch %s",
							 branch_name);
		goto out;
	}
	if (resume) {
		if (code == GIT_ENOTFOUND) {
			result = -ENOENT;
			*cause = kagent_asprintf(
			    "there is no run %s to resume (no branch %s in %s)", run_id,
			    branch_name, git_repository_path(repository->git));
			goto out;
		}
		result = variant_repository__resume_worktree(repository->git, run_id, path, branch,
							     cause);
		goto out;
	}
	if (code == 0) {
		result = -EEXIST;
		*cause = kagent_asprintf("run %s already exists: resume it or pick another run id",
					 run_id);
		goto out;
	}
	if ((code = git_reference_name_to_id(&problem_oid, repository->git,
					     VARIANT_REPOSITORY_PROBLEM_BRANCH)) < 0 ||
	    (code = git_commit_lookup(&problem, repository->git, &problem_oid)) < 0 ||
	    (code = git_branch_create(&branch, repository->git, branch_name, problem, 0)) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot create branch %s",
							 branch_name);
		goto out;
	}
	result = variant_repository__add_worktree(repository->git, run_id, path, branch, cause);
	/* Without its worktree the run cannot go on: leave no branch that blocks the id. */
	if (result < 0)
		git_branch_delete(branch);
out:
	if (result == 0) {
		*path_out = path;
		path = NULL;
	}
	git_commit_free(problem);
	git_reference_free(branch);
	free(branch_name);
	free(path);
	variant_repository__release(repository);
	return result;
}

int
kagent_variant_repository_forget_run(struct kagent_variant_repository *repository,
				     const char *run_id, char **cause)
{
	git_worktree_prune_options options;
	git_worktree *worktree = NULL;
	git_reference *branch = NULL;
	char *names[2] = {NULL, NULL};
	int result, code;

	if ((result = variant_repository__acquire(repository, cause)) < 0)
		return result;
	if ((result = variant_repository__validate_run_id(run_id, cause)) < 0)
		goto out;
	code = git_worktree_lookup(&worktree, repository->git, run_id);
	git_worktree_prune_options_init(&options, GIT_WORKTREE_PRUNE_OPTIONS_VERSION);
	options.flags = GIT_WORKTREE_PRUNE_VALID | GIT_WORKTREE_PRUNE_WORKING_TREE;
	if (code == 0 && (code = git_worktree_prune(worktree, &options)) < 0) {
		result = variant_repository__git_failure(
		    code, cause, "cannot remove the worktree of run %s", run_id);
		goto out;
	}
	names[0] = kagent_asprintf("runs/%s", run_id);
	names[1] = kagent_asprintf("best/%s", run_id);
	for (size_t index = 0; index < 2; index++) {
		code = git_branch_lookup(&branch, repository->git, names[index], GIT_BRANCH_LOCAL);
		if (code == 0)
			code = git_branch_delete(branch);
		git_reference_free(branch);
		branch = NULL;
		if (code < 0 && code != GIT_ENOTFOUND) {
			result = variant_repository__git_failure(code, cause, "cannot delete %s",
								 names[index]);
			goto out;
		}
	}
out:
	free(names[0]);
	free(names[1]);
	git_worktree_free(worktree);
	variant_repository__release(repository);
	return result;
}

/* Appends text with each line break replaced by a space, for one-line fields. */
static void
variant_repository__append_one_line(struct kagent_buffer *message, const char *text)
{
	for (; *text != '\0'; text++)
		kagent_buffer_append(message, *text == '\n' || *text == '\r' ? " " : text, 1);
}

/*
 * The commit message: subject, body and a final paragraph of trailers. A body line starting
 * with "---" is indented by a space, since trailer parsers (git's and libgit2's) take it
 * as the start of a patch and would then miss the trailers after it.
 */
static int
variant_repository__build_message(const char *subject, const char *body,
				  const struct kagent_trailer *trailers, size_t trailer_count,
				  char **message_out, char **cause)
{
	struct kagent_buffer message = {0};
	size_t i, body_length;

	if (subject == NULL) {
		*cause = kagent_strdup("a commit needs a subject");
		return -EINVAL;
	}
	for (i = 0; i < trailer_count; i++) {
		const char *key = trailers[i].key;

		if (key == NULL || key[0] == '\0' ||
		    strspn(key,
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") !=
			strlen(key) ||
		    trailers[i].value == NULL) {
			*cause = kagent_asprintf("invalid trailer key \"%s\": use letters, digits "
						 "and '-', with a value",
						 key != NULL ? key : "");
			return -EINVAL;
		}
	}
	variant_repository__append_one_line(&message, subject);
	body_length = body != NULL ? strlen(body) : 0;
	while (body_length > 0 && (body[body_length - 1] == '\n' || body[body_length - 1] == '\r'))
		body_length--;
	if (body_length > 0) {
		const char *line = body, *end = body + body_length;

		kagent_buffer_append_string(&message, "\n\n");
		while (line < end) {
			const char *newline = memchr(line, '\n', (size_t)(end - line));
			const char *next = newline != NULL ? newline + 1 : end;

			if ((size_t)(end - line) >= 3 && memcmp(line, "---", 3) == 0)
				kagent_buffer_append_string(&message, " ");
			kagent_buffer_append(&message, line, (size_t)(next - line));
			line = next;
		}
	}
	kagent_buffer_append_string(&message, trailer_count > 0 ? "\n\n" : "\n");
	for (i = 0; i < trailer_count; i++) {
		kagent_buffer_append_string(&message, trailers[i].key);
		kagent_buffer_append_string(&message, ": ");
		variant_repository__append_one_line(&message, trailers[i].value);
		kagent_buffer_append_string(&message, "\n");
	}
	*message_out = kagent_buffer_take(&message);
	return 0;
}

int
kagent_variant_repository_commit(struct kagent_variant_repository *repository, const char *run_id,
				 const char *file_name, const char *source, const char *subject,
				 const char *body, const struct kagent_trailer *trailers,
				 size_t trailer_count, long long seconds, char **commit_id_out,
				 char **cause)
{
	git_repository *worktree_git = NULL;
	git_reference *head = NULL;
	git_index *index = NULL;
	git_tree *tree = NULL;
	git_commit *parent = NULL;
	git_signature *signature = NULL;
	char *reference_name = NULL, *worktree_path = NULL, *file_path = NULL, *message = NULL;
	git_oid tree_oid, parent_oid, commit_oid;
	int result, code;

	*commit_id_out = NULL;
	if ((result = variant_repository__acquire(repository, cause)) < 0)
		return result;
	if ((result = variant_repository__validate_run_id(run_id, cause)) < 0 ||
	    (result = variant_repository__validate_name("file name", file_name, cause)) < 0 ||
	    (result = variant_repository__build_message(subject, body, trailers, trailer_count,
							&message, cause)) < 0)
		goto out;
	reference_name = kagent_asprintf("refs/heads/runs/%s", run_id);
	worktree_path = kagent_asprintf("%s/%s", repository->directory, run_id);
	if ((result = variant_repository__check_not_checked_out(repository->git, reference_name,
								run_id, cause)) < 0)
		goto out;
	if ((code = git_repository_open(&worktree_git, worktree_path)) < 0) {
		result = variant_repository__git_failure(
		    code, cause,
		    "cannot open the worktree of run %s (resume the run to recreate it)", run_id);
		goto out;
	}
	/* Committing to the worktree's HEAD must mean committing to the run's branch. */
	if ((code = git_reference_lookup(&head, worktree_git, "HEAD")) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot read HEAD of %s",
							 worktree_path);
		goto out;
	}
	if (git_reference_type(head) != GIT_REFERENCE_SYMBOLIC ||
	    strcmp(git_reference_symbolic_target(head), reference_name) != 0) {
		result = -EBUSY;
		*cause = kagent_asprintf("the worktree %s no longer has %s checked out: check it "
					 "out again there before kagent commits to it",
					 worktree_path, reference_name);
		goto out;
	}
	file_path = kagent_asprintf("%s/%s", worktree_path, file_name);
	if ((result = kagent_fileio_write_atomic(file_path, source, strlen(source), cause)) < 0)
		goto out;
	if ((code = git_repository_index(&index, worktree_git)) < 0 ||
	    (code = git_index_add_bypath(index, file_name)) < 0 ||
	    (code = git_index_write(index)) < 0 ||
	    (code = git_index_write_tree(&tree_oid, index)) < 0 ||
	    (code = git_tree_lookup(&tree, worktree_git, &tree_oid)) < 0 ||
	    (code = git_reference_name_to_id(&parent_oid, worktree_git, "HEAD")) < 0 ||
	    (code = git_commit_lookup(&parent, worktree_git, &parent_oid)) < 0 ||
	    (code = git_signature_new(&signature, VARIANT_REPOSITORY_AUTHOR_NAME,
				      VARIANT_REPOSITORY_AUTHOR_EMAIL, (git_time_t)seconds, 0)) <
		0 ||
	    (code = git_commit_create(&commit_oid, worktree_git, "HEAD", signature, signature, NULL,
				      message, tree, 1, (const git_commit **)&parent)) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot commit %s on %s",
							 file_name, reference_name);
		goto out;
	}
	*commit_id_out = variant_repository__format_oid(&commit_oid);
out:
	git_signature_free(signature);
	git_commit_free(parent);
	git_tree_free(tree);
	git_index_free(index);
	git_reference_free(head);
	git_repository_free(worktree_git);
	free(message);
	free(file_path);
	free(worktree_path);
	free(reference_name);
	variant_repository__release(repository);
	return result;
}

int
kagent_variant_repository_move_best(struct kagent_variant_repository *repository,
				    const char *run_id, const char *commit_id, char **cause)
{
	git_reference *best = NULL;
	char *run_reference = NULL, *best_reference = NULL, *log_message = NULL;
	git_oid oid, tip;
	int result, code;

	if ((result = variant_repository__acquire(repository, cause)) < 0)
		return result;
	if ((result = variant_repository__validate_run_id(run_id, cause)) < 0 ||
	    (result = variant_repository__parse_commit_id(commit_id, &oid, cause)) < 0)
		goto out;
	run_reference = kagent_asprintf("refs/heads/runs/%s", run_id);
	best_reference = kagent_asprintf("refs/heads/best/%s", run_id);
	if ((code = git_reference_name_to_id(&tip, repository->git, run_reference)) < 0) {
		result =
		    variant_repository__git_failure(code, cause, "cannot read %s", run_reference);
		goto out;
	}
	if (!git_oid_equal(&tip, &oid)) {
		code = git_graph_descendant_of(repository->git, &tip, &oid);
		if (code < 0) {
			result = variant_repository__git_failure(code, cause, "cannot walk %s",
								 run_reference);
			goto out;
		}
		if (code == 0) {
			result = -EINVAL;
			*cause = kagent_asprintf("commit %s is not on %s: best/%s can only point "
						 "at a variant of its own run",
						 commit_id, run_reference, run_id);
			goto out;
		}
	}
	if ((result = variant_repository__check_not_checked_out(repository->git, best_reference,
								NULL, cause)) < 0)
		goto out;
	log_message = kagent_asprintf("kagent: best variant of run %s", run_id);
	if ((code = git_reference_create(&best, repository->git, best_reference, &oid, 1,
					 log_message)) < 0)
		result = variant_repository__git_failure(code, cause, "cannot move %s to %s",
							 best_reference, commit_id);
out:
	git_reference_free(best);
	free(log_message);
	free(best_reference);
	free(run_reference);
	variant_repository__release(repository);
	return result;
}

int
kagent_variant_repository_best(struct kagent_variant_repository *repository, const char *run_id,
			       char **commit_id_out, char **cause)
{
	char *best_reference = NULL;
	git_oid oid;
	int result, code;

	*commit_id_out = NULL;
	if ((result = variant_repository__acquire(repository, cause)) < 0)
		return result;
	if ((result = variant_repository__validate_run_id(run_id, cause)) < 0)
		goto out;
	best_reference = kagent_asprintf("refs/heads/best/%s", run_id);
	code = git_reference_name_to_id(&oid, repository->git, best_reference);
	if (code == 0)
		*commit_id_out = variant_repository__format_oid(&oid);
	else if (code != GIT_ENOTFOUND)
		result =
		    variant_repository__git_failure(code, cause, "cannot read %s", best_reference);
out:
	free(best_reference);
	variant_repository__release(repository);
	return result;
}

/* Fills one list entry from a commit: id, subject and parsed trailers. */
static int
variant_repository__describe_commit(git_commit *commit, struct kagent_variant_commit *entry,
				    char **cause)
{
	git_message_trailer_array parsed = {0};
	const char *summary = git_commit_summary(commit);
	size_t i;
	int code;

	entry->commit_id = variant_repository__format_oid(git_commit_id(commit));
	entry->subject = kagent_strdup(summary != NULL ? summary : "");
	if ((code = git_message_trailers(&parsed, git_commit_message(commit))) < 0)
		return variant_repository__git_failure(
		    code, cause, "cannot parse the trailers of commit %s", entry->commit_id);
	entry->trailers =
	    kagent_calloc(parsed.count > 0 ? parsed.count : 1, sizeof(*entry->trailers));
	entry->trailer_count = parsed.count;
	for (i = 0; i < parsed.count; i++) {
		entry->trailers[i].key = kagent_strdup(parsed.trailers[i].key);
		entry->trailers[i].value = kagent_strdup(parsed.trailers[i].value);
	}
	git_message_trailer_array_free(&parsed);
	return 0;
}

int
kagent_variant_repository_list_run(struct kagent_variant_repository *repository, const char *run_id,
				   struct kagent_variant_commit **commits_out, size_t *count_out,
				   char **cause)
{
	struct kagent_variant_commit *commits = NULL;
	size_t count = 0, capacity = 0;
	git_revwalk *walk = NULL;
	char *run_reference = NULL;
	git_oid tip, problem_oid, oid;
	int result, code;

	*commits_out = NULL;
	*count_out = 0;
	if ((result = variant_repository__acquire(repository, cause)) < 0)
		return result;
	if ((result = variant_repository__validate_run_id(run_id, cause)) < 0)
		goto out;
	run_reference = kagent_asprintf("refs/heads/runs/%s", run_id);
	if ((code = git_reference_name_to_id(&tip, repository->git, run_reference)) < 0 ||
	    (code = git_reference_name_to_id(&problem_oid, repository->git,
					     VARIANT_REPOSITORY_PROBLEM_BRANCH)) < 0 ||
	    (code = git_revwalk_new(&walk, repository->git)) < 0 ||
	    (code = git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE)) < 0 ||
	    (code = git_revwalk_push(walk, &tip)) < 0 ||
	    (code = git_revwalk_hide(walk, &problem_oid)) < 0) {
		result =
		    variant_repository__git_failure(code, cause, "cannot walk %s", run_reference);
		goto out;
	}
	while ((code = git_revwalk_next(&oid, walk)) == 0) {
		git_commit *commit = NULL;

		if ((code = git_commit_lookup(&commit, repository->git, &oid)) < 0) {
			result = variant_repository__git_failure(code, cause, "cannot read %s",
								 run_reference);
			goto out;
		}
		if (count == capacity) {
			capacity = capacity == 0 ? 16 : capacity * 2;
			commits = kagent_realloc(commits, capacity * sizeof(*commits));
		}
		memset(&commits[count], 0, sizeof(*commits));
		result = variant_repository__describe_commit(commit, &commits[count], cause);
		count++;
		git_commit_free(commit);
		if (result < 0)
			goto out;
	}
	if (code != GIT_ITEROVER)
		result =
		    variant_repository__git_failure(code, cause, "cannot walk %s", run_reference);
out:
	if (result == 0) {
		*commits_out = commits;
		*count_out = count;
	} else {
		kagent_variant_commits_free(commits, count);
	}
	git_revwalk_free(walk);
	free(run_reference);
	variant_repository__release(repository);
	return result;
}

void
kagent_variant_commits_free(struct kagent_variant_commit *commits, size_t count)
{
	size_t i, j;

	for (i = 0; commits != NULL && i < count; i++) {
		for (j = 0; j < commits[i].trailer_count; j++) {
			free(commits[i].trailers[j].key);
			free(commits[i].trailers[j].value);
		}
		free(commits[i].trailers);
		free(commits[i].subject);
		free(commits[i].commit_id);
	}
	free(commits);
}

int
kagent_variant_repository_read(struct kagent_variant_repository *repository, const char *commit_id,
			       const char *file_name, char **source_out, char **cause)
{
	git_oid oid;
	size_t size;
	int result;

	*source_out = NULL;
	if ((result = variant_repository__acquire(repository, cause)) < 0)
		return result;
	result = variant_repository__parse_commit_id(commit_id, &oid, cause);
	if (result == 0)
		result = variant_repository__read_file(repository->git, &oid, file_name, source_out,
						       &size, cause);
	variant_repository__release(repository);
	return result;
}

int
kagent_variant_diff_texts(const char *old_text, const char *old_name, const char *new_text,
			  const char *new_name, int context_lines, char **diff_out, char **cause)
{
	git_diff_options options;
	git_patch *patch = NULL;
	git_buf text = {0};
	size_t old_length = strlen(old_text), new_length = strlen(new_text);
	int result, code;

	*diff_out = NULL;
	if ((result = variant_repository__initialize(cause)) < 0)
		goto out;
	if (old_length > VARIANT_REPOSITORY_DIFF_INPUT_CAP ||
	    new_length > VARIANT_REPOSITORY_DIFF_INPUT_CAP) {
		result = -EFBIG;
		*cause = kagent_asprintf("cannot diff texts larger than %zu bytes",
					 VARIANT_REPOSITORY_DIFF_INPUT_CAP);
		goto out;
	}
	if (context_lines < 0) {
		result = -EINVAL;
		*cause = kagent_asprintf("invalid number of context lines %d", context_lines);
		goto out;
	}
	git_diff_options_init(&options, GIT_DIFF_OPTIONS_VERSION);
	options.context_lines = (uint32_t)context_lines;
	/* Sources with odd control characters are still texts to compare line by line. */
	options.flags |= GIT_DIFF_FORCE_TEXT;
	if ((code = git_patch_from_buffers(&patch, old_text, old_length, old_name, new_text,
					   new_length, new_name, &options)) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot diff %s and %s",
							 old_name, new_name);
		goto out;
	}
	if (git_patch_num_hunks(patch) == 0) {
		*diff_out = kagent_strdup("");
		goto out;
	}
	if ((code = git_patch_to_buf(&text, patch)) < 0) {
		result = variant_repository__git_failure(code, cause, "cannot print the diff");
		goto out;
	}
	*diff_out = kagent_strndup(text.ptr, text.size);
out:
	git_buf_dispose(&text);
	git_patch_free(patch);
	return result;
}
