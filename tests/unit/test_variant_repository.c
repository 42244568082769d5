/* Unit tests for the per-problem git history (agent/records/variant_repository.c). */
#include "kagent/records/variant_repository.h"

#include "kagent/base/paths.h"

#include "test.h"

#include <errno.h>
#include <git2.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROBLEM_SOURCE "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"

/* A fresh folder, libgit2 initialized for the test's own checks, and the repository opened. */
struct fixture {
	char *directory;
	struct kagent_variant_repository *repository;
};

static void
fixture_open(struct fixture *fixture)
{
	char *error = NULL;

	CHECK(git_libgit2_init() > 0);
	fixture->directory = kagent_test_make_directory();
	CHECK_INT(kagent_variant_repository_open(fixture->directory, "matmul", PROBLEM_SOURCE,
						 &fixture->repository, &error),
		  0);
	CHECK(error == NULL);
}

static void
fixture_close(struct fixture *fixture)
{
	char *error = NULL;

	kagent_variant_repository_close(fixture->repository);
	CHECK_INT(kagent_paths_remove_tree(fixture->directory, &error), 0);
	free(fixture->directory);
	git_libgit2_shutdown();
}

static char *
read_whole_file(const char *path)
{
	FILE *file = fopen(path, "r");
	char *text;
	long size;

	CHECK(file != NULL);
	CHECK(fseek(file, 0, SEEK_END) == 0);
	size = ftell(file);
	CHECK(size >= 0);
	rewind(file);
	text = malloc((size_t)size + 1);
	CHECK(text != NULL);
	CHECK(fread(text, 1, (size_t)size, file) == (size_t)size);
	text[size] = '\0';
	fclose(file);
	return text;
}

static char *
join_path(const char *directory, const char *name)
{
	size_t length = strlen(directory) + strlen(name) + 2;
	char *path = malloc(length);

	CHECK(path != NULL);
	snprintf(path, length, "%s/%s", directory, name);
	return path;
}

static char *
commit_variant(struct fixture *fixture, const char *run_id, const char *source, const char *subject,
	       const char *status)
{
	struct kagent_trailer trailers[] = {
	    {"Kagent-Status", status},
	    {"Kagent-Speedup", "1.5x\nover baseline"},
	};
	char *commit_id = NULL, *error = NULL;

	CHECK_INT(kagent_variant_repository_commit(fixture->repository, run_id, "candidate.py",
						   source, subject,
						   "Tiles of 64.\n--- not a patch\nMore.\n",
						   trailers, 2, 1700000000, &commit_id, &error),
		  0);
	CHECK(commit_id != NULL && strlen(commit_id) == 40);
	return commit_id;
}

/* Counts the changed or untracked files libgit2 sees in the worktree at path. */
static size_t
worktree_change_count(const char *path)
{
	git_status_options options;
	git_repository *git = NULL;
	git_status_list *list = NULL;
	size_t count;

	CHECK_INT(git_status_options_init(&options, GIT_STATUS_OPTIONS_VERSION), 0);
	options.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED;
	CHECK_INT(git_repository_open(&git, path), 0);
	CHECK_INT(git_status_list_new(&list, git, &options), 0);
	count = git_status_list_entrycount(list);
	git_status_list_free(list);
	git_repository_free(git);
	return count;
}

static void
test_create_and_reopen(void)
{
	struct fixture fixture;
	struct kagent_variant_repository *again = NULL;
	char *error = NULL, *expected, *repository_path;
	git_repository *git = NULL;

	fixture_open(&fixture);
	expected = join_path(fixture.directory, "matmul");
	CHECK_STRING(kagent_variant_repository_directory(fixture.repository), expected);
	repository_path = join_path(expected, "repository.git");
	CHECK_INT(git_repository_open_bare(&git, repository_path), 0);
	CHECK(git_repository_is_bare(git));
	git_repository_free(git);

	/* The same problem opens again; another one under the same name does not. */
	CHECK_INT(kagent_variant_repository_open(fixture.directory, "matmul", PROBLEM_SOURCE,
						 &again, &error),
		  0);
	kagent_variant_repository_close(again);
	again = NULL;
	CHECK_INT(kagent_variant_repository_open(fixture.directory, "matmul",
						 PROBLEM_SOURCE "# changed\n", &again, &error),
		  -EEXIST);
	CHECK(again == NULL);
	CHECK_CONTAINS(error, "another name");
	free(error);
	error = NULL;
	CHECK_INT(kagent_variant_repository_open(fixture.directory, "../escape", PROBLEM_SOURCE,
						 &again, &error),
		  -EINVAL);
	free(error);
	free(repository_path);
	free(expected);
	fixture_close(&fixture);
}

