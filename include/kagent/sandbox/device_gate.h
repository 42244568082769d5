/*
 * The device gate of a candidate's first trial call (docs/worker-protocol.md, "The device
 * gate"): evaluations on one GPU share a timing lock, and the judge holds it shared while the
 * candidate's trials run on the device. The first call compiles the candidate's kernels (Triton's
 * JIT, seconds of CPU), so the judge lets it run without the lock: this library, in the
 * candidate's process, watches the CUDA runtime and driver API through a CUPTI callback and, at
 * the first call that puts work on the device, asks the judge for the lock over a descriptor of
 * its own and waits until the judge says it holds it. Compiling then holds nothing, and an
 * evaluation being timed beside it waits only for device work. Part of libkagent-trace.so.
 */
#ifndef KAGENT_DEVICE_GATE_H
#define KAGENT_DEVICE_GATE_H

#include <stddef.h>

/*
 * Subscribes to CUPTI's API callbacks: from now on, the first API call of this process that
 * puts work on the device writes one byte 'L' to fd and waits for the judge's 'G' before it
 * goes on (later calls pass). Returns 0 or a negative errno with a message (CUPTI refused:
 * another subscriber, no driver).
 */
int kagent_device_gate_arm(int fd, char *cause, size_t cause_size);
/* Ends the subscription (after the call the gate was armed for). Returns whether the judge was
 * asked: 1 when it was, 0 when no device work came, -EINVAL when the gate was not armed. */
int kagent_device_gate_disarm(void);
/* Whether an API function of this name puts work on the device: launches (kernels, graphs),
 * copies and sets, in the runtime's (cuda...) and the driver's (cu...) spelling. */
int kagent_device_gate_is_device_work(const char *function_name);

#endif
