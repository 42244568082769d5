/* `kagent eval PROBLEM CANDIDATE`: one evaluation, printed as text or as one JSON object. */
#include "kagent/cli/command.h"
#include "kagent/cli/evaluate_command.h"
#include "kagent/evaluator/verdict.h"

static int
eval__handler(int argc, char **argv)
{
	return kagent_evaluate_command_run(argc, argv, &kagent_command_eval, 0,
					   kagent_verdict_render_text);
}

const struct kagent_command kagent_command_eval = {
    .name = "eval",
    .usage = KAGENT_EVALUATE_COMMAND_USAGE,
    .help = "judge a candidate kernel against a problem; exit 0 only when correct",
    .handler = eval__handler,
};
