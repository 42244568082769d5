/*
 * The flags of `kagent optimize` that a batch of kagentd takes too (`kagent batch`): the model,
 * the target and the budgets. One list, so that both commands spell, explain and check them
 * alike. Each sets its config key (agent/records/config.c), whose help the flag shows; the
 * daemon's settings key is the flag's name with '_' for '-' (docs/daemon-api.md).
 */
#ifndef KAGENT_COMMAND_OPTIMIZE_H
#define KAGENT_COMMAND_OPTIMIZE_H

/* Entries of a struct kagent_command_option table; DEFAULT is each one's default_text (NULL:
 * the config key's own default). */
/* clang-format off */
#define KAGENT_COMMAND_OPTIMIZE_SETTINGS(DEFAULT)                                                  \
	{"base-url", 0, "URL", NULL, DEFAULT, "provider.base_url"},                                \
	{"model", 0, "NAME", NULL, DEFAULT, "provider.model"},                                     \
	{"api", 0, "chat_completions|responses|anthropic", NULL, DEFAULT, "provider.api"},          \
	{"target", 0, "SPEEDUP", NULL, DEFAULT, "target.speedup"},                                 \
	{"against", 0, "eager|compile|best", NULL, DEFAULT, "target.baseline"},                    \
	{"max-turns", 0, "N", NULL, DEFAULT, "budget.max_turns"},                                  \
	{"max-tokens", 0, "N", NULL, DEFAULT, "budget.max_tokens"},                                \
	{"max-cost", 0, "USD", NULL, DEFAULT, "budget.max_cost"},                                  \
	{"max-seconds", 0, "S", NULL, DEFAULT, "budget.max_wall_seconds"},                         \
	{"max-gpu-seconds", 0, "S", NULL, DEFAULT, "budget.max_gpu_seconds"},                      \
	{"speedup-basis", 0, "device|wall", NULL, DEFAULT, "evaluation.speedup_basis"}
/* clang-format on */

#endif
