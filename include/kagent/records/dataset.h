/*
 * Runs as data (docs/dataset.md): one flat record per evaluated variant, the shape `kagent
 * export` writes as JSONL (and, through pyarrow, Parquet): the problem and its id, the
 * variant's source and parent, the conversation that produced it, the verdict's status,
 * reason, speedups with their intervals, credit and environment, the whole verdict as JSON
 * text, the model and the provider. Every field is always present (null when it does not
 * apply) and has one type, so Hugging Face `datasets` loads the files unchanged.
 */
#ifndef KAGENT_DATASET_H
#define KAGENT_DATASET_H

#include "kagent/records/run_log.h"

#include <jansson.h>

#define KAGENT_DATASET_SCHEMA "kagent.dataset/1"

/* Which records --only keeps. */
enum kagent_dataset_filter {
	KAGENT_DATASET_ALL,
	KAGENT_DATASET_CORRECT,	 /* status correct */
	KAGENT_DATASET_CREDITED, /* correct and credited (docs/verdict.md's credit rule) */
};

/* "correct" or "credited"; -EINVAL for another name. */
int kagent_dataset_filter_from_name(const char *name);
/* The record of one variant of log; a new reference. */
json_t *kagent_dataset_record(const struct kagent_run_log *log,
			      const struct kagent_run_variant *variant);
/* 1 when the filter keeps the record. */
int kagent_dataset_keep(enum kagent_dataset_filter filter, const json_t *record);

#endif
