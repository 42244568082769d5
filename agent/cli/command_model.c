/*
 * `kagent model MODEL.py`: a whole model, from its hot spots back to a drop-in faster model
 * (docs/whole-models.md). Four steps, each a mechanism that already exists:
 *
 * 1. the model as a problem: MODEL.py in KernelBench format as it is, or, with --entry and
 *    --inputs, a wrapper (DIR/model_problem.py) whose Model(...) is what the factory builds;
 * 2. the analysis: the worker's check_problem with a "model_analysis" object
 *    (kagent_runner/model.py), which profiles one forward module by module, ranks the hot
 *    spots and writes each chosen one as a KernelBench-format problem checked to reproduce the
 *    model's own activations; this command writes them to DIR/problems/ and prints the table;
 * 3. the runs: a batch of kagentd (`kagent batch`) when the daemon runs (or --batch), else
 *    `kagent optimize` on each sub-problem, one after another (this binary, as a child, so
 *    the session machine is optimize's own);
 * 4. the composition: DIR/optimized_model.py, the model with each hot spot swapped for its
 *    best credited variant, judged against the model by one evaluation (kagent eval: fresh
 *    inputs, tolerances per dtype, eager and torch.compile timed side by side), and
 *    DIR/report.md and report.json with the Amdahl bound of what the hot spots could give.
 */
#include "command_optimize.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/cli/command.h"
#include "kagent/evaluator/evaluation.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The analysis answer (sub-problem sources included) is a few hundred KiB at most. */
#define MODEL_FILE_CAP (16 * 1024 * 1024)
/* Rows of the hot-spot table printed; analysis.json keeps every module. */
#define MODEL_TABLE_ROWS 15
/* The most arguments a child `kagent optimize` or `kagent batch` gets. */
#define MODEL_CHILD_ARGUMENTS 64

enum {
	MODEL_OPTION_ENTRY,
	MODEL_OPTION_INPUTS,
	MODEL_OPTION_TOP,
	MODEL_OPTION_ONLY,
	MODEL_OPTION_OUTPUT,
	MODEL_OPTION_PLAN,
	MODEL_OPTION_BATCH,
	MODEL_OPTION_HERE,
	MODEL_OPTION_COMPOSE,
	MODEL_OPTION_DEVICE,
	MODEL_OPTION_GPU,
	MODEL_OPTION_WORKER,
	MODEL_OPTION_SOCKET,
	MODEL_OPTION_JSON,
	MODEL_OPTION_CONFIG,
	MODEL_OPTION_FIRST_SETTING, /* from here on, each flag goes to kagent optimize or batch */
};

/* clang-format off */
static const struct kagent_command_option command_model__options[] = {
	[MODEL_OPTION_ENTRY] = {"entry", 0, "[FILE.py:]FACTORY", "build the model with "
		"FACTORY(), a function of FILE.py (MODEL.py when no file is named)",
		"MODEL.py's Model(*get_init_inputs())", NULL},
	[MODEL_OPTION_INPUTS] = {"inputs", 0, "[FILE.py:]FUNCTION", "the model's example "
		"inputs: FUNCTION() returns a tensor, or a tuple or list of them",
		"MODEL.py's get_inputs()", NULL},
	[MODEL_OPTION_TOP] = {"top", 0, "N", "extract the N hottest modules, 1 to 32", "3", NULL},
	[MODEL_OPTION_ONLY] = {"only", 0, "PATTERN", "only modules whose path or class matches "
		"PATTERN: globs separated by commas (e.g. 'layers.*.attention', Linear,GELU)", NULL,
		NULL},
	[MODEL_OPTION_OUTPUT] = {"output", 0, "DIR", "where the sub-problems, the runs and the "
		"composed model go", "kagent-model/NAME (NAME: MODEL.py's)", NULL},
	[MODEL_OPTION_PLAN] = {"plan", 0, NULL, "stop once the sub-problems are written: no model "
		"is asked", NULL, NULL},
	[MODEL_OPTION_BATCH] = {"batch", 0, NULL, "queue the sub-problems as a batch of kagentd "
		"instead of running them here; compose later with --compose",
		"when kagentd listens on its socket", NULL},
	[MODEL_OPTION_HERE] = {"here", 0, NULL, "run the sub-problems here, one after another, "
		"even when kagentd runs", "when no kagentd listens", NULL},
	[MODEL_OPTION_COMPOSE] = {"compose", 0, NULL, "only compose DIR's results (after --batch "
		"or an interrupted run): optimized_model.py, its check and the report", NULL, NULL},
	[MODEL_OPTION_DEVICE] = {"device", 0, "cuda|cpu", "where the model runs", "cuda", NULL},
	[MODEL_OPTION_GPU] = {"gpu", 0, "N", "the index of the GPU to use", "0", NULL},
	[MODEL_OPTION_WORKER] = {"worker", 0, "SOCKET", "the socket of a running kagent worker",
		"the default socket if a worker serves it, else a new worker", NULL},
	[MODEL_OPTION_SOCKET] = {"socket", 0, "SOCKET", "kagentd's socket, for --batch and "
		"--compose (as kagent batch and kagent status take it)", "kagent batch's", NULL},
	[MODEL_OPTION_JSON] = {"json", 0, NULL, "print one JSON object (the analysis, or the "
		"report); the progress goes to stderr", NULL, NULL},
	[MODEL_OPTION_CONFIG] = {"config", 0, "FILE", "the config file of the runs",
		"$KAGENT_CONFIG, else ./kagent.yaml", NULL},
	KAGENT_COMMAND_OPTIMIZE_SETTINGS(NULL),
	{0},
};
/* clang-format on */
#define MODEL_OPTION_COUNT (sizeof command_model__options / sizeof command_model__options[0] - 1)

struct command_model {
	const char *values[MODEL_OPTION_COUNT];
	int json;
	char *model_path;   /* MODEL.py, resolved */
	char *output;	    /* DIR, created */
	char *problem_path; /* the model as a problem: MODEL.py or DIR/model_problem.py */
	json_t *analysis;   /* DIR/analysis.json's object */
	FILE *progress;	    /* stdout, or stderr with --json */
};

/* ---- small helpers ---- */

static int
command_model__fail(const struct command_model *model, const char *kind, const char *message)
{
	return kagent_command_fail(&kagent_command_model, model->json, kind, message);
}

/* A Python string literal of text: JSON's escapes are Python's. */
static char *
command_model__python_string(const char *text)
{
	json_t *string = json_string(text);
	char *literal = json_dumps(string, JSON_ENCODE_ANY);

	json_decref(string);
	return literal;
}

static int
command_model__write(const char *path, const char *text, char **cause)
{
	return kagent_fileio_write_atomic(path, text, strlen(text), cause);
}

static int
command_model__write_json(const char *path, const json_t *object, char **cause)
{
	char *text = json_dumps(object, JSON_INDENT(2) | JSON_SORT_KEYS);
	int error = command_model__write(path, text, cause);

	free(text);
	return error;
}

