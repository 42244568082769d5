/*
 * The profile view of a verdict (`kagent profile`): where the GPU time goes in the reference
 * and in the candidate, kernel by kernel, the candidate's position against the memory
 * bound, which kernel to attack first, and each kernel's DRAM and SM throughput. Reads the
 * verdict's reference_kernels, kernels, roofline, timing, counters and reference_counters;
 * anything missing is said, not guessed.
 */
#ifndef KAGENT_PROFILE_H
#define KAGENT_PROFILE_H

#include <jansson.h>
#include <stdio.h>

void kagent_profile_render_text(const json_t *verdict, FILE *stream);
/* The name of the kernel to attack first (the candidate's longest), or NULL. Borrowed. */
const char *kagent_profile_first_target(const json_t *verdict, double *share_out);

#endif