static void
test_start_run(void)
{
	struct fixture fixture;
	char *path = NULL, *again = NULL, *error = NULL, *problem_path, *problem, *expected;

	fixture_open(&fixture);
	CHECK_INT(
	    kagent_variant_repository_start_run(fixture.repository, "run-1", 0, &path, &error), 0);
	expected = join_path(kagent_variant_repository_directory(fixture.repository), "run-1");
	CHECK_STRING(path, expected);
	problem_path = join_path(path, "problem.py");
	problem = read_whole_file(problem_path);
	CHECK_STRING(problem, PROBLEM_SOURCE);
	CHECK_INT(worktree_change_count(path), 0);

	CHECK_INT(
	    kagent_variant_repository_start_run(fixture.repository, "run-1", 0, &again, &error),
	    -EEXIST);
	CHECK_CONTAINS(error, "resume");
	free(error);
	error = NULL;
	CHECK_INT(
	    kagent_variant_repository_start_run(fixture.repository, "run-1", 1, &again, &error), 0);
	CHECK_STRING(again, path);
	free(again);
	CHECK_INT(
	    kagent_variant_repository_start_run(fixture.repository, "missing", 1, &again, &error),
	    -ENOENT);
	CHECK(again == NULL);
	CHECK_CONTAINS(error, "no run missing");
	free(error);
	free(problem);
	free(problem_path);
	free(expected);
	free(path);
	fixture_close(&fixture);
}

