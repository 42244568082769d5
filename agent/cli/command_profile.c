/*
 * `kagent profile PROBLEM CANDIDATE`: an evaluation that also traces the reference's kernels,
 * rendered as where the time goes (tools/evaluator/profile.c); --json prints the verdict with both
 * kernel lists and the roofline.
 */
#include "kagent/cli/command.h"
#include "command_eval.h"
#include "kagent/evaluator/profile.h"

static int
command_profile__handler(int argc, char **argv)
{
	return kagent_command_eval_run(argc, argv, &kagent_command_profile, 1,
				       kagent_profile_render_text);
}

const struct kagent_command kagent_command_profile = {
    .name = "profile",
    .operands = KAGENT_COMMAND_EVAL_OPERANDS,
    .help = "per-kernel GPU time of the reference and the candidate, and what to attack first",
    .options = kagent_command_eval_options,
    .handler = command_profile__handler,
};