static int
command_model__read_json(const char *path, json_t **out, char **cause)
{
	json_error_t problem;

	*out = json_load_file(path, 0, &problem);
	if (*out == NULL) {
		*cause = kagent_asprintf("cannot read %s: %s", path, problem.text);
		return -EINVAL;
	}
	return 0;
}

/* ---- step 1: the model as a problem ---- */

/*
 * As root, the worker runs the judge, which loads the sub-problems, as the sandbox's uid
 * (docs/sandbox.md), and a sub-problem imports the model's file where it lies: that uid, in no
 * group, must reach it through "others" permissions. Said here, before torch is imported.
 */
static int
command_model__sandbox_can_read(const char *path, char **cause)
{
	char *walk = kagent_strdup(path), *slash;
	struct stat info;
	int error = 0;

	if (geteuid() != 0)
		goto out;
	if (stat(walk, &info) != 0 ||
	    (info.st_mode & (S_ISDIR(info.st_mode) ? S_IXOTH | S_IROTH : S_IROTH)) == 0)
		error = -EACCES;
	while (error == 0 && (slash = strrchr(walk, '/')) != NULL && slash != walk) {
		*slash = '\0';
		if (stat(walk, &info) != 0 || (info.st_mode & S_IXOTH) == 0)
			error = -EACCES;
	}
	if (error != 0)
		*cause = kagent_asprintf(
		    "as root, the judge reads %s as the sandbox's uid, and %s is closed to it "
		    "(no permission for others): open it (chmod o+rx folders, o+r files) or work "
		    "from a folder that is",
		    path, walk);
out:
	free(walk);
	return error;
}

/*
 * --entry and --inputs: "NAME" (a function of MODEL.py) or "FILE.py:NAME". Sets *path (resolved)
 * and *name; a message a person can act on otherwise.
 */
static int
command_model__function(const char *flag, const char *value, const char *model_path, char **path,
			char **name, char **cause)
{
	const char *colon = strrchr(value, ':');
	const char *function = colon != NULL ? colon + 1 : value;
	char resolved[PATH_MAX], *file;
	const char *cursor;
	int error = 0;

	*path = *name = NULL;
	if (function[0] == '\0' || isdigit((unsigned char)function[0])) {
		*cause = kagent_asprintf("--%s %s: name a function, as FILE.py:NAME or NAME", flag,
					 value);
		return -EINVAL;
	}
	for (cursor = function; *cursor != '\0'; cursor++) {
		if (!isalnum((unsigned char)*cursor) && *cursor != '_') {
			*cause = kagent_asprintf("--%s %s: '%s' is not a Python function name",
						 flag, value, function);
			return -EINVAL;
		}
	}
	file = colon != NULL ? kagent_strndup(value, (size_t)(colon - value))
			     : kagent_strdup(model_path);
	if (realpath(file, resolved) == NULL) {
		error = -errno;
		*cause = kagent_asprintf("--%s %s: cannot read %s: %s", flag, value, file,
					 strerror(errno));
	} else if ((error = command_model__sandbox_can_read(resolved, cause)) == 0) {
		*path = kagent_strdup(resolved);
		*name = kagent_strdup(function);
	}
	free(file);
	return error;
}

/* The wrapper that makes a factory and an input function a KernelBench-format problem. Model is
 * the factory's module itself (__new__), so that paths and parameter names are the model's. */
static const char command_model__wrapper_template[] =
    "\"\"\"The model of %s as a KernelBench-format problem, written by `kagent model`\n"
    "(docs/whole-models.md): Model(*get_init_inputs()) is the module that %s() builds,\n"
    "itself, and get_inputs() returns what %s() returns.\"\"\"\n"
    "import importlib.util\n"
    "import sys\n"
    "\n"
    "import torch\n"
    "\n"
    "BUILD = (%s, %s)\n"
    "INPUTS = (%s, %s)\n"
    "INIT_INPUTS = (%s, \"get_init_inputs\")  # used where it exists and BUILD is a class\n"
    "\n"
    "\n"
    "def _function(spec, flag, required=True):\n"
    "    path, name = spec\n"
    "    module_name = \"kagent_entry_\" + \"\".join(c if c.isalnum() else \"_\" for c in "
    "path)\n"
    "    if module_name not in sys.modules:\n"
    "        sys.path.insert(0, path.rsplit(\"/\", 1)[0])\n"
    "        loader = importlib.util.spec_from_file_location(module_name, path)\n"
    "        module = importlib.util.module_from_spec(loader)\n"
    "        sys.modules[module_name] = module\n"
    "        try:\n"
    "            loader.loader.exec_module(module)\n"
    "        except BaseException:\n"
    "            del sys.modules[module_name]\n"
    "            raise\n"
    "    function = getattr(sys.modules[module_name], name, None)\n"
    "    if required and not callable(function):\n"
    "        raise RuntimeError(f\"{flag} {path}:{name}: {path} defines no function {name}\")\n"
    "    return function\n"
    "\n"
    "\n"
    "def _call(spec, flag, *arguments):\n"
    "    function = _function(spec, flag)\n"
    "    try:\n"
    "        return function(*arguments)\n"
    "    except Exception as error:\n"
    "        raise RuntimeError(f\"{flag} {spec[0]}:{spec[1]} failed: \"\n"
    "                           f\"{type(error).__name__}: {error}\") from error\n"
    "\n"
    "\n"
    "class Model(torch.nn.Module):\n"
    "    def __new__(cls, *init_inputs):\n"
    "        model = _call(BUILD, \"--entry\", *init_inputs)\n"
    "        if not isinstance(model, torch.nn.Module):\n"
    "            raise TypeError(f\"--entry {BUILD[0]}:{BUILD[1]}: it returned an object of \"\n"
    "                            f\"type {type(model).__name__}, not a torch.nn.Module\")\n"
    "        return model\n"
    "\n"
    "\n"
    "def get_inputs():\n"
    "    values = _call(INPUTS, \"--inputs\")\n"
    "    return list(values) if isinstance(values, (list, tuple)) else [values]\n"
    "\n"
    "\n"
    "def get_init_inputs():\n"
    "    function = _function(INIT_INPUTS, \"--entry\", required=False)\n"
    "    if not isinstance(_function(BUILD, \"--entry\", required=False), type) or \\\n"
    "            not callable(function):\n"
    "        return []\n"
    "    return list(function())\n";

