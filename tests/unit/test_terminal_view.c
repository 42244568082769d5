/* Tests of the terminal view: the lines a run shows, verbose mode, missing fields, live mode. */
#include "kagent/cli/terminal_view.h"

#include "kagent/base/alloc.h"
#include "test.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* A small run, one record per line, as the agent loop writes them. */
static const char run_records[] =
    "{\"type\":\"run_start\",\"seq\":1,\"run_id\":\"20261122-061502-3f2a\",\"resumed\":false,"
    "\"problem\":\"problem.py\",\"problem_name\":\"relu\",\"config\":{\"provider\":{\"api\":"
    "\"chat_completions\",\"model\":\"gpt-5\"},\"budget\":{\"max_turns\":40,\"max_tokens\":100000,"
    "\"max_cost\":5,\"max_wall_seconds\":3600,\"max_gpu_seconds\":0},\"target\":{\"speedup\":1.5,"
    "\"baseline\":\"best\"}}}\n"
    "{\"type\":\"message\",\"seq\":2,\"turn\":1,\"role\":\"user\",\"content\":\"Make relu "
    "faster.\\nHere is the module.\"}\n"
    "{\"type\":\"request\",\"seq\":3,\"turn\":1,\"attempt\":1,\"url\":\"https://api.example/v1/"
    "chat/completions\",\"body\":{\"model\":\"gpt-5\"}}\n"
    "{\"type\":\"stream\",\"seq\":4,\"turn\":1,\"attempt\":1,\"event\":\"message\",\"data\":\"x\"}"
    "\n"
    "{\"type\":\"reply\",\"seq\":5,\"turn\":1,\"message\":{\"content\":\"Trying a Triton "
    "kernel.\",\"reasoning\":\"Memory bound.\\nVectorize.\",\"tool_calls\":[{\"id\":\"c1\","
    "\"name\":\"evaluate\",\"arguments\":\"{}\"}]},\"usage\":{\"input_tokens\":1234,"
    "\"output_tokens\":567,\"cached_tokens\":0},\"cost\":0.0123,\"finish\":\"tool_calls\","
    "\"seconds\":12.3,\"attempts\":1}\n"
    "{\"type\":\"tool_call\",\"seq\":6,\"turn\":1,\"id\":\"c1\",\"name\":\"evaluate\","
    "\"arguments\":\"{\\\"source\\\":\\\"import triton\\\\nx = 1\\\\ny = 2\\\\n\\\","
    "\\\"note\\\":\\\"vectorized\\\",\\\"block\\\":256}\"}\n"
    "{\"type\":\"verdict\",\"seq\":7,\"turn\":1,\"variant\":\"v1\",\"purpose\":\"evaluate\","
    "\"status\":\"correct\",\"reason\":null,\"speedup_vs_eager\":1.23,\"speedup_vs_compile\":0.98,"
    "\"candidate_ms\":0.1234}\n"
    "{\"type\":\"commit\",\"seq\":8,\"turn\":1,\"variant\":\"v1\",\"commit\":"
    "\"3f2a1b0c9d8e7f6a5b4c\",\"branch\":\"runs/20261122-061502-3f2a\"}\n"
    "{\"type\":\"best\",\"seq\":9,\"turn\":1,\"variant\":\"v1\",\"speedup\":1.23,\"baseline\":"
    "\"best\",\"previous\":null}\n"
    "{\"type\":\"tool_result\",\"seq\":10,\"turn\":1,\"id\":\"c1\",\"name\":\"evaluate\","
    "\"is_error\":false,\"content\":\"v1: correct, 1.23x\\nsecond line\",\"seconds\":25.6}\n"
    "{\"type\":\"turn_end\",\"seq\":11,\"turn\":1,\"totals\":{\"turns\":1,\"input_tokens\":1234,"
    "\"output_tokens\":567,\"cost\":0.0123,\"wall_seconds\":38,\"gpu_seconds\":0},\"limits\":"
    "{\"max_turns\":40,\"max_tokens\":100000,\"max_cost\":5,\"max_wall_seconds\":3600,"
    "\"max_gpu_seconds\":0},\"best\":{\"variant\":\"v1\",\"speedup\":1.23}}\n"
    "{\"type\":\"retry\",\"seq\":12,\"turn\":2,\"attempt\":1,\"status\":429,\"failure\":\"http\","
    "\"reason\":\"429 rate limited\",\"delay_ms\":2000}\n"
    "{\"type\":\"tool_result\",\"seq\":13,\"turn\":2,\"name\":\"evaluate\",\"is_error\":true,"
    "\"content\":\"compile error: line 3\\ndetails\",\"seconds\":0.4}\n"
    "{\"type\":\"llm_error\",\"seq\":14,\"turn\":3,\"failure\":\"authentication\","
    "\"http_status\":401,\"message\":\"the key was refused\"}\n"
    "{\"type\":\"something_new\",\"seq\":15,\"turn\":3}\n"
    "{\"type\":\"stop\",\"seq\":16,\"reason\":\"target_reached\",\"detail\":\"v3 2.10x\"}\n"
    "{\"type\":\"final\",\"seq\":17,\"variant\":\"v3\",\"path\":\"kagent-runs/relu/r/best.py\","
    "\"confirmed\":true,\"confirmation\":{\"status\":\"correct\",\"speedup\":2.05},\"summary\":"
    "\"Vectorized.\",\"totals\":{\"turns\":3,\"input_tokens\":12000,\"output_tokens\":400,"
    "\"cost\":0.31,\"wall_seconds\":130,\"gpu_seconds\":4.5}}\n";

