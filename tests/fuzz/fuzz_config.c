/*
 * Fuzzes the YAML config reader (agent/records/config.c). It reads only from a path, so the
 * input is written to a scratch file first; a config that loads is also turned into the JSON
 * that traces record.
 */
#include "fuzz.h"

#include "kagent/records/config.h"

#include <stdlib.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = kagent_fuzz_write_input(data, size);
	struct kagent_config config;
	char *cause = NULL;

	kagent_config_init(&config);
	if (kagent_config_load_file(&config, path, &cause) == 0)
		json_decref(kagent_config_to_json(&config));
	free(cause);
	kagent_config_clear(&config);
	return 0;
}