static void
test_commits_history_and_best(void)
{
	static const char *const sources[] = {"v1\n", "v2\n", "v3\n"};
	struct fixture fixture;
	struct kagent_variant_commit *commits = NULL;
	char *ids[3], *path = NULL, *other_path = NULL, *other_id, *error = NULL, *best = NULL;
	char *text = NULL, *candidate_path, *command;
	size_t count = 0, i;

	fixture_open(&fixture);
	CHECK_INT(kagent_variant_repository_start_run(fixture.repository, "r1", 0, &path, &error),
		  0);
	CHECK_INT(
	    kagent_variant_repository_list_run(fixture.repository, "r1", &commits, &count, &error),
	    0);
	CHECK_INT(count, 0);
	kagent_variant_commits_free(commits, count);
	for (i = 0; i < 3; i++) {
		char subject[32];

		snprintf(subject, sizeof(subject), "Variant %zu", i + 1);
		ids[i] = commit_variant(&fixture, "r1", sources[i], subject,
					i == 1 ? "faster" : "correct");
	}

	CHECK_INT(
	    kagent_variant_repository_list_run(fixture.repository, "r1", &commits, &count, &error),
	    0);
	CHECK_INT(count, 3);
	for (i = 0; i < 3; i++) {
		char subject[32];

		snprintf(subject, sizeof(subject), "Variant %zu", i + 1);
		CHECK_STRING(commits[i].commit_id, ids[i]);
		CHECK_STRING(commits[i].subject, subject);
		/* The body's "---" line did not hide the trailers. */
		CHECK_INT(commits[i].trailer_count, 2);
		CHECK_STRING(commits[i].trailers[0].key, "Kagent-Status");
		CHECK_STRING(commits[i].trailers[0].value, i == 1 ? "faster" : "correct");
		CHECK_STRING(commits[i].trailers[1].key, "Kagent-Speedup");
		CHECK_STRING(commits[i].trailers[1].value, "1.5x over baseline");
	}
	kagent_variant_commits_free(commits, count);

	for (i = 0; i < 3; i++) {
		CHECK_INT(kagent_variant_repository_read(fixture.repository, ids[i], "candidate.py",
							 &text, &error),
			  0);
		CHECK_STRING(text, sources[i]);
		free(text);
		CHECK_INT(kagent_variant_repository_read(fixture.repository, ids[i], "problem.py",
							 &text, &error),
			  0);
		CHECK_STRING(text, PROBLEM_SOURCE);
		free(text);
	}
	CHECK_INT(
	    kagent_variant_repository_read(fixture.repository, ids[0], "absent.py", &text, &error),
	    -ENOENT);
	CHECK(text == NULL);
	CHECK_CONTAINS(error, "absent.py");
	free(error);
	error = NULL;
	CHECK_INT(kagent_variant_repository_read(fixture.repository, "123", "candidate.py", &text,
						 &error),
		  -EINVAL);
	free(error);
	error = NULL;

	/* The worktree holds the last variant and has nothing left to commit. */
	candidate_path = join_path(path, "candidate.py");
	text = read_whole_file(candidate_path);
	CHECK_STRING(text, "v3\n");
	free(text);
	CHECK_INT(worktree_change_count(path), 0);
	command = malloc(strlen(path) + 96);
	CHECK(command != NULL);
	sprintf(command, "git -C '%s' status --porcelain 2>&1", path);
	if (system("git --version >/dev/null 2>&1") == 0) {
		FILE *output = popen(command, "r");
		char line[256];

		CHECK(output != NULL);
		CHECK(fgets(line, sizeof(line), output) == NULL);
		CHECK_INT(pclose(output), 0);
	}
	free(command);

	CHECK_INT(kagent_variant_repository_best(fixture.repository, "r1", &best, &error), 0);
	CHECK(best == NULL);
	CHECK_INT(kagent_variant_repository_move_best(fixture.repository, "r1", ids[1], &error), 0);
	CHECK_INT(kagent_variant_repository_best(fixture.repository, "r1", &best, &error), 0);
	CHECK_STRING(best, ids[1]);
	free(best);

	/* A commit of another run is no candidate for this run's best. */
	CHECK_INT(
	    kagent_variant_repository_start_run(fixture.repository, "r2", 0, &other_path, &error),
	    0);
	other_id = commit_variant(&fixture, "r2", "other\n", "Other", "correct");
	CHECK_INT(kagent_variant_repository_move_best(fixture.repository, "r1", other_id, &error),
		  -EINVAL);
	CHECK_CONTAINS(error, "not on refs/heads/runs/r1");
	free(error);
	error = NULL;
	CHECK_INT(kagent_variant_repository_best(fixture.repository, "r1", &best, &error), 0);
	CHECK_STRING(best, ids[1]);
	free(best);
	CHECK_INT(
	    kagent_variant_repository_move_best(fixture.repository, "r1", "not-a-commit", &error),
	    -EINVAL);
	free(error);

	free(other_id);
	free(other_path);
	free(candidate_path);
	for (i = 0; i < 3; i++)
		free(ids[i]);
	free(path);
	fixture_close(&fixture);
}