/* Feeds every line of records to view. */
static void
feed(struct kagent_terminal_view *view, const char *records)
{
	const char *line = records;

	while (*line != '\0') {
		const char *end = strchr(line, '\n');
		json_error_t error;
		json_t *record = json_loadb(line, (size_t)(end - line), JSON_DECODE_ANY, &error);

		if (record == NULL)
			fprintf(stderr, "bad test record: %s\n", error.text);
		CHECK(record != NULL);
		kagent_terminal_view_record(view, record);
		json_decref(record);
		line = end + 1;
	}
}

/* Renders records into a string (not a terminal). */
static char *
render(const char *records, int live, int verbose)
{
	struct kagent_terminal_view_options options = {.live = live, .verbose = verbose};
	char *text = NULL;
	size_t size = 0;
	FILE *stream = open_memstream(&text, &size);
	struct kagent_terminal_view *view;

	CHECK(stream != NULL);
	view = kagent_terminal_view_create(stream, &options);
	feed(view, records);
	kagent_terminal_view_finish(view);
	kagent_terminal_view_free(view);
	CHECK_INT(fclose(stream), 0);
	return text;
}

/* Checks that text holds line as a whole line. */
static void
check_line(const char *text, const char *line)
{
	char *framed = kagent_asprintf("\n%s\n", line);
	char *framed_text = kagent_asprintf("\n%s", text);

	if (strstr(framed_text, framed) == NULL)
		fprintf(stderr, "output:\n%s\n", text);
	CHECK_CONTAINS(framed_text, framed);
	free(framed);
	free(framed_text);
}

static void
test_run_lines(void)
{
	char *text = render(run_records, 0, 0);

	check_line(text, "run 20261122-061502-3f2a: relu (problem.py), model gpt-5 via "
			 "chat_completions, target 1.50x vs best of eager and compile");
	check_line(text, "turn 1: 1.2k in / 567 out tokens, $0.0123, 12.3 s; calls evaluate");
	check_line(text,
		   "turn 1: call evaluate {source: 3 lines, note: \"vectorized\", block: 256}");
	check_line(text, "turn 1: evaluate v1 -> correct, 1.23x eager, 0.98x compile (0.1234 ms)");
	check_line(text, "turn 1: commit v1 3f2a1b0 on runs/20261122-061502-3f2a");
	check_line(text, "turn 1: best v1 1.23x (was none)");
	check_line(text, "turn 1: evaluate returned in 25.6 s: v1: correct, 1.23x...");
	check_line(text, "turn 1 done: best 1.23x (v1); budget: turns 1/40, tokens 1.8k/100k, "
			 "$0.01/$5.00, 38s/60m");
	check_line(text, "turn 2: retry 1 after 429 rate limited: waiting 2.0 s");
	check_line(text, "turn 2: evaluate failed in 0.4 s: compile error: line 3...");
	check_line(text, "turn 3: model error (authentication, HTTP 401): the key was refused");
	check_line(text, "stop: target reached (v3 2.10x)");
	check_line(text, "final: v3 confirmed on unseen seeds, 2.05x; best kernel: "
			 "kagent-runs/relu/r/best.py");
	check_line(text, "totals: 3 turns, 12k tokens, $0.31, 2m10s, gpu 4.5s");
	/* message, request and stream say nothing unless verbose; unknown types are ignored. */
	CHECK(strstr(text, "Make relu") == NULL);
	CHECK(strstr(text, "request") == NULL);
	CHECK(strstr(text, "Memory bound") == NULL);
	CHECK(strstr(text, "second line") == NULL);
	CHECK(strstr(text, "something_new") == NULL);
	CHECK(strstr(text, "Vectorized.") == NULL);
	/* Not a terminal: no escape sequences even with live asked. */
	CHECK(strchr(text, '\033') == NULL);
	CHECK(strchr(text, '\r') == NULL);
	free(text);
}

