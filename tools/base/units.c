/* Numbers as a person reads them (see include/kagent/base/units.h). */
#include "kagent/base/units.h"

#include <stdio.h>

/* 567, 1.2k, 12k, 1.2M, 12M. */
void
kagent_units_format_tokens(char *out, size_t size, double tokens)
{
	if (tokens < 1000)
		snprintf(out, size, "%.0f", tokens);
	else if (tokens < 9950)
		snprintf(out, size, "%.1fk", tokens / 1e3);
	else if (tokens < 999500)
		snprintf(out, size, "%.0fk", tokens / 1e3);
	else if (tokens < 9950000)
		snprintf(out, size, "%.1fM", tokens / 1e6);
	else
		snprintf(out, size, "%.0fM", tokens / 1e6);
}

/* 1.9s, 45s, 2m10s, 60m, 1h40m (minutes up to 99 read better than 1h39m). */
void
kagent_units_format_duration(char *out, size_t size, double seconds)
{
	long long whole = seconds > 0 ? (long long)(seconds + 0.5) : 0;

	if (seconds > 0 && seconds < 9.95)
		snprintf(out, size, "%.1fs", seconds);
	else if (whole < 60)
		snprintf(out, size, "%llds", whole);
	else if (whole < 100 * 60 && whole % 60 == 0)
		snprintf(out, size, "%lldm", whole / 60);
	else if (whole < 100 * 60)
		snprintf(out, size, "%lldm%02llds", whole / 60, whole % 60);
	else if (whole / 60 % 60 == 0)
		snprintf(out, size, "%lldh", whole / 3600);
	else
		snprintf(out, size, "%lldh%02lldm", whole / 3600, whole / 60 % 60);
}
