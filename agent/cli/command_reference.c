/*
 * The completion scripts and the man page, written from kagent_command_table and each command's
 * options (command.h), the same tables the parser and `--help` read.
 */
#include "kagent/cli/command_reference.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define COMMAND_REFERENCE_FOREACH_OPTION(option, command)                                          \
	for ((option) = (command)->options; (option)->name != NULL || (option)->letter != 0;       \
	     (option)++)

/* The words a value may take ("cuda|cpu"), space-separated; NULL when it is free text. */
static char *
command_reference__choices(const struct kagent_command_option *option)
{
	char *words, *bar;

	if (option->argument == NULL || strchr(option->argument, '|') == NULL)
		return NULL;
	words = kagent_strdup(option->argument);
	while ((bar = strchr(words, '|')) != NULL)
		*bar = ' ';
	return words;
}

/* "--name" or "-x" (the long name when there is one). */
static void
command_reference__print_flag(const struct kagent_command_option *option, FILE *stream)
{
	if (option->name != NULL)
		fprintf(stream, "--%s", option->name);
	else
		fprintf(stream, "-%c", option->letter);
}

static void
command_reference__bash(FILE *stream)
{
	const struct kagent_command *const *command;
	const struct kagent_command_option *option;
	char *choices;

	fputs("# bash completion for kagent, written by `kagent completion bash` from its command\n"
	      "# table. Values without a fixed list, and operands, complete as file names.\n"
	      "_kagent()\n{\n"
	      "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
	      "\tlocal command= i\n"
	      "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	      "\t\tcase ${COMP_WORDS[i]} in -*) ;; *) command=${COMP_WORDS[i]}; break ;; esac\n"
	      "\tdone\n"
	      "\tCOMPREPLY=()\n"
	      "\tcase $command in\n"
	      "\t'')\n"
	      "\t\tif [[ $cur == -* ]]; then\n"
	      "\t\t\tCOMPREPLY=($(compgen -W '-v --help --version' -- \"$cur\"))\n"
	      "\t\telse\n"
	      "\t\t\tCOMPREPLY=($(compgen -W '",
	      stream);
	for (command = kagent_command_table; *command != NULL; command++)
		fprintf(stream, "%s ", (*command)->name);
	fputs("help version' -- \"$cur\"))\n\t\tfi ;;\n\thelp)\n\t\tCOMPREPLY=($(compgen -W '",
	      stream);
	for (command = kagent_command_table; *command != NULL; command++)
		fprintf(stream, "%s%s", command == kagent_command_table ? "" : " ",
			(*command)->name);
	fputs("' -- \"$cur\")) ;;\n", stream);
	for (command = kagent_command_table; *command != NULL; command++) {
		fprintf(stream, "\t%s)\n\t\tcase $prev in\n", (*command)->name);
		COMMAND_REFERENCE_FOREACH_OPTION(option, *command)
		{
			if ((choices = command_reference__choices(option)) == NULL)
				continue;
			fputs("\t\t", stream);
			command_reference__print_flag(option, stream);
			fprintf(stream, ") COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return ;;\n",
				choices);
			free(choices);
		}
		fputs("\t\tesac\n\t\t[[ $cur == -* ]] && COMPREPLY=($(compgen -W '--help", stream);
		COMMAND_REFERENCE_FOREACH_OPTION(option, *command)
		{
			fputc(' ', stream);
			command_reference__print_flag(option, stream);
		}
		fputs("' -- \"$cur\")) ;;\n", stream);
	}
	fputs("\tesac\n}\ncomplete -o default -F _kagent kagent\n", stream);
}

/* Text inside a single-quoted zsh _arguments spec: no quote, and brackets escaped. */
static void
command_reference__zsh_text(const char *text, FILE *stream)
{
	for (; text != NULL && *text != '\0'; text++) {
		if (*text == '\'')
			fputs("'\\''", stream);
		else if (*text == '[' || *text == ']')
			fprintf(stream, "\\%c", *text);
		else
			fputc(*text, stream);
	}
}