static void
test_live_off_without_terminal(void)
{
	char *plain = render(run_records, 0, 0);
	char *live = render(run_records, 1, 0);

	CHECK_STRING(live, plain);
	free(plain);
	free(live);
}

static void
test_verbose(void)
{
	char *text = render(run_records, 0, 1);

	check_line(text, "turn 1: message to the model:");
	check_line(text, "  Make relu faster.");
	check_line(text, "  Here is the module.");
	check_line(text, "turn 1: request, attempt 1 to https://api.example/v1/chat/completions, "
			 "0.0 kB");
	check_line(text, "  reasoning:");
	check_line(text, "    Memory bound.");
	check_line(text, "    Vectorize.");
	check_line(text, "  text:");
	check_line(text, "    Trying a Triton kernel.");
	check_line(text, "  (1 stream events)");
	check_line(text, "turn 1: evaluate returned in 25.6 s:");
	check_line(text, "  v1: correct, 1.23x");
	check_line(text, "  second line");
	check_line(text, "  summary:");
	check_line(text, "    Vectorized.");
	free(text);
}

static void
test_missing_and_mistyped_fields(void)
{
	static const char *const types[] = {
	    "run_start",   "message",	"request",   "stream",	"retry",
	    "reply",	   "llm_error", "tool_call", "verdict", "commit",
	    "tool_result", "best",	"turn_end",  "stop",	"final",
	};
	char *records = kagent_strdup(""), *text, *next;

	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		/* Bare, then with every field of the wrong type. */
		next = kagent_asprintf(
		    "%s{\"type\":\"%s\"}\n{\"type\":\"%s\",\"turn\":\"x\",\"config\":3,"
		    "\"usage\":[],\"message\":7,\"arguments\":5,\"totals\":\"t\",\"limits\":[1],"
		    "\"best\":2,\"confirmation\":1,\"content\":{},\"name\":{},\"variant\":3,"
		    "\"speedup\":\"x\","
		    "\"attempt\":\"1\",\"body\":null,\"reason\":[],\"detail\":{},\"path\":1}\n",
		    records, types[i], types[i]);
		free(records);
		records = next;
	}
	next = kagent_asprintf("%s{\"no_type\":1}\n{\"type\":5}\n[1,2]\n\"text\"\n", records);
	free(records);
	records = next;
	text = render(records, 1, 1);
	check_line(text, "run (no id)");
	check_line(text, "0 in / 0 out tokens; no tool call");
	check_line(text, "call ?");
	check_line(text, "evaluate ? -> no status");
	check_line(text, "commit ?");
	check_line(text, "best ? (was none)");
	check_line(text, "tool returned");
	check_line(text, "retry 1 after a failure: waiting 0.0 s");
	check_line(text, "model error (unknown)");
	check_line(text, "turn 0 done: best none yet; budget: turns 0, tokens 0, $0.00, 0s");
	check_line(text, "stop: unknown reason");
	check_line(text, "final: no correct variant");
	free(text);
	free(records);
	/* Not even an object. */
	{
		struct kagent_terminal_view_options options = {.live = 0, .verbose = 1};
		struct kagent_terminal_view *view = kagent_terminal_view_create(stdout, &options);
		json_t *array = json_array();

		kagent_terminal_view_record(view, array);
		kagent_terminal_view_record(view, NULL);
		kagent_terminal_view_finish(view);
		kagent_terminal_view_free(view);
		json_decref(array);
	}
}