static void
test_resume_recreates_deleted_worktree(void)
{
	struct fixture fixture;
	struct kagent_variant_commit *commits = NULL;
	char *path = NULL, *again = NULL, *error = NULL, *first, *second, *candidate_path, *text;
	size_t count = 0;

	fixture_open(&fixture);
	CHECK_INT(kagent_variant_repository_start_run(fixture.repository, "r1", 0, &path, &error),
		  0);
	first = commit_variant(&fixture, "r1", "first\n", "First", "correct");
	CHECK_INT(kagent_paths_remove_tree(path, &error), 0);
	CHECK(access(path, F_OK) != 0);

	CHECK_INT(kagent_variant_repository_start_run(fixture.repository, "r1", 1, &again, &error),
		  0);
	CHECK_STRING(again, path);
	candidate_path = join_path(path, "candidate.py");
	text = read_whole_file(candidate_path);
	CHECK_STRING(text, "first\n");
	free(text);
	CHECK_INT(worktree_change_count(path), 0);

	second = commit_variant(&fixture, "r1", "second\n", "Second", "correct");
	CHECK_INT(
	    kagent_variant_repository_list_run(fixture.repository, "r1", &commits, &count, &error),
	    0);
	CHECK_INT(count, 2);
	CHECK_STRING(commits[0].commit_id, first);
	CHECK_STRING(commits[1].commit_id, second);
	kagent_variant_commits_free(commits, count);

	free(second);
	free(candidate_path);
	free(first);
	free(again);
	free(path);
	fixture_close(&fixture);
}

static void
test_refuses_branches_checked_out_elsewhere(void)
{
	git_worktree_add_options options;
	struct fixture fixture;
	struct kagent_variant_commit *commits = NULL;
	git_repository *git = NULL, *intruder_git = NULL;
	git_worktree *intruder = NULL;
	git_reference *branch = NULL, *head = NULL;
	git_commit *commit = NULL;
	git_oid oid;
	char *path = NULL, *error = NULL, *first, *commit_id = NULL, *repository_path;
	char *intruder_path;
	size_t count = 0;

	fixture_open(&fixture);
	CHECK_INT(kagent_variant_repository_start_run(fixture.repository, "r1", 0, &path, &error),
		  0);
	first = commit_variant(&fixture, "r1", "first\n", "First", "correct");
	CHECK_INT(kagent_variant_repository_move_best(fixture.repository, "r1", first, &error), 0);

	/* A person's worktree, on a branch of their own, then switched to the run's branch. */
	repository_path =
	    join_path(kagent_variant_repository_directory(fixture.repository), "repository.git");
	intruder_path = join_path(fixture.directory, "mine");
	CHECK_INT(git_repository_open_bare(&git, repository_path), 0);
	CHECK_INT(git_oid_fromstr(&oid, first), 0);
	CHECK_INT(git_commit_lookup(&commit, git, &oid), 0);
	CHECK_INT(git_branch_create(&branch, git, "mine", commit, 0), 0);
	CHECK_INT(git_worktree_add_options_init(&options, GIT_WORKTREE_ADD_OPTIONS_VERSION), 0);
	options.ref = branch;
	CHECK_INT(git_worktree_add(&intruder, git, "mine", intruder_path, &options), 0);
	CHECK_INT(git_repository_open(&intruder_git, intruder_path), 0);
	CHECK_INT(git_reference_symbolic_create(&head, intruder_git, "HEAD", "refs/heads/runs/r1",
						1, NULL),
		  0);
	git_reference_free(head);

	CHECK_INT(kagent_variant_repository_commit(fixture.repository, "r1", "candidate.py",
						   "second\n", "Second", NULL, NULL, 0, 1700000000,
						   &commit_id, &error),
		  -EBUSY);
	CHECK(commit_id == NULL);
	CHECK_CONTAINS(error, "\"mine\"");
	free(error);
	error = NULL;
	CHECK_INT(
	    kagent_variant_repository_list_run(fixture.repository, "r1", &commits, &count, &error),
	    0);
	CHECK_INT(count, 1);
	kagent_variant_commits_free(commits, count);

	/* Likewise best/r1 checked out there. */
	CHECK_INT(git_reference_symbolic_create(&head, intruder_git, "HEAD", "refs/heads/best/r1",
						1, NULL),
		  0);
	git_reference_free(head);
	CHECK_INT(kagent_variant_repository_move_best(fixture.repository, "r1", first, &error),
		  -EBUSY);
	CHECK_CONTAINS(error, "refs/heads/best/r1");
	free(error);
	error = NULL;

	/* The run's own worktree switched to another branch is no place to commit either. */
	CHECK_INT(
	    git_reference_symbolic_create(&head, intruder_git, "HEAD", "refs/heads/mine", 1, NULL),
	    0);
	git_reference_free(head);
	git_repository_free(intruder_git);
	CHECK_INT(git_repository_open(&intruder_git, path), 0);
	CHECK_INT(git_reference_symbolic_create(&head, intruder_git, "HEAD", "refs/heads/problem",
						1, NULL),
		  0);
	git_reference_free(head);
	CHECK_INT(kagent_variant_repository_commit(fixture.repository, "r1", "candidate.py",
						   "second\n", "Second", NULL, NULL, 0, 1700000000,
						   &commit_id, &error),
		  -EBUSY);
	CHECK_CONTAINS(error, "no longer has refs/heads/runs/r1");
	free(error);

	git_repository_free(intruder_git);
	git_worktree_free(intruder);
	git_reference_free(branch);
	git_commit_free(commit);
	git_repository_free(git);
	free(intruder_path);
	free(repository_path);
	free(first);
	free(path);
	fixture_close(&fixture);
}