/* Sets model->problem_path: MODEL.py itself, or the wrapper written for --entry / --inputs. */
static int
command_model__problem(struct command_model *model, char **cause)
{
	const char *entry = model->values[MODEL_OPTION_ENTRY];
	const char *inputs = model->values[MODEL_OPTION_INPUTS];
	char *build_path = NULL, *build_name = NULL, *inputs_path = NULL, *inputs_name = NULL;
	char *literals[5] = {0}, *text = NULL;
	size_t index;
	int error = 0;

	if (entry == NULL && inputs == NULL) {
		model->problem_path = kagent_strdup(model->model_path);
		return 0;
	}
	if ((error = command_model__function("entry", entry != NULL ? entry : "Model",
					     model->model_path, &build_path, &build_name, cause)) !=
		0 ||
	    (error = command_model__function("inputs", inputs != NULL ? inputs : "get_inputs",
					     model->model_path, &inputs_path, &inputs_name,
					     cause)) != 0)
		goto out;
	literals[0] = command_model__python_string(build_path);
	literals[1] = command_model__python_string(build_name);
	literals[2] = command_model__python_string(inputs_path);
	literals[3] = command_model__python_string(inputs_name);
	literals[4] = command_model__python_string(model->model_path);
	text = kagent_asprintf(command_model__wrapper_template, model->model_path, build_name,
			       inputs_name, literals[0], literals[1], literals[2], literals[3],
			       literals[4]);
	model->problem_path = kagent_asprintf("%s/model_problem.py", model->output);
	error = command_model__write(model->problem_path, text, cause);
out:
	for (index = 0; index < sizeof literals / sizeof literals[0]; index++)
		free(literals[index]);
	free(text);
	free(build_path);
	free(build_name);
	free(inputs_path);
	free(inputs_name);
	return error;
}

/* ---- step 2: the analysis ---- */

static void
command_model__analysed(int status, const json_t *object, void *data)
{
	json_t **answer = data;

	*answer = json_pack("{s:i, s:O}", "status", status, "object", object);
}

static int
command_model__base_options(const struct command_model *model,
			    struct kagent_evaluation_options *options, char **cause)
{
	const char *gpu = model->values[MODEL_OPTION_GPU];
	char *end = NULL;
	long index = 0;

	if (gpu != NULL) {
		errno = 0;
		index = strtol(gpu, &end, 10);
		if (errno != 0 || end == gpu || *end != '\0' || index < 0 || index > 1023) {
			*cause = kagent_asprintf("--gpu must be a GPU index, not '%s'", gpu);
			return -EINVAL;
		}
	}
	*options = (struct kagent_evaluation_options){
	    .problem_path = model->problem_path,
	    .device = model->values[MODEL_OPTION_DEVICE],
	    .gpu_index = (int)index,
	    .worker_socket = model->values[MODEL_OPTION_WORKER],
	};
	return 0;
}

/* Runs the analysis on the worker; model->analysis on success. Returns the exit status. */
static int
command_model__analyse(struct command_model *model)
{
	const char *top = model->values[MODEL_OPTION_TOP];
	struct kagent_evaluation_options options;
	json_t *request = NULL, *answer = NULL;
	const json_t *object;
	char *cause = NULL, *end = NULL;
	long count = 3;
	int status = KAGENT_COMMAND_EXIT_ERROR;
	uv_loop_t loop;

	if (top != NULL) {
		errno = 0;
		count = strtol(top, &end, 10);
		if (errno != 0 || end == top || *end != '\0' || count < 1 || count > 32) {
			cause =
			    kagent_asprintf("--top must be a number from 1 to 32, not '%s'", top);
			status = command_model__fail(model, "usage", cause);
			goto out;
		}
	}
	if (command_model__base_options(model, &options, &cause) != 0) {
		status = command_model__fail(model, "usage", cause);
		goto out;
	}
	request = json_pack("{s:s, s:i, s:s?}", "problem_path", model->problem_path, "top",
			    (int)count, "only", model->values[MODEL_OPTION_ONLY]);
	options.model_analysis = request;
	fprintf(model->progress, "analysing %s: one forward, module by module...\n",
		model->model_path);
	fflush(model->progress);
	uv_loop_init(&loop);
	kagent_evaluation_check_problem(&loop, &options, command_model__analysed, &answer);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	object = json_object_get(answer, "object");
	if (json_integer_value(json_object_get(answer, "status")) != 0) {
		const char *kind = json_string_value(json_object_get(object, "error"));

		status = command_model__fail(
		    model, kind != NULL ? kind : "worker",
		    json_string_value(json_object_get(object, "message")) != NULL
			? json_string_value(json_object_get(object, "message"))
			: "the analysis failed");
		goto out;
	}
	if (!json_is_object(json_object_get(object, "model_analysis"))) {
		status = command_model__fail(model, "worker",
					     "the worker answered without an analysis (is it an "
					     "older kagent worker?)");
		goto out;
	}
	model->analysis = json_incref(json_object_get(object, "model_analysis"));
	status = 0;
out:
	json_decref(request);
	json_decref(answer);
	free(cause);
	return status;
}

/* "12.3%" of a share. */
static void
command_model__percent(char *buffer, size_t size, const json_t *value)
{
	snprintf(buffer, size, "%.1f%%", 100.0 * json_number_value(value));
}

/* The roofline column: arithmetic intensity, and where the peaks are known the share of the
 * floor reached and what bounds it. */
static void
command_model__roofline(char *buffer, size_t size, const json_t *roofline)
{
	const json_t *intensity = json_object_get(roofline, "intensity");
	const json_t *fraction = json_object_get(roofline, "fraction");

	if (!json_is_number(intensity)) {
		snprintf(buffer, size, "-");
		return;
	}
	if (json_is_number(fraction))
		snprintf(buffer, size, "%.1f FLOP/B, %.0f%% of %s bound",
			 json_number_value(intensity), 100.0 * json_number_value(fraction),
			 json_string_value(json_object_get(roofline, "bound")));
	else
		snprintf(buffer, size, "%.1f FLOP/B", json_number_value(intensity));
}

static void
command_model__print_analysis(const struct command_model *model, FILE *stream)
{
	const json_t *hotspots = json_object_get(model->analysis, "hotspots");
	const json_t *chosen = json_object_get(model->analysis, "chosen");
	const json_t *spot, *bound = json_object_get(model->analysis, "amdahl_bound");
	char share[16], own[16], roofline[96];
	size_t index;

	fprintf(stream, "one forward of %s: %.3f ms of %s time (the fastest of %lld)\n",
		model->model_path,
		json_number_value(json_object_get(model->analysis, "total_us")) / 1e3,
		json_string_value(json_object_get(model->analysis, "clock")),
		(long long)json_integer_value(json_object_get(model->analysis, "repeat")));
	fprintf(stream, "%4s  %6s  %6s  %5s  %-24s %-14s %-18s %s\n", "rank", "share", "own",
		"calls", "module", "class", "top operator", "inputs");
	json_array_foreach(hotspots, index, spot)
	{
		const json_t *first = json_array_get(json_object_get(spot, "operators"), 0);

		if (index >= MODEL_TABLE_ROWS) {
			fprintf(stream, "  ... %zu more in analysis.json\n",
				json_array_size(hotspots) - index);
			break;
		}
		command_model__percent(share, sizeof share, json_object_get(spot, "share"));
		command_model__percent(own, sizeof own, json_object_get(spot, "self_share"));
		fprintf(stream, "%4lld  %6s  %6s  %5lld  %-24s %-14s %-18s %s\n",
			(long long)json_integer_value(json_object_get(spot, "rank")), share, own,
			(long long)json_integer_value(json_object_get(spot, "calls")),
			json_string_value(json_object_get(spot, "path")),
			json_string_value(json_object_get(spot, "class")),
			first != NULL ? json_string_value(json_object_get(first, "name")) : "-",
			json_string_value(json_object_get(spot, "inputs")) != NULL
			    ? json_string_value(json_object_get(spot, "inputs"))
			    : "-");
	}
	fprintf(stream, "\nhot spots (share: the module with its children; own: its operators "
			"outside its children, the rank's key):\n");
	json_array_foreach(chosen, index, spot)
	{
		const json_t *check = json_object_get(spot, "check");

		command_model__percent(share, sizeof share, json_object_get(spot, "share"));
		command_model__roofline(roofline, sizeof roofline,
					json_object_get(spot, "roofline"));
		fprintf(stream, "  %s (%s, %s of the forward; inputs %s; %s)\n",
			json_string_value(json_object_get(spot, "path")),
			json_string_value(json_object_get(spot, "class")), share,
			json_string_value(json_object_get(spot, "inputs")) != NULL
			    ? json_string_value(json_object_get(spot, "inputs"))
			    : "-",
			roofline);
		if (json_is_true(json_object_get(check, "exact")))
			fprintf(stream,
				"    -> %s/problems/%s: reproduces the model's activations "
				"exactly\n",
				model->output, json_string_value(json_object_get(spot, "file")));
		else
			fprintf(stream, "    not written: %s\n",
				json_string_value(json_object_get(check, "reason")));
	}
	if (json_is_number(bound))
		fprintf(stream,
			"Amdahl bound: they take %.1f%% of the forward, so replacing them "
			"can make it at most %.2fx faster\n",
			100.0 *
			    json_number_value(json_object_get(model->analysis, "covered_share")),
			json_number_value(bound));
}

