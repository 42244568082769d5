/*
 * kagent's own tolerance table, keyed by torch dtype name (without "torch.").
 * The judge compares every floating output elementwise (atol + rtol * |ref|)
 * and norm-relatively (||cand - ref|| / ||ref|| <= norm); integer and bool
 * outputs are compared exactly and have no entry.
 */
#ifndef KAGENT_TOLERANCE_H
#define KAGENT_TOLERANCE_H

#include <jansson.h>

struct kagent_tolerance {
	const char *dtype;
	double atol;
	double rtol;
	double norm;
};

/* NULL-terminated by an entry whose dtype is NULL. */
extern const struct kagent_tolerance kagent_tolerance_table[];

/* The entry for a dtype name ("float32"; a "torch." prefix is accepted), or NULL. */
const struct kagent_tolerance *kagent_tolerance_lookup(const char *dtype);
/* The protocol request's "tolerances" object: {"float32": {"atol", "rtol", "norm"}, ...}. New
 * reference; never NULL. */
json_t *kagent_tolerance_table_to_json(void);

#endif