static void
test_commit_without_body_or_trailers(void)
{
	struct fixture fixture;
	struct kagent_variant_commit *commits = NULL;
	struct kagent_trailer bad[] = {{"Bad Key", "x"}};
	char *path = NULL, *error = NULL, *commit_id = NULL;
	size_t count = 0;

	fixture_open(&fixture);
	CHECK_INT(kagent_variant_repository_start_run(fixture.repository, "r1", 0, &path, &error),
		  0);
	CHECK_INT(kagent_variant_repository_commit(fixture.repository, "r1", "candidate.py", "x\n",
						   "Plain\nsubject", NULL, NULL, 0, 1700000000,
						   &commit_id, &error),
		  0);
	free(commit_id);
	CHECK_INT(kagent_variant_repository_commit(fixture.repository, "r1", "candidate.py", "y\n",
						   "Bad", NULL, bad, 1, 1700000000, &commit_id,
						   &error),
		  -EINVAL);
	CHECK_CONTAINS(error, "Bad Key");
	free(error);
	error = NULL;
	CHECK_INT(kagent_variant_repository_commit(fixture.repository, "r1", "../escape.py", "y\n",
						   "Bad", NULL, NULL, 0, 1700000000, &commit_id,
						   &error),
		  -EINVAL);
	free(error);
	CHECK_INT(
	    kagent_variant_repository_list_run(fixture.repository, "r1", &commits, &count, &error),
	    0);
	CHECK_INT(count, 1);
	CHECK_STRING(commits[0].subject, "Plain subject");
	CHECK_INT(commits[0].trailer_count, 0);
	kagent_variant_commits_free(commits, count);
	free(path);
	fixture_close(&fixture);
}

static void
test_diff_texts(void)
{
	char *diff = NULL, *error = NULL, *big;

	CHECK_INT(kagent_variant_diff_texts("a\nb\nc\nd\ne\n", "old.py", "a\nb\nC\nd\ne\n",
					    "new.py", 1, &diff, &error),
		  0);
	CHECK_CONTAINS(diff, "--- a/old.py\n+++ b/new.py\n");
	CHECK_CONTAINS(diff, "@@ -2,3 +2,3 @@");
	CHECK_CONTAINS(diff, "\n b\n-c\n+C\n d\n");
	CHECK(strstr(diff, "\n a\n") == NULL && strstr(diff, "\n e\n") == NULL);
	free(diff);
	CHECK_INT(
	    kagent_variant_diff_texts("same\n", "old.py", "same\n", "new.py", 3, &diff, &error), 0);
	CHECK_STRING(diff, "");
	free(diff);

	big = malloc(((size_t)8 << 20) + 2);
	CHECK(big != NULL);
	memset(big, 'x', ((size_t)8 << 20) + 1);
	big[((size_t)8 << 20) + 1] = '\0';
	CHECK_INT(kagent_variant_diff_texts(big, "old.py", "x\n", "new.py", 3, &diff, &error),
		  -EFBIG);
	CHECK(diff == NULL);
	free(error);
	free(big);
}