/* Writes DIR/analysis.json and DIR/problems/NN_path.py for each exact hot spot; the sources
 * leave the analysis object, which keeps the files' names. */
static int
command_model__write_problems(struct command_model *model, char **cause)
{
	json_t *chosen = json_object_get(model->analysis, "chosen"), *spot;
	char *folder = kagent_asprintf("%s/problems", model->output), *path = NULL;
	size_t index;
	int error;

	/* A new analysis: an earlier one's sub-problems would join a batch (kagentd scans the
	 * folder), and an earlier batch's answer would stand for these runs. */
	path = kagent_asprintf("%s/batch.json", model->output);
	if (unlink(path) != 0 && errno != ENOENT) {
		error = -errno;
		*cause = kagent_asprintf("cannot remove %s: %s", path, strerror(errno));
		goto out;
	}
	free(path);
	path = NULL;
	if ((error = kagent_paths_remove_tree(folder, cause)) != 0 ||
	    (error = kagent_fileio_make_directories(folder, 0755, cause)) != 0)
		goto out;
	json_array_foreach(chosen, index, spot)
	{
		const char *source = json_string_value(json_object_get(spot, "source"));
		const char *name = json_string_value(json_object_get(spot, "file"));

		if (source == NULL || name == NULL || strchr(name, '/') != NULL ||
		    !json_is_true(json_object_get(json_object_get(spot, "check"), "exact"))) {
			json_object_del(spot, "source");
			continue;
		}
		path = kagent_asprintf("%s/%s", folder, name);
		if ((error = command_model__write(path, source, cause)) != 0)
			goto out;
		json_object_set_new(spot, "problem", json_string(path));
		json_object_del(spot, "source");
		free(path);
		path = NULL;
	}
	free(path);
	path = kagent_asprintf("%s/analysis.json", model->output);
	error = command_model__write_json(path, model->analysis, cause);
out:
	free(folder);
	free(path);
	return error;
}

/* ---- step 3: the runs ---- */

/* Runs this binary with argv, stdout into stdout_path (NULL: ours); returns its exit status,
 * or -1 when it could not run. */