static void
command_reference__zsh(FILE *stream)
{
	const struct kagent_command *const *command;
	const struct kagent_command_option *option;
	char *choices;

	fputs("#compdef kagent\n"
	      "# zsh completion for kagent, written by `kagent completion zsh` from its command "
	      "table.\n"
	      "local -a commands\ncommands=(\n",
	      stream);
	for (command = kagent_command_table; *command != NULL; command++) {
		fprintf(stream, "\t'%s:", (*command)->name);
		command_reference__zsh_text((*command)->help, stream);
		fputs("'\n", stream);
	}
	fputs("\t'help:show the commands, or one command'\\''s options'\n"
	      "\t'version:print the version'\n)\n"
	      "if (( CURRENT == 2 )); then\n\t_describe command commands\n\treturn\nfi\n"
	      "case $words[2] in\nhelp)\n\t_describe command commands ;;\n",
	      stream);
	for (command = kagent_command_table; *command != NULL; command++) {
		fprintf(stream,
			"%s)\n\t_arguments \\\n\t\t'(- *)'{-h,--help}'[show the help]' \\\n",
			(*command)->name);
		COMMAND_REFERENCE_FOREACH_OPTION(option, *command)
		{
			fputs("\t\t", stream);
			if (option->name == NULL) /* -D, -U, -I: repeatable, the value attached */
				fprintf(stream, "'*-%c+", option->letter);
			else if (option->letter != 0) /* -o, --output: either, not both */
				fprintf(stream, "'(-%c --%s)'{-%c%s,--%s%s}'", option->letter,
					option->name, option->letter, option->argument ? "+" : "",
					option->name, option->argument ? "=" : "");
			else
				fprintf(stream, "'%s--%s%s",
					strstr(kagent_command_option_help(option), "repeatable") !=
						NULL
					    ? "*"
					    : "",
					option->name, option->argument ? "=" : "");
			fputc('[', stream);
			command_reference__zsh_text(kagent_command_option_help(option), stream);
			fputc(']', stream);
			if (option->argument != NULL) {
				fputc(':', stream);
				command_reference__zsh_text(option->argument, stream);
				choices = command_reference__choices(option);
				fprintf(stream, ":%s%s%s", choices ? "(" : "_files",
					choices ? choices : "", choices ? ")" : "");
				free(choices);
			}
			fputs("' \\\n", stream);
		}
		fputs("\t\t'*:file:_files' ;;\n", stream);
	}
	fputs("esac\n", stream);
}

int
kagent_command_reference_completion(const char *shell, FILE *stream)
{
	if (strcmp(shell, "bash") == 0)
		command_reference__bash(stream);
	else if (strcmp(shell, "zsh") == 0)
		command_reference__zsh(stream);
	else
		return -EINVAL;
	return 0;
}

/* Text in roff: backslashes and hyphens escaped, no control character at a line's start. */
static void
command_reference__roff(const char *text, FILE *stream)
{
	if (text != NULL && (*text == '.' || *text == '\''))
		fputs("\\&", stream);
	for (; text != NULL && *text != '\0'; text++) {
		if (*text == '\\')
			fputs("\\e", stream);
		else if (*text == '-')
			fputs("\\-", stream);
		else
			fputc(*text, stream);
	}
}

void
kagent_command_reference_man(const char *version, FILE *stream)
{
	const struct kagent_command *const *command;
	const struct kagent_command_option *option;
	char *default_text;

	fprintf(stream, ".TH KAGENT 1 \"\" \"kagent %s\" \"User Commands\"\n", version);
	fputs(".SH NAME\nkagent \\- an autonomous coding agent for GPU kernels\n"
	      ".SH SYNOPSIS\n.B kagent\n[\\fB\\-v\\fR] \\fICOMMAND\\fR [\\fIARGUMENTS\\fR]\n"
	      ".br\n.B kagent help\n[\\fICOMMAND\\fR]\n"
	      ".SH DESCRIPTION\n"
	      "Each command below takes the options listed under it, and \\fB\\-h\\fR, "
	      "\\fB\\-\\-help\\fR to print them.\n"
	      "\\fB\\-v\\fR before the command logs more.\n"
	      ".SH COMMANDS\n",
	      stream);
	for (command = kagent_command_table; *command != NULL; command++) {
		fprintf(stream, ".SS \"%s\"\n.B kagent %s\n", (*command)->name, (*command)->name);
		if ((*command)->operands != NULL) {
			fputs(".I ", stream);
			command_reference__roff((*command)->operands, stream);
			fputc('\n', stream);
		}
		fputs("[\\fIOPTIONS\\fR]\n.PP\n", stream);
		command_reference__roff((*command)->help, stream);
		fputc('\n', stream);
		COMMAND_REFERENCE_FOREACH_OPTION(option, *command)
		{
			fputs(".TP\n", stream);
			if (option->letter != 0)
				fprintf(stream, "\\fB\\-%c\\fR%s", option->letter,
					option->name ? ", " : "");
			if (option->name != NULL) {
				fputs("\\fB\\-\\-", stream);
				command_reference__roff(option->name, stream);
				fputs("\\fR", stream);
			}
			if (option->argument != NULL) {
				fputs(" \\fI", stream);
				command_reference__roff(option->argument, stream);
				fputs("\\fR", stream);
			}
			fputc('\n', stream);
			command_reference__roff(kagent_command_option_help(option), stream);
			default_text = kagent_command_option_default(option);
			if (default_text != NULL) {
				fputs(" (default: ", stream);
				command_reference__roff(default_text, stream);
				fputc(')', stream);
			}
			fputc('\n', stream);
			free(default_text);
		}
	}
	fputs(".SH EXIT STATUS\n"
	      "0: success (a correct verdict, a reached target); 1: a verdict or run that fell "
	      "short; 2: a usage error or a failure to run.\n"
	      ".SH SEE ALSO\n"
	      "docs/user\\-guide.md in the kagent sources.\n",
	      stream);
}