static void
test_numbers_and_arguments(void)
{
	char *text = render(
	    "{\"type\":\"reply\",\"turn\":1,\"usage\":{\"input_tokens\":999,\"output_tokens\":"
	    "12345}}\n"
	    "{\"type\":\"reply\",\"turn\":1,\"usage\":{\"input_tokens\":1234567,\"output_tokens\":"
	    "45000000},\"finish\":\"length\"}\n"
	    "{\"type\":\"tool_call\",\"turn\":2,\"name\":\"commit\",\"arguments\":\"{"
	    "\\\"source\\\":"
	    "\\\"\\\",\\\"list\\\":[1,2],\\\"object\\\":{\\\"a\\\":1},\\\"flag\\\":true}\"}\n"
	    "{\"type\":\"tool_call\",\"turn\":2,\"name\":\"profile\",\"arguments\":\"{\\\"sou\"}\n"
	    "{\"type\":\"tool_call\",\"turn\":2,\"name\":\"diff\",\"arguments\":{\"source\":"
	    "\"a\\nb\"}}\n"
	    "{\"type\":\"turn_end\",\"turn\":40,\"totals\":{\"turns\":40,\"input_tokens\":5000000,"
	    "\"output_tokens\":0,\"cost\":12.5,\"wall_seconds\":7260,\"gpu_seconds\":59.6},"
	    "\"limits\":{\"max_turns\":0,\"max_tokens\":0,\"max_cost\":0,\"max_wall_seconds\":6000,"
	    "\"max_gpu_seconds\":600},\"best\":null}\n"
	    "{\"type\":\"verdict\",\"turn\":3,\"variant\":\"v4\",\"purpose\":\"evaluate\","
	    "\"status\":"
	    "\"incorrect\",\"reason\":\"output[0] mismatches\\nmore\",\"speedup_vs_eager\":3}\n"
	    "{\"type\":\"best\",\"turn\":3,\"variant\":\"v4\",\"speedup\":1.5,\"baseline\":"
	    "\"eager\","
	    "\"previous\":1.25}\n"
	    "{\"type\":\"final\",\"variant\":\"v4\",\"path\":\"p.py\",\"confirmed\":false,"
	    "\"confirmation\":{\"status\":\"incorrect\",\"reason\":\"seed 9 differs\"}}\n",
	    0, 0);

	check_line(text, "turn 1: 999 in / 12k out tokens; no tool call");
	check_line(text,
		   "turn 1: 1.2M in / 45M out tokens; no tool call (cut at the output limit)");
	check_line(text, "turn 2: call commit {source: 0 lines, list: [2 items], object: {1 key}, "
			 "flag: true}");
	check_line(text, "turn 2: call profile (arguments that are not JSON: {\"sou)");
	check_line(text, "turn 2: call diff {source: 2 lines}");
	check_line(text, "turn 40 done: best none yet; budget: turns 40, tokens 5.0M, $12.50, "
			 "2h01m/1h40m, gpu 1m/10m");
	check_line(text, "turn 3: evaluate v4 -> incorrect: output[0] mismatches...");
	check_line(text, "turn 3: best v4 1.50x vs eager (was 1.25x)");
	check_line(text,
		   "final: v4 not confirmed on unseen seeds (incorrect: seed 9 differs); best "
		   "kernel: p.py");
	free(text);
}

static void
test_control_characters_replaced(void)
{
	char *text =
	    render("{\"type\":\"tool_result\",\"turn\":1,\"name\":\"evaluate\",\"content\":"
		   "\"\\u001b[2Jcleared\\u0007 \\r\\u007f\\u009b1m\\u00e9\"}\n"
		   "{\"type\":\"reply\",\"turn\":1,\"message\":{\"content\":\"a\\u001b]0;"
		   "title\\u0007b\"}}\n",
		   0, 1);

	CHECK(strchr(text, '\033') == NULL);
	CHECK(strchr(text, '\a') == NULL);
	CHECK(strchr(text, '\r') == NULL);
	check_line(text, "  ?[2Jcleared? ???1m\xc3\xa9");
	check_line(text, "    a?]0;title?b");
	free(text);
}