static int
command_model__run_child(char **argv, const char *stdout_path)
{
	int status = 0;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (stdout_path != NULL) {
			int fd = open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

			if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
				_exit(127);
		}
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Appends "--flag value" for each of the named options that was given, then, with settings,
 * each given model, target and budget flag (kagent optimize's and kagent batch's). */
static int
command_model__pass_flags(const struct command_model *model, char **argv, int count,
			  const int *indexes, size_t index_count, int settings)
{
	size_t index;

	for (index = 0; index < index_count; index++) {
		const struct kagent_command_option *option =
		    &command_model__options[indexes[index]];

		if (model->values[indexes[index]] == NULL || count + 2 >= MODEL_CHILD_ARGUMENTS)
			continue;
		argv[count++] = kagent_asprintf("--%s", option->name);
		argv[count++] = kagent_strdup(model->values[indexes[index]]);
	}
	for (index = MODEL_OPTION_FIRST_SETTING; settings && index < MODEL_OPTION_COUNT; index++) {
		if (model->values[index] == NULL || count + 2 >= MODEL_CHILD_ARGUMENTS)
			continue;
		argv[count++] = kagent_asprintf("--%s", command_model__options[index].name);
		argv[count++] = kagent_strdup(model->values[index]);
	}
	return count;
}

static void
command_model__free_argv(char **argv)
{
	size_t index;

	for (index = 0; argv[index] != NULL; index++)
		free(argv[index]);
}

/* DIR/runs/NN_path.json: the summary of the run of the sub-problem NN_path.py. */
static char *
command_model__summary_path(const struct command_model *model, const char *file_name)
{
	return kagent_asprintf("%s/runs/%.*s.json", model->output, (int)strcspn(file_name, "."),
			       file_name);
}

/* `kagent optimize` on each sub-problem, one after another; DIR/runs/NN.json is its summary. */
static int
command_model__optimize_each(const struct command_model *model, char **cause)
{
	static const int passed[] = {MODEL_OPTION_DEVICE, MODEL_OPTION_GPU, MODEL_OPTION_WORKER,
				     MODEL_OPTION_CONFIG};
	json_t *spot;
	char *runs = kagent_asprintf("%s/runs", model->output);
	size_t index;
	int error;

	if ((error = kagent_fileio_make_directories(runs, 0755, cause)) != 0)
		goto out;
	json_array_foreach(json_object_get(model->analysis, "chosen"), index, spot)
	{
		const char *problem = json_string_value(json_object_get(spot, "problem"));
		const char *name = json_string_value(json_object_get(spot, "file"));
		char *argv[MODEL_CHILD_ARGUMENTS + 1] = {0}, *summary;
		int count = 0, status;

		if (problem == NULL)
			continue;
		argv[count++] = kagent_strdup("kagent");
		argv[count++] = kagent_strdup("optimize");
		argv[count++] = kagent_strdup(problem);
		argv[count++] = kagent_strdup("--output");
		argv[count++] = kagent_strdup(runs);
		argv[count++] = kagent_strdup("--json");
		command_model__pass_flags(model, argv, count, passed,
					  sizeof passed / sizeof passed[0], 1);
		summary = command_model__summary_path(model, name);
		fprintf(model->progress, "\nkagent optimize %s\n", problem);
		fflush(model->progress);
		status = command_model__run_child(argv, summary);
		fprintf(model->progress, "kagent optimize %s: exit status %d, summary %s\n", name,
			status, summary);
		json_object_set_new(spot, "summary", json_string(summary));
		command_model__free_argv(argv);
		free(summary);
		if (status >= 128) {
			*cause = kagent_asprintf("kagent optimize %s was stopped (status %d)",
						 problem, status);
			error = -EINTR;
			goto out;
		}
	}
out:
	free(runs);
	return error;
}

/* Whether kagentd runs: it listens where kagent batch would reach it (--socket, else
 * $KAGENT_SOCKET, else the daemon's own socket); a TCP address given is taken at its word. */
static int
command_model__daemon_runs(const struct command_model *model)
{
	const char *value = model->values[MODEL_OPTION_SOCKET];
	char *path = NULL, *cause = NULL;
	int listening = 0;

	if (value == NULL || value[0] == '\0')
		value = getenv("KAGENT_SOCKET");
	if (value != NULL && value[0] != '\0')
		return strncmp(value, "http://", 7) == 0 || kagent_paths_socket_listening(value);
	if (kagent_paths_daemon_socket(&path, &cause) == 0)
		listening = kagent_paths_socket_listening(path);
	free(path);
	free(cause);
	return listening;
}

/* `kagent batch DIR/problems` with the settings; the batch's answer goes to DIR/batch.json. */
static int
command_model__queue_batch(const struct command_model *model, char **cause)
{
	static const int passed[] = {MODEL_OPTION_SOCKET};
	char *argv[MODEL_CHILD_ARGUMENTS + 1] = {0};
	char *answer = kagent_asprintf("%s/batch.json", model->output);
	int count = 0, status, error = 0;

	argv[count++] = kagent_strdup("kagent");
	argv[count++] = kagent_strdup("batch");
	argv[count++] = kagent_asprintf("%s/problems", model->output);
	argv[count++] = kagent_strdup("--json");
	command_model__pass_flags(model, argv, count, passed, sizeof passed / sizeof passed[0], 1);
	status = command_model__run_child(argv, answer);
	if (status != 0) {
		*cause = kagent_asprintf(
		    "kagent batch failed (exit status %d; its answer is in %s)", status, answer);
		error = -EIO;
	}
	command_model__free_argv(argv);
	free(answer);
	return error;
}

/* ---- step 4: the composition ---- */

/* The final result of a hot spot's run: its summary file, or the batch session's result. */
static json_t *
command_model__final(const struct command_model *model, const json_t *spot, const json_t *batch)
{
	const char *name = json_string_value(json_object_get(spot, "file"));
	const char *problem = json_string_value(json_object_get(spot, "problem"));
	const json_t *session;
	json_error_t ignored;
	json_t *final;
	size_t index;

	if (batch == NULL) {
		char *summary = name != NULL ? command_model__summary_path(model, name) : NULL;

		final = summary != NULL ? json_load_file(summary, 0, &ignored) : NULL;
		free(summary);
		return final;
	}
	json_array_foreach(json_object_get(batch, "sessions"), index, session)
	{
		const char *path = json_string_value(json_object_get(session, "problem_path"));

		if (path != NULL && problem != NULL && strcmp(path, problem) == 0)
			return json_incref(json_object_get(session, "result"));
	}
	return NULL;
}

/* The best credited variant of a run's final result, or NULL with why. */
static const char *
command_model__variant(const json_t *final, const char **why)
{
	const json_t *confirmation = json_object_get(final, "confirmation");
	const char *path = json_string_value(json_object_get(final, "path"));

	*why = NULL;
	if (final == NULL)
		*why = "no result (the run did not finish)";
	else if (path == NULL)
		*why = "no correct variant was confirmed";
	else if (json_is_false(json_object_get(confirmation, "credited")))
		*why = "its best variant is not credited (its own kernels do little of the work)";
	else if (access(path, R_OK) != 0)
		*why = "its best variant's file is gone";
	return *why == NULL ? path : NULL;
}

/*
 * A variant's source as a Python string literal that keeps its lines where they are, each at
 * a line's start (a triple-quoted literal opened with a backslash-newline): the judge finds a
 * candidate's kernels in its source by their decorators at a line's start and their
 * __global__ signatures. Backslashes are doubled; a quote followed by another or ending the
 * source is escaped, so no three close the literal; line ends become newlines, as Python
 * reads them from a file; a NUL (no valid variant has one) is spelled as an escape.
 */
static char *
command_model__python_block(const char *data, size_t size)
{
	struct kagent_buffer text = {0};
	size_t index;

	kagent_buffer_append_string(&text, "\"\"\"\\\n");
	for (index = 0; index < size; index++) {
		char character = data[index];

		if (character == '\\')
			kagent_buffer_append_string(&text, "\\\\");
		else if (character == '"' && (index + 1 == size || data[index + 1] == '"'))
			kagent_buffer_append_string(&text, "\\\"");
		else if (character == '\r' && index + 1 < size && data[index + 1] == '\n')
			continue;
		else if (character == '\r')
			kagent_buffer_append_string(&text, "\n");
		else if (character == '\0')
			kagent_buffer_append_string(&text, "\\x00");
		else
			kagent_buffer_append(&text, &character, 1);
	}
	kagent_buffer_append_string(&text, "\"\"\"");
	return kagent_buffer_take(&text);
}

static const char command_model__composed_template[] =
    "\"\"\"A drop-in ModelNew for the model of %s, written by `kagent model`\n"
    "(docs/whole-models.md): the model as its problem builds it, with each hot spot of SWAPS\n"
    "replaced by the best credited variant of its sub-problem. The variants' sources are\n"
    "inlined at the end of this file, because the judge knows a candidate's own kernels by the\n"
    "candidate's own source; each runs as a module of its own built from its source, so two\n"
    "variants' ModelNew or kernels of the same name never meet. A variant's parameters are\n"
    "copied in from the module it replaces, by name under \"module.\", as the judge copies\n"
    "them. Judge it as any candidate: kagent eval %s %s\"\"\"\n"
    "import importlib.util\n"
    "import linecache\n"
    "import sys\n"
    "import types\n"
    "\n"
    "import torch\n"
    "\n"
    "MODEL_PROBLEM = %s\n"
    "\n"
    "\n"
    "def _module_name(prefix, text):\n"
    "    return prefix + \"\".join(c if c.isalnum() else \"_\" for c in text)\n"
    "\n"
    "\n"
    "def _load_problem(path):\n"
    "    \"\"\"The model's problem, from its file (the model's own code is no variant's).\"\"\"\n"
    "    name = _module_name(\"kagent_model_\", path)\n"
    "    if name not in sys.modules:\n"
    "        sys.path.insert(0, path.rsplit(\"/\", 1)[0])\n"
    "        spec = importlib.util.spec_from_file_location(name, path)\n"
    "        module = importlib.util.module_from_spec(spec)\n"
    "        sys.modules[name] = module\n"
    "        try:\n"
    "            spec.loader.exec_module(module)\n"
    "        except BaseException:\n"
    "            del sys.modules[name]\n"
    "            raise\n"
    "    return sys.modules[name]\n"
    "\n"
    "\n"
    "def _load_variant(name, source):\n"
    "    \"\"\"A variant as a module of its own, run from its inlined source. The source is\n"
    "    registered in linecache under the module's file name, so inspect finds it (Triton's\n"
    "    @jit reads its kernels' source); no file is read, so a variant that reads files next\n"
    "    to itself does not work here.\"\"\"\n"
    "    module_name = _module_name(\"kagent_variant_\", name)\n"
    "    if module_name not in sys.modules:\n"
    "        filename = f\"<kagent variant {name}>\"\n"
    "        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)\n"
    "        module = types.ModuleType(module_name)\n"
    "        module.__file__ = filename\n"
    "        sys.modules[module_name] = module\n"
    "        try:\n"
    "            exec(compile(source, filename, \"exec\", dont_inherit=True), module.__dict__)\n"
    "        except BaseException:\n"
    "            del sys.modules[module_name]\n"
    "            raise\n"
    "    return sys.modules[module_name]\n"
    "\n"
    "\n"
    "class Swapped(torch.nn.Module):\n"
    "    \"\"\"A variant in its module's place: called as the module is, it hands the variant\n"
    "    the tensors, positional ones first, then the keyword ones (the sub-problem's\n"
    "    get_inputs() order); the constants of the call are the sub-problem's own.\"\"\"\n"
    "\n"
    "    def __init__(self, variant, keywords):\n"
    "        super().__init__()\n"
    "        self.variant = variant\n"
    "        self.keywords = keywords\n"
    "\n"
    "    def forward(self, *args, **kwargs):\n"
    "        tensors = [value for value in args if isinstance(value, torch.Tensor)]\n"
    "        tensors += [kwargs[key] for key in self.keywords if key in kwargs]\n"
    "        return self.variant(*tensors)\n"
    "\n"
    "\n"
    "class ModelNew(torch.nn.Module):\n"
    "    def __new__(cls, *init_inputs):\n"
    "        model = _load_problem(MODEL_PROBLEM).Model(*init_inputs)\n"
    "        for path, keywords, name, source in SWAPS:\n"
    "            original = model.get_submodule(path)\n"
    "            variant = _load_variant(name, source).ModelNew()\n"
    "            own = variant.state_dict()\n"
    "            with torch.no_grad():\n"
    "                for key, value in original.state_dict().items():\n"
    "                    target = own.get(\"module.\" + key)\n"
    "                    if (isinstance(target, torch.Tensor) and target.shape == value.shape\n"
    "                            and target.dtype == value.dtype):\n"
    "                        target.copy_(value)\n"
    "            model.set_submodule(path, Swapped(variant, keywords))\n"
    "        return model\n"
    "\n"
    "\n"
    "# Each swapped hot spot: [its module path, the module's tensor keyword arguments in order,\n"
    "# the variant's name (its copy in variants/), the variant's source].\n"
    "SWAPS = [\n"
    "%s]\n";

/* One entry of SWAPS: the hot spot's path, tensor keywords, the variant's name and source. */
static char *
command_model__swap_entry(const json_t *spot, const char *name, const char *data, size_t size)
{
	char *path = json_dumps(json_object_get(spot, "path"), JSON_ENCODE_ANY);
	char *keywords = json_dumps(json_object_get(spot, "tensor_keywords"), JSON_ENCODE_ANY);
	char *stem = kagent_strndup(name, strcspn(name, "."));
	char *literal = command_model__python_string(stem);
	char *source = command_model__python_block(data, size);
	char *entry = kagent_asprintf("    [%s, %s, %s, %s],\n", path, keywords ? keywords : "[]",
				      literal, source);

	free(path);
	free(keywords);
	free(stem);
	free(literal);
	free(source);
	return entry;
}

/* Writes DIR/optimized_model.py from the runs' results, each variant's source inlined (and
 * copied to DIR/variants/); sets each hot spot's "variant" or "kept" (why the model's own
 * module stays). */
static int
command_model__write_composed(const struct command_model *model, const json_t *batch,
			      char **composed_out, char **cause)
{
	struct kagent_buffer swaps = {0};
	json_t *spot;
	char *variants = kagent_asprintf("%s/variants", model->output);
	char *problem_literal = NULL, *text = NULL;
	size_t index;
	int error;

	*composed_out = kagent_asprintf("%s/optimized_model.py", model->output);
	if ((error = kagent_fileio_make_directories(variants, 0755, cause)) != 0)
		goto out;
	json_array_foreach(json_object_get(model->analysis, "chosen"), index, spot)
	{
		json_t *final = command_model__final(model, spot, batch);
		const char *why = NULL, *source = command_model__variant(final, &why);
		const char *name = json_string_value(json_object_get(spot, "file"));
		char *data = NULL, *copy = NULL, *entry;
		size_t size = 0;

		if (json_object_get(spot, "problem") == NULL)
			why = "no sub-problem was written";
		if (why == NULL && source != NULL && name != NULL) {
			copy = kagent_asprintf("%s/%s", variants, name);
			error = kagent_fileio_read(source, MODEL_FILE_CAP, &data, &size, cause);
			if (error == 0)
				error = kagent_fileio_write_atomic(copy, data, size, cause);
			if (error != 0) {
				free(data);
				free(copy);
				json_decref(final);
				goto out;
			}
			entry = command_model__swap_entry(spot, name, data, size);
			kagent_buffer_append_string(&swaps, entry);
			json_object_set_new(spot, "variant", json_string(copy));
			free(entry);
			free(data);
			free(copy);
		} else {
			json_object_set_new(spot, "kept", json_string(why));
		}
		if (final != NULL)
			json_object_set(spot, "final", final);
		json_decref(final);
	}
	problem_literal = command_model__python_string(model->problem_path);
	text = kagent_asprintf(command_model__composed_template, model->model_path,
			       model->problem_path, *composed_out, problem_literal,
			       kagent_buffer_string(&swaps));
	error = command_model__write(*composed_out, text, cause);
out:
	kagent_buffer_free(&swaps);
	free(variants);
	free(problem_literal);
	free(text);
	return error;
}

static double
command_model__number(const json_t *object, const char *key)
{
	return json_number_value(json_object_get(object, key));
}

/* The report: per hot spot (its run's confirmed speedups) and end to end (the verdict). */
static json_t *
command_model__report(const struct command_model *model, const json_t *verdict)
{
	const json_t *timing = json_object_get(verdict, "timing");
	const char *status = json_string_value(json_object_get(verdict, "status"));
	json_t *spots = json_array(), *spot;
	size_t index;

	json_array_foreach(json_object_get(model->analysis, "chosen"), index, spot)
	{
		const json_t *confirmation =
		    json_object_get(json_object_get(spot, "final"), "confirmation");

		json_array_append_new(
		    spots,
		    json_pack(
			"{s:O, s:O, s:O, s:O?, s:O?, s:O?, s:O?, s:O?}", "path",
			json_object_get(spot, "path"), "class", json_object_get(spot, "class"),
			"share", json_object_get(spot, "share"), "problem",
			json_object_get(spot, "problem"), "variant",
			json_object_get(spot, "variant"), "kept", json_object_get(spot, "kept"),
			"speedup_vs_eager", json_object_get(confirmation, "speedup_vs_eager"),
			"speedup_vs_compile", json_object_get(confirmation, "speedup_vs_compile")));
	}
	return json_pack(
	    "{s:s, s:s, s:s, s:O, s:O, s:o, s:{s:b, s:O?, s:O?, s:O?, s:O?, s:O?, "
	    "s:O?}}",
	    "schema", "kagent.model_report/1", "model", model->model_path, "problem",
	    model->problem_path, "covered_share", json_object_get(model->analysis, "covered_share"),
	    "amdahl_bound", json_object_get(model->analysis, "amdahl_bound"), "hotspots", spots,
	    "end_to_end", "correct", status != NULL && strcmp(status, "correct") == 0, "status",
	    json_object_get(verdict, "status"), "reason", json_object_get(verdict, "reason"),
	    "speedup_vs_eager", json_object_get(timing, "speedup_vs_eager"), "speedup_vs_compile",
	    json_object_get(timing, "speedup_vs_compile"), "eager",
	    json_object_get(timing, "eager"), "compile", json_object_get(timing, "compile"));
}

static void
command_model__speedup(char *buffer, size_t size, const json_t *value)
{
	if (json_is_number(value))
		snprintf(buffer, size, "%.2fx", json_number_value(value));
	else
		snprintf(buffer, size, "-");
}

/* report.md, and the same text on the progress stream. */
static char *
command_model__report_text(const json_t *report, const json_t *verdict)
{
	const json_t *end = json_object_get(report, "end_to_end"), *spot;
	const json_t *timing = json_object_get(verdict, "timing");
	const char *status = json_string_value(json_object_get(end, "status"));
	const char *reason = json_string_value(json_object_get(end, "reason"));
	struct kagent_buffer text = {0};
	char eager[32], compile[32], share[16];
	size_t index;

	if (reason == NULL)
		reason = json_string_value(json_object_get(verdict, "message"));

	kagent_buffer_appendf(&text, "# kagent model: %s\n\n## Hot spots\n\n",
			      json_string_value(json_object_get(report, "model")));
	kagent_buffer_append_string(&text, "| module | class | share | speedup vs eager | vs "
					   "torch.compile | variant |\n| --- | --- | --- | --- | "
					   "--- | --- |\n");
	json_array_foreach(json_object_get(report, "hotspots"), index, spot)
	{
		const char *variant = json_string_value(json_object_get(spot, "variant"));

		command_model__percent(share, sizeof share, json_object_get(spot, "share"));
		command_model__speedup(eager, sizeof eager,
				       json_object_get(spot, "speedup_vs_eager"));
		command_model__speedup(compile, sizeof compile,
				       json_object_get(spot, "speedup_vs_compile"));
		kagent_buffer_appendf(&text, "| %s | %s | %s | %s | %s | %s |\n",
				      json_string_value(json_object_get(spot, "path")),
				      json_string_value(json_object_get(spot, "class")), share,
				      eager, compile,
				      variant != NULL ? variant
				      : json_string_value(json_object_get(spot, "kept")) != NULL
					  ? json_string_value(json_object_get(spot, "kept"))
					  : "-");
	}
	command_model__speedup(eager, sizeof eager, json_object_get(end, "speedup_vs_eager"));
	command_model__speedup(compile, sizeof compile, json_object_get(end, "speedup_vs_compile"));
	kagent_buffer_appendf(&text,
			      "\nThe hot spots take %.1f%% of the forward: replacing them by "
			      "kernels that take no time at all would make it at most %.2fx "
			      "faster (Amdahl).\n\n## End to end (optimized_model.py against the "
			      "model, fresh inputs)\n\n%s: %s\n\n",
			      100.0 * command_model__number(report, "covered_share"),
			      json_is_number(json_object_get(report, "amdahl_bound"))
				  ? command_model__number(report, "amdahl_bound")
				  : 0.0,
			      status != NULL ? status : "no verdict", reason != NULL ? reason : "");
	if (!json_is_object(timing))
		return kagent_buffer_take(&text);
	kagent_buffer_appendf(
	    &text,
	    "| forward | median ms |\n| --- | --- |\n| optimized_model.py | %.4f |\n| eager "
	    "PyTorch | %.4f |\n| torch.compile | %.4f |\n\nspeedup: %s vs eager, %s vs "
	    "torch.compile\n",
	    command_model__number(json_object_get(timing, "candidate"), "median_ms"),
	    command_model__number(json_object_get(timing, "eager"), "median_ms"),
	    command_model__number(json_object_get(timing, "compile"), "median_ms"), eager, compile);
	return kagent_buffer_take(&text);
}

/* Step 4 end to end; returns the exit status (0: the composed model is correct). */
static int
command_model__compose(struct command_model *model)
{
	struct kagent_evaluation_options options;
	json_t *batch = NULL, *verdict = NULL, *report = NULL;
	char *composed = NULL, *cause = NULL, *path = NULL, *text = NULL;
	int status = KAGENT_COMMAND_EXIT_ERROR, evaluated;

	path = kagent_asprintf("%s/batch.json", model->output);
	if (access(path, R_OK) == 0) {
		/* a batch's results are its sessions' (kagent status ID --json) */
		json_t *queued = NULL;
		char *argv[MODEL_CHILD_ARGUMENTS + 1] = {0}, *answer;
		static const int passed[] = {MODEL_OPTION_SOCKET};
		int count = 0;

		if (command_model__read_json(path, &queued, &cause) != 0) {
			status = command_model__fail(model, "io", cause);
			goto out;
		}
		answer = kagent_asprintf("%s/batch_status.json", model->output);
		argv[count++] = kagent_strdup("kagent");
		argv[count++] = kagent_strdup("status");
		argv[count++] =
		    kagent_strdup(json_string_value(json_object_get(queued, "batch"))
				      ? json_string_value(json_object_get(queued, "batch"))
				      : "");
		argv[count++] = kagent_strdup("--json");
		command_model__pass_flags(model, argv, count, passed, 1, 0);
		if (command_model__run_child(argv, answer) == 0)
			command_model__read_json(answer, &batch, &cause);
		command_model__free_argv(argv);
		json_decref(queued);
		free(answer);
		if (batch == NULL) {
			status = command_model__fail(model, "daemon",
						     cause != NULL ? cause
								   : "kagentd did not describe the "
								     "batch of these hot spots");
			goto out;
		}
	}
	if (command_model__write_composed(model, batch, &composed, &cause) != 0) {
		status = command_model__fail(model, "io", cause);
		goto out;
	}
	if (command_model__base_options(model, &options, &cause) != 0) {
		status = command_model__fail(model, "usage", cause);
		goto out;
	}
	options.candidate_path = composed;
	options.measure_compile = 1;
	fprintf(model->progress,
		"\nchecking %s against the model (fresh inputs, eager and "
		"torch.compile timed beside it)...\n",
		composed);
	fflush(model->progress);
	evaluated = kagent_evaluation_run_sync(&options, &verdict);
	report = command_model__report(model, verdict);
	json_object_set(report, "verdict", verdict);
	text = command_model__report_text(report, verdict);
	free(path);
	path = kagent_asprintf("%s/report.json", model->output);
	if (command_model__write_json(path, report, &cause) != 0) {
		status = command_model__fail(model, "io", cause);
		goto out;
	}
	free(path);
	path = kagent_asprintf("%s/report.md", model->output);
	if (command_model__write(path, text, &cause) != 0) {
		status = command_model__fail(model, "io", cause);
		goto out;
	}
	free(path);
	path = kagent_asprintf("%s/analysis.json", model->output);
	command_model__write_json(path, model->analysis, &cause);
	if (model->json) {
		json_dumpf(report, stdout, JSON_COMPACT);
		fputc('\n', stdout);
	} else {
		fprintf(stdout, "\n%s\nreport: %s/report.md\n", text, model->output);
	}
	/* as kagent eval's: 0 correct, 1 another verdict, 2 none */
	status = evaluated != 0 ? KAGENT_COMMAND_EXIT_ERROR
		 : json_is_true(json_object_get(json_object_get(report, "end_to_end"), "correct"))
		     ? 0
		     : 1;
out:
	json_decref(batch);
	json_decref(verdict);
	json_decref(report);
	free(composed);
	free(cause);
	free(path);
	free(text);
	return status;
}

/* ---- the command ---- */

/* DIR: --output, else kagent-model/NAME; created. */
static int
command_model__output(struct command_model *model, char **cause)
{
	const char *given = model->values[MODEL_OPTION_OUTPUT];
	const char *base = strrchr(model->model_path, '/') + 1;
	char resolved[PATH_MAX];
	char *path = given != NULL
			 ? kagent_strdup(given)
			 : kagent_asprintf("kagent-model/%.*s", (int)strcspn(base, "."), base);
	int error = kagent_fileio_make_directories(path, 0755, cause);

	if (error == 0 && realpath(path, resolved) == NULL) {
		error = -errno;
		*cause = kagent_asprintf("cannot resolve %s: %s", path, strerror(errno));
	}
	if (error == 0)
		model->output = kagent_strdup(resolved);
	if (error == 0)
		error = command_model__sandbox_can_read(model->output, cause);
	if (error == 0)
		error = command_model__sandbox_can_read(model->model_path, cause);
	free(path);
	return error;
}

static int
command_model__parse(struct command_model *model, int argc, char **argv, int *status_out)
{
	struct kagent_command_parser parser;
	char resolved[PATH_MAX];
	char *message = NULL;
	int option, index;

	for (index = 1; index < argc; index++)
		model->json = model->json || strcmp(argv[index], "--json") == 0;
	kagent_command_parser_init(&parser, &kagent_command_model);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		if (option == KAGENT_COMMAND_HELP) {
			kagent_command_print_help(&kagent_command_model, stdout);
			*status_out = 0;
			return 0;
		}
		if (option < 0) {
			message =
			    kagent_asprintf(option == KAGENT_COMMAND_UNKNOWN ? "unknown option %s"
									     : "%s needs a value",
					    argv[optind - 1]);
			*status_out = command_model__fail(model, "usage", message);
			kagent_command_print_usage(&kagent_command_model);
			free(message);
			return 0;
		}
		model->values[option] = optarg != NULL ? optarg : "";
	}
	if (argc - optind != 1) {
		*status_out = command_model__fail(model, "usage", "give exactly one model file");
		kagent_command_print_usage(&kagent_command_model);
		return 0;
	}
	if ((model->values[MODEL_OPTION_PLAN] != NULL) +
		(model->values[MODEL_OPTION_BATCH] != NULL) +
		(model->values[MODEL_OPTION_HERE] != NULL) +
		(model->values[MODEL_OPTION_COMPOSE] != NULL) >
	    1) {
		*status_out = command_model__fail(
		    model, "usage", "--plan, --batch, --here and --compose exclude each other");
		return 0;
	}
	if (realpath(argv[optind], resolved) == NULL) {
		message =
		    kagent_asprintf("cannot read the model %s: %s", argv[optind], strerror(errno));
		*status_out = command_model__fail(model, "io", message);
		free(message);
		return 0;
	}
	model->model_path = kagent_strdup(resolved);
	return 1;
}

