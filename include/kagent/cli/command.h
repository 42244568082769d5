/*
 * A command: every `kagent NAME` subcommand is one struct in one file
 * (agent/cli/command_NAME.c), collected in kagent_command_table (command_table.h). Its options
 * are a table too: the option parser, `kagent NAME --help`, the shell completions and the man
 * page all read it, so none of them can drift from what the command accepts.
 */
#ifndef KAGENT_COMMAND_H
#define KAGENT_COMMAND_H

#include <getopt.h>
#include <signal.h>
#include <stdio.h>

/* The most options one command has, --help included. */
#define KAGENT_COMMAND_MAX_OPTIONS 32

struct kagent_command_option {
	const char *name;	  /* long name without "--"; NULL for a short-only option */
	char letter;		  /* short name, or 0 */
	const char *argument;	  /* the value's name in the help; NULL for a switch */
	const char *help;	  /* one line; NULL: the help of config_key */
	const char *default_text; /* NULL: no default worth saying (or config_key's) */
	const char *config_key;	  /* the config key the flag sets (kagent optimize), or NULL */
};

struct kagent_command {
	const char *name;
	const char *operands; /* what follows the name besides options, e.g. "FILE" */
	const char *help;     /* one line */
	/* Ends with a zeroed entry. --help (-h) is added by kagent_command_parser_init. */
	const struct kagent_command_option *options;
	/* argv[0] is the command name. Returns the process exit status. */
	int (*handler)(int argc, char **argv);
};

/* Each defined in its own file. */
extern const struct kagent_command kagent_command_batch;
extern const struct kagent_command kagent_command_cancel;
extern const struct kagent_command kagent_command_daemon;
extern const struct kagent_command kagent_command_eval;
extern const struct kagent_command kagent_command_export;
extern const struct kagent_command kagent_command_gpu;
extern const struct kagent_command kagent_command_model;
extern const struct kagent_command kagent_command_optimize;
extern const struct kagent_command kagent_command_profile;
extern const struct kagent_command kagent_command_replay;
extern const struct kagent_command kagent_command_report;
extern const struct kagent_command kagent_command_status;
extern const struct kagent_command kagent_command_trace;
extern const struct kagent_command kagent_command_verify;
extern const struct kagent_command kagent_command_watch;
extern const struct kagent_command kagent_command_worker;
/* Built only where NVRTC was found (KAGENT_HAVE_NVRTC). */
extern const struct kagent_command kagent_command_compile;

/* What kagent_command_parser_next returns besides an index into the command's options. */
enum {
	KAGENT_COMMAND_END = -1,	   /* no option left: operands start at optind */
	KAGENT_COMMAND_HELP = -2,	   /* --help or -h */
	KAGENT_COMMAND_UNKNOWN = -3,	   /* argv[optind - 1] is no option of the command */
	KAGENT_COMMAND_MISSING_VALUE = -4, /* argv[optind - 1] lacks its value */
};

/* getopt_long's tables, built from the command's options. */
struct kagent_command_parser {
	const struct kagent_command *command;
	struct option long_options[KAGENT_COMMAND_MAX_OPTIONS + 1];
	char short_options[3 * KAGENT_COMMAND_MAX_OPTIONS + 2];
};

void kagent_command_parser_init(struct kagent_command_parser *parser,
				const struct kagent_command *command);
/* The next option as an index into command->options (its value in optarg), or one of the above. */
int kagent_command_parser_next(struct kagent_command_parser *parser, int argc, char **argv);

/* The option named NAME (without "--"), or NULL. */
const struct kagent_command_option *kagent_command_option_find(const struct kagent_command *command,
							       const char *name);
/* The option's one-line help and its default: its own, else its config key's. NULL: none. */
const char *kagent_command_option_help(const struct kagent_command_option *option);
/* The caller frees it. */
char *kagent_command_option_default(const struct kagent_command_option *option);

/* "kagent NAME OPERANDS [OPTIONS]" */
void kagent_command_print_synopsis(const struct kagent_command *command, FILE *stream);
/* A usage error's tail on stderr: the synopsis and where to read more. */
void kagent_command_print_usage(const struct kagent_command *command);

/* The exit status when no result was possible (bad usage, no GPU, a file that cannot be read). */
#define KAGENT_COMMAND_EXIT_ERROR 2
/*
 * A failure that leaves no result: the message on stderr (and the usage line when kind is
 * "usage"), and with --json exactly one error object on stdout. Returns
 * KAGENT_COMMAND_EXIT_ERROR.
 */
int kagent_command_fail(const struct kagent_command *command, int json, const char *kind,
			const char *message);
/*
 * From now on Ctrl-C (SIGINT) sets the flag returned rather than ending the process, for the
 * commands that follow something until told to stop (watch, trace --follow), so that they
 * leave the terminal tidy. A blocking read is not restarted after it (no SA_RESTART).
 */
const volatile sig_atomic_t *kagent_command_catch_interrupt(void);
/* `kagent NAME --help`: the synopsis, what the command does and one line per option. */
void kagent_command_print_help(const struct kagent_command *command, FILE *stream);

#endif
