/*
 * Texts made from the command table for the world outside the binary: the bash and zsh
 * completion scripts and the man page. Meson runs `kagent completion bash|zsh` and `kagent man`
 * at build time and installs what they print, so they always match the commands built.
 */
#ifndef KAGENT_COMMAND_REFERENCE_H
#define KAGENT_COMMAND_REFERENCE_H

#include <stdio.h>

/* shell: "bash" or "zsh". Returns 0, or -EINVAL for another shell. */
int kagent_command_reference_completion(const char *shell, FILE *stream);
void kagent_command_reference_man(const char *version, FILE *stream);

#endif