static int
command_model__handler(int argc, char **argv)
{
	struct command_model model = {0};
	char *cause = NULL, *path = NULL;
	int status = KAGENT_COMMAND_EXIT_ERROR;

	if (!command_model__parse(&model, argc, argv, &status))
		goto out;
	model.progress = model.json ? stderr : stdout;
	if (command_model__output(&model, &cause) != 0) {
		status = command_model__fail(&model, "io", cause);
		goto out;
	}
	if (model.values[MODEL_OPTION_COMPOSE] != NULL) {
		/* the model's problem is the one the analysis read */
		path = kagent_asprintf("%s/analysis.json", model.output);
		if (command_model__read_json(path, &model.analysis, &cause) != 0) {
			status = command_model__fail(&model, "io", cause);
			goto out;
		}
		model.problem_path = kagent_strdup(
		    json_string_value(json_object_get(model.analysis, "problem_path")) != NULL
			? json_string_value(json_object_get(model.analysis, "problem_path"))
			: model.model_path);
		status = command_model__compose(&model);
		goto out;
	}
	if (command_model__problem(&model, &cause) != 0) {
		status = command_model__fail(&model, "usage", cause);
		goto out;
	}
	if ((status = command_model__analyse(&model)) != 0)
		goto out;
	if (command_model__write_problems(&model, &cause) != 0) {
		status = command_model__fail(&model, "io", cause);
		goto out;
	}
	command_model__print_analysis(&model, model.progress);
	if (model.values[MODEL_OPTION_PLAN] != NULL) {
		if (model.json) {
			json_dumpf(model.analysis, stdout, JSON_COMPACT);
			fputc('\n', stdout);
		}
		status = 0;
		goto out;
	}
	if (model.values[MODEL_OPTION_BATCH] != NULL ||
	    (model.values[MODEL_OPTION_HERE] == NULL && command_model__daemon_runs(&model))) {
		if (command_model__queue_batch(&model, &cause) != 0) {
			status = command_model__fail(&model, "daemon", cause);
			goto out;
		}
		fprintf(model.progress,
			"queued in kagentd (%s/batch.json); once the batch is done: kagent model "
			"%s --compose --output %s\n",
			model.output, model.model_path, model.output);
		status = 0;
		goto out;
	}
	if (command_model__optimize_each(&model, &cause) != 0) {
		status = command_model__fail(&model, "session", cause);
		goto out;
	}
	status = command_model__compose(&model);
out:
	json_decref(model.analysis);
	free(model.model_path);
	free(model.output);
	free(model.problem_path);
	free(cause);
	free(path);
	return status;
}

const struct kagent_command kagent_command_model = {
    .name = "model",
    .operands = "MODEL.py",
    .help = "a whole model: its hot spots as sub-problems, optimized, and composed back into a "
	    "drop-in faster model",
    .options = command_model__options,
    .handler = command_model__handler,
};