/* Reads what the terminal received until it has been quiet for a moment. */
static char *
read_terminal(int master)
{
	char *text = kagent_strdup(""), chunk[4096];
	struct pollfd poll_fd = {.fd = master, .events = POLLIN};

	while (poll(&poll_fd, 1, 200) > 0) {
		ssize_t got = read(master, chunk, sizeof chunk - 1);
		char *next;

		if (got <= 0)
			break;
		chunk[got] = '\0';
		next = kagent_asprintf("%s%s", text, chunk);
		free(text);
		text = next;
	}
	return text;
}

/* Renders records onto a pseudo-terminal columns wide; returns what it showed. */
static char *
render_on_terminal(const char *records, unsigned short columns)
{
	struct kagent_terminal_view_options options = {.live = 1, .verbose = 0};
	struct winsize size = {.ws_row = 24, .ws_col = columns};
	struct kagent_terminal_view *view;
	struct termios raw;
	int master, slave;
	FILE *stream;
	char *text;

	master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
		kagent_test_skip("no pseudo-terminals here");
	slave = open(ptsname(master), O_RDWR | O_NOCTTY);
	CHECK(slave >= 0);
	CHECK_INT(tcgetattr(slave, &raw), 0);
	cfmakeraw(&raw); /* no \n to \r\n translation */
	CHECK_INT(tcsetattr(slave, TCSANOW, &raw), 0);
	CHECK_INT(ioctl(master, TIOCSWINSZ, &size), 0);
	stream = fdopen(slave, "w");
	CHECK(stream != NULL);
	view = kagent_terminal_view_create(stream, &options);
	feed(view, records);
	kagent_terminal_view_finish(view);
	kagent_terminal_view_free(view);
	CHECK_INT(fclose(stream), 0);
	text = read_terminal(master);
	close(master);
	return text;
}

static void
test_live_status_line(void)
{
	static const char records[] =
	    "{\"type\":\"best\",\"turn\":3,\"variant\":\"v1\",\"speedup\":1.23,\"previous\":null}\n"
	    "{\"type\":\"turn_end\",\"turn\":3,\"totals\":{\"turns\":3,\"input_tokens\":11000,"
	    "\"output_tokens\":1000,\"cost\":0.31,\"wall_seconds\":1800,\"gpu_seconds\":0},"
	    "\"limits\":{\"max_turns\":40,\"max_tokens\":100000,\"max_cost\":5,"
	    "\"max_wall_seconds\":3600,\"max_gpu_seconds\":0},\"best\":{\"variant\":\"v1\","
	    "\"speedup\":1.23}}\n"
	    "{\"type\":\"stop\",\"reason\":\"budget_turns\"}\n";
	const char *status = "best 1.23x (v1) | turn 3/40 | tokens 12k/100k | $0.31/$5.00 | "
			     "30m/60m | [#####-----]";
	char *text = render_on_terminal(records, 200), *expected;

	/* A line, the status under it; erased, redrawn after each record; erased at the end. */
	expected = kagent_asprintf("turn 3: best v1 1.23x (was none)\n"
				   "best 1.23x (v1) | turn 3 | tokens 0 | $0.00 | 0s"
				   "\r\033[K%s"
				   "\r\033[Kstop: turn budget spent\n%s"
				   "\r\033[K",
				   status, status);
	CHECK_STRING(text, expected);
	/* No "turn 3 done" line: the status line says it. */
	CHECK(strstr(text, "done") == NULL);
	free(expected);
	free(text);
	/* Kept to the terminal's width, so that one \r erases it. */
	text = render_on_terminal(records, 30);
	CHECK_CONTAINS(text, "\r\033[Kbest 1.23x (v1) | turn 3/40 |\r\033[K");
	free(text);
}

static const struct kagent_test tests[] = {
    {"run_lines", test_run_lines},
    {"live_off_without_terminal", test_live_off_without_terminal},
    {"verbose", test_verbose},
    {"missing_and_mistyped_fields", test_missing_and_mistyped_fields},
    {"numbers_and_arguments", test_numbers_and_arguments},
    {"control_characters_replaced", test_control_characters_replaced},
    {"live_status_line", test_live_status_line},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
