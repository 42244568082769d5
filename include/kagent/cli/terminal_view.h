/*
 * What a person sees of a run: one line per turn, tool call, verdict, commit,
 * retry and stop, and a final summary with the path of the best kernel. It is
 * driven by trace records (trace.h), so the live view of `kagent optimize` and
 * `kagent trace FILE` render a run the same way. When the stream is a terminal
 * and live is set, a status line at the bottom (best speedup so far and the
 * budget left, as bars) is redrawn in place under the scrolling lines.
 */
#ifndef KAGENT_TERMINAL_VIEW_H
#define KAGENT_TERMINAL_VIEW_H

#include <jansson.h>
#include <stdio.h>

struct kagent_terminal_view_options {
	int live;    /* redraw a status line (only honoured when stream is a terminal) */
	int verbose; /* also print the model's text and tool results in full */
};

struct kagent_terminal_view;

struct kagent_terminal_view *
kagent_terminal_view_create(FILE *stream, const struct kagent_terminal_view_options *options);
/* Renders one trace record; unknown types are ignored (newer traces stay readable). */
void kagent_terminal_view_record(struct kagent_terminal_view *view, const json_t *record);
/* Clears the status line; call before printing anything else to the stream. */
void kagent_terminal_view_finish(struct kagent_terminal_view *view);
void kagent_terminal_view_free(struct kagent_terminal_view *view);

#endif
