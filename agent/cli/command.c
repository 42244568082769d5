/*
 * What every command shares: its option parser, built from the command's table of options, and
 * the texts read from the same table (the synopsis, the usage error's tail, `--help`), and
 * Ctrl-C for the commands that follow something until told to stop.
 */
#include "kagent/cli/command.h"

#include "kagent/base/alloc.h"
#include "kagent/evaluator/verdict.h"
#include "kagent/records/config.h"

#include <stdio.h>
#include <string.h>

#define COMMAND_OPTION_BASE 256 /* getopt's value for option i: base + i, above any letter */
#define COMMAND_HELP_COLUMN 26

static const struct kagent_command_option command__help_option = {
    .name = "help", .letter = 'h', .help = "show this help and exit"};

void
kagent_command_parser_init(struct kagent_command_parser *parser,
			   const struct kagent_command *command)
{
	const struct kagent_command_option *option;
	size_t count = 0, letters = 0;

	memset(parser, 0, sizeof *parser);
	parser->command = command;
	/* A leading ':' makes getopt tell a missing value (':') from an unknown option ('?'). */
	parser->short_options[letters++] = ':';
	parser->short_options[letters++] = 'h';
	for (option = command->options; option->name != NULL || option->letter != 0; option++) {
		int value = COMMAND_OPTION_BASE + (int)(option - command->options);

		if (option->name != NULL)
			parser->long_options[count++] = (struct option){
			    option->name,
			    option->argument != NULL ? required_argument : no_argument, NULL,
			    value};
		if (option->letter != 0) {
			parser->short_options[letters++] = option->letter;
			if (option->argument != NULL)
				parser->short_options[letters++] = ':';
		}
	}
	parser->long_options[count] = (struct option){"help", no_argument, NULL, 'h'};
	optind = 1;
	opterr = 0;
}

int
kagent_command_parser_next(struct kagent_command_parser *parser, int argc, char **argv)
{
	const struct kagent_command_option *option;
	int value = getopt_long(argc, argv, parser->short_options, parser->long_options, NULL);

	switch (value) {
	case -1:
		return KAGENT_COMMAND_END;
	case 'h':
		return KAGENT_COMMAND_HELP;
	case ':':
		return KAGENT_COMMAND_MISSING_VALUE;
	case '?':
		return KAGENT_COMMAND_UNKNOWN;
	default:
		break;
	}
	if (value >= COMMAND_OPTION_BASE)
		return value - COMMAND_OPTION_BASE;
	for (option = parser->command->options; option->name != NULL || option->letter != 0;
	     option++) {
		if (option->letter == value)
			return (int)(option - parser->command->options);
	}
	return KAGENT_COMMAND_UNKNOWN;
}

const struct kagent_command_option *
kagent_command_option_find(const struct kagent_command *command, const char *name)
{
	const struct kagent_command_option *option;

	for (option = command->options; option->name != NULL || option->letter != 0; option++) {
		if (option->name != NULL && strcmp(option->name, name) == 0)
			return option;
	}
	return NULL;
}

const char *
kagent_command_option_help(const struct kagent_command_option *option)
{
	if (option->help != NULL || option->config_key == NULL)
		return option->help;
	return kagent_config_key_help(option->config_key);
}

char *
kagent_command_option_default(const struct kagent_command_option *option)
{
	struct kagent_config config;
	json_t *values, *value;
	char *key, *dot, *text = NULL;

	if (option->default_text != NULL || option->config_key == NULL)
		return option->default_text != NULL ? kagent_strdup(option->default_text) : NULL;
	/* The config's own initial values, so that the help cannot disagree with them. */
	kagent_config_init(&config);
	values = kagent_config_to_json(&config);
	key = kagent_strdup(option->config_key);
	dot = strchr(key, '.');
	if (dot != NULL) {
		*dot = '\0';
		value = json_object_get(json_object_get(values, key), dot + 1);
	} else {
		value = json_object_get(values, key);
	}
	if (json_is_string(value))
		text = kagent_strdup(json_string_value(value));
	else if (json_is_integer(value))
		text = kagent_asprintf("%lld", (long long)json_integer_value(value));
	else if (json_is_real(value))
		text = kagent_asprintf("%g", json_real_value(value));
	else if (json_is_boolean(value))
		text = kagent_strdup(json_is_true(value) ? "true" : "false");
	free(key);
	json_decref(values);
	kagent_config_clear(&config);
	return text;
}

void
kagent_command_print_synopsis(const struct kagent_command *command, FILE *stream)
{
	fprintf(stream, "kagent %s%s%s [OPTIONS]", command->name, command->operands ? " " : "",
		command->operands ? command->operands : "");
}

void
kagent_command_print_usage(const struct kagent_command *command)
{
	fputs("usage: ", stderr);
	kagent_command_print_synopsis(command, stderr);
	fprintf(stderr, "\ntry 'kagent %s --help'\n", command->name);
}

/* "  -o, --output OUT" padded to the help column. */
static void
command__print_option(const struct kagent_command_option *option, FILE *stream)
{
	const char *help = kagent_command_option_help(option);
	char *default_text = kagent_command_option_default(option);
	int width = fprintf(stream, "  ");

	if (option->letter != 0)
		width += fprintf(stream, "-%c%s", option->letter, option->name ? ", " : "");
	else
		width += fprintf(stream, "    ");
	if (option->name != NULL)
		width += fprintf(stream, "--%s", option->name);
	if (option->argument != NULL)
		width += fprintf(stream, " %s", option->argument);
	if (width >= COMMAND_HELP_COLUMN) {
		fputc('\n', stream);
		width = 0;
	}
	fprintf(stream, "%*s%s", COMMAND_HELP_COLUMN - width, "", help != NULL ? help : "");
	if (default_text != NULL)
		fprintf(stream, " (default: %s)", default_text);
	fputc('\n', stream);
	free(default_text);
}

void
kagent_command_print_help(const struct kagent_command *command, FILE *stream)
{
	const struct kagent_command_option *option;

	fputs("usage: ", stream);
	kagent_command_print_synopsis(command, stream);
	fprintf(stream, "\n%s\n\noptions:\n", command->help);
	for (option = command->options; option->name != NULL || option->letter != 0; option++)
		command__print_option(option, stream);
	command__print_option(&command__help_option, stream);
}

static volatile sig_atomic_t command__interrupted;

static void
command__interrupt(int number)
{
	(void)number;
	command__interrupted = 1;
}

const volatile sig_atomic_t *
kagent_command_catch_interrupt(void)
{
	struct sigaction action;

	memset(&action, 0, sizeof action);
	action.sa_handler = command__interrupt;
	sigemptyset(&action.sa_mask);
	sigaction(SIGINT, &action, NULL);
	return &command__interrupted;
}

int
kagent_command_fail(const struct kagent_command *command, int json, const char *kind,
		    const char *message)
{
	fprintf(stderr, "kagent %s: %s\n", command->name, message);
	if (strcmp(kind, "usage") == 0)
		kagent_command_print_usage(command);
	if (json) {
		json_t *object = kagent_verdict_error_json(kind, message);

		json_dumpf(object, stdout, JSON_COMPACT);
		fputc('\n', stdout);
		json_decref(object);
	}
	return KAGENT_COMMAND_EXIT_ERROR;
}