static void
test_bad_run_ids(void)
{
	static const char *const bad[] = {
	    "",
	    ".hidden",
	    "a/b",
	    "a..b",
	    "run.lock",
	    "trailing.",
	    "a b",
	    "-x\n",
	    "0123456789012345678901234567890123456789012345678901234567890123456789",
	};
	struct fixture fixture;
	char *path = NULL, *error = NULL, *best = NULL;
	size_t i;

	fixture_open(&fixture);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(kagent_variant_repository_start_run(fixture.repository, bad[i], 0, &path,
							      &error),
			  -EINVAL);
		CHECK(path == NULL);
		CHECK_CONTAINS(error, "invalid run id");
		free(error);
		error = NULL;
		CHECK_INT(kagent_variant_repository_best(fixture.repository, bad[i], &best, &error),
			  -EINVAL);
		free(error);
		error = NULL;
	}
	CHECK_INT(
	    kagent_variant_repository_start_run(fixture.repository, "ok_Run-2.b", 0, &path, &error),
	    0);
	free(path);
	fixture_close(&fixture);
}

/* A run forgotten (its worktree and branches gone) can be started again; so can one that never
 * was. The problem commit is the same in every repository of the same problem. */
static void
test_forget_run_and_problem_commit(void)
{
	struct fixture fixture, other;
	git_repository *git = NULL, *other_git = NULL;
	git_oid problem, other_problem, best;
	char *path = NULL, *error = NULL, *commit_id, *repository_path, *other_path;
	struct stat info;

	fixture_open(&fixture);
	CHECK_INT(kagent_variant_repository_forget_run(fixture.repository, "r1", &error), 0);
	CHECK_INT(kagent_variant_repository_start_run(fixture.repository, "r1", 0, &path, &error),
		  0);
	commit_id = commit_variant(&fixture, "r1", "x\n", "First", "correct");
	CHECK_INT(kagent_variant_repository_move_best(fixture.repository, "r1", commit_id, &error),
		  0);
	CHECK_INT(kagent_variant_repository_forget_run(fixture.repository, "r1", &error), 0);
	CHECK(stat(path, &info) != 0);
	repository_path =
	    join_path(kagent_variant_repository_directory(fixture.repository), "repository.git");
	CHECK_INT(git_repository_open_bare(&git, repository_path), 0);
	CHECK_INT(git_reference_name_to_id(&best, git, "refs/heads/best/r1"), GIT_ENOTFOUND);
	CHECK_INT(git_reference_name_to_id(&best, git, "refs/heads/runs/r1"), GIT_ENOTFOUND);
	free(path);
	CHECK_INT(kagent_variant_repository_start_run(fixture.repository, "r1", 0, &path, &error),
		  0);

	fixture_open(&other);
	other_path =
	    join_path(kagent_variant_repository_directory(other.repository), "repository.git");
	CHECK_INT(git_repository_open_bare(&other_git, other_path), 0);
	CHECK_INT(git_reference_name_to_id(&problem, git, "refs/heads/problem"), 0);
	CHECK_INT(git_reference_name_to_id(&other_problem, other_git, "refs/heads/problem"), 0);
	CHECK(git_oid_equal(&problem, &other_problem));
	git_repository_free(other_git);
	git_repository_free(git);
	free(other_path);
	free(repository_path);
	free(commit_id);
	free(path);
	fixture_close(&other);
	fixture_close(&fixture);
}

static const struct kagent_test tests[] = {
    {"create_and_reopen", test_create_and_reopen},
    {"start_run", test_start_run},
    {"commits_history_and_best", test_commits_history_and_best},
    {"resume_recreates_deleted_worktree", test_resume_recreates_deleted_worktree},
    {"refuses_branches_checked_out_elsewhere", test_refuses_branches_checked_out_elsewhere},
    {"commit_without_body_or_trailers", test_commit_without_body_or_trailers},
    {"diff_texts", test_diff_texts},
    {"bad_run_ids", test_bad_run_ids},
    {"forget_run_and_problem_commit", test_forget_run_and_problem_commit},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
