/*
 * The report of a batch (docs/store.md): one row per problem, taken from its
 * session's result (the `final` trace record, docs/traces.md), and a summary
 * overall and per KernelBench level: the correct rate, fast_p against eager
 * PyTorch and against torch.compile, and the geometric-mean speedups.
 *
 * The definitions (KernelBench's): fast_p is the fraction of all the batch's
 * problems that are correct and faster than p times the baseline, so a problem
 * that failed, was cancelled or has not run counts against it. A correct
 * result that is not credited (the credit rule, docs/verdict.md) counts as
 * correct and never as fast, and stays out of the geometric means, which are
 * taken over the correct credited problems with a measured speedup (null when
 * there are none).
 */
#ifndef KAGENT_REPORT_H
#define KAGENT_REPORT_H

#include <jansson.h>

/*
 * Builds the report of batch, an object as kagent_store_batch_get returns it
 * (its "id" and "sessions" are read). *report_out:
 *   {batch, rows: [{session, problem, level, state, status, correct, credited,
 *                   speedup_vs_eager, speedup_vs_compile, turns, input_tokens,
 *                   output_tokens, tokens, cost, gpu_seconds, wall_seconds,
 *                   gpu_name}],
 *    summary: {overall: GROUP, levels: [GROUP with "level"], gpu_names: [...],
 *              mixed_gpus}}
 * where GROUP is {problems, correct, correct_rate, credited, fast_0_eager,
 * fast_1_eager, fast_2_eager, fast_0_compile, fast_1_compile, fast_2_compile,
 * geomean_eager, geomean_compile}; levels ascend, problems without a level last
 * ("level": null). gpu_name is the GPU model of the daemon that ran the session
 * last (null when unknown, e.g. on the CPU); gpu_names lists the models of the
 * batch once each, and mixed_gpus is true when there are several: speedups
 * measured on different GPUs are then summed up together, and the report says so.
 * Returns 0, or -EINVAL with *cause when batch has no sessions array.
 */
int kagent_report_build(const json_t *batch, json_t **report_out, char **cause);

/* The rows as CSV (a header line, then one line per problem); the caller frees it. */
char *kagent_report_rows_csv(const json_t *report);
/* The summary as CSV: one line overall ("all"), then one per level; the caller frees it. */
char *kagent_report_summary_csv(const json_t *report);

#endif
