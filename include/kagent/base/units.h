/*
 * Numbers as a person reads them at a glance, the same in the terminal view and in the budget
 * line the model sees: token counts (1.2k, 12M) and durations (1.9s, 2m10s, 1h40m).
 */
#ifndef KAGENT_UNITS_H
#define KAGENT_UNITS_H

#include <stddef.h>

/* 567, 1.2k, 12k, 1.2M, 12M. */
void kagent_units_format_tokens(char *out, size_t size, double tokens);
/* 1.9s, 45s, 2m10s, 60m, 1h40m (minutes up to 99 read better than 1h39m). */
void kagent_units_format_duration(char *out, size_t size, double seconds);

#endif
