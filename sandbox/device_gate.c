/*
 * The device gate of a candidate's first trial call (see include/kagent/sandbox/device_gate.h):
 * a CUPTI API callback that asks the judge for the timing lock at the first call that puts
 * work on the device. The callback runs on whichever thread makes the call, so the request is
 * made once under a mutex and the answer is waited for there.
 */
#include "ctypes_buffer.h"
#include "kagent/sandbox/device_gate.h"

#include <cupti.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t device_gate__lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_SubscriberHandle device_gate__subscriber;
static int device_gate__fd = -1;
static atomic_int device_gate__asked;

/* The API families that queue work on a stream (or run it at once): everything else (memory
 * allocation, module loading, queries, events) leaves the device's engines alone. */
static const char *const device_gate__work_prefixes[] = {
    "cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaGraphLaunch",
    "cuLaunch",	  "cuMemcpy",	"cuMemset",   "cuGraphLaunch",
};

int
kagent_device_gate_is_device_work(const char *function_name)
{
	size_t index;

	if (function_name == NULL)
		return 0;
	for (index = 0;
	     index < sizeof device_gate__work_prefixes / sizeof device_gate__work_prefixes[0];
	     index++) {
		const char *prefix = device_gate__work_prefixes[index];

		if (strncmp(function_name, prefix, strlen(prefix)) == 0)
			return 1;
	}
	return 0;
}

/* One byte each way; a judge that is gone lets the call go on (the evaluation is ending). */
static void
device_gate__ask(void)
{
	char request = 'L', answer = 0;
	ssize_t done;

	do
		done = write(device_gate__fd, &request, 1);
	while (done < 0 && errno == EINTR);
	if (done != 1)
		return;
	do
		done = read(device_gate__fd, &answer, 1);
	while (done < 0 && errno == EINTR);
}

static void CUPTIAPI
device_gate__callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId callback,
		      const void *data)
{
	const CUpti_CallbackData *call = data;

	(void)userdata;
	(void)callback;
	if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API)
		return;
	if (call->callbackSite != CUPTI_API_ENTER || atomic_load(&device_gate__asked))
		return;
	if (!kagent_device_gate_is_device_work(call->functionName))
		return;
	pthread_mutex_lock(&device_gate__lock);
	if (!atomic_load(&device_gate__asked)) {
		device_gate__ask();
		atomic_store(&device_gate__asked, 1);
	}
	pthread_mutex_unlock(&device_gate__lock);
}

static int
device_gate__fail(char *cause, size_t cause_size, const char *call, CUptiResult result)
{
	const char *name = NULL;

	cuptiGetResultString(result, &name);
	return kagent_ctypes_buffer_error(cause, cause_size, -EIO, "%s failed: %s", call,
					  name != NULL ? name : "unknown CUPTI error");
}

int
kagent_device_gate_arm(int fd, char *cause, size_t cause_size)
{
	static const CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_RUNTIME_API,
						       CUPTI_CB_DOMAIN_DRIVER_API};
	CUptiResult result;
	size_t index;

	if (device_gate__fd >= 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -EBUSY,
						  "the device gate is already armed");
	if (fd < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -EBADF,
						  "the device gate has no descriptor");
	result = cuptiSubscribe(&device_gate__subscriber, device_gate__callback, NULL);
	if (result != CUPTI_SUCCESS)
		return device_gate__fail(cause, cause_size, "cuptiSubscribe", result);
	for (index = 0; index < sizeof domains / sizeof domains[0]; index++) {
		result = cuptiEnableDomain(1, device_gate__subscriber, domains[index]);
		if (result != CUPTI_SUCCESS) {
			cuptiUnsubscribe(device_gate__subscriber);
			return device_gate__fail(cause, cause_size, "cuptiEnableDomain", result);
		}
	}
	atomic_store(&device_gate__asked, 0);
	device_gate__fd = fd;
	return 0;
}

int
kagent_device_gate_disarm(void)
{
	int asked;

	if (device_gate__fd < 0)
		return -EINVAL;
	cuptiUnsubscribe(device_gate__subscriber);
	pthread_mutex_lock(&device_gate__lock);
	asked = atomic_load(&device_gate__asked);
	device_gate__fd = -1;
	pthread_mutex_unlock(&device_gate__lock);
	return asked;
}
