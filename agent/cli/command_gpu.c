/* `kagent gpu`: what the NVIDIA driver reports, or why there is no usable GPU. */
#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/cuda/cuda_driver.h"
#include "kagent/evaluator/verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	COMMAND_GPU_JSON,
	COMMAND_GPU_GPU,
};

/* clang-format off */
static const struct kagent_command_option command_gpu__options[] = {
	[COMMAND_GPU_JSON] = {"json", 0, NULL, "print one JSON object: the asked GPU, and every "
		"GPU under \"devices\" (an error object when there is none)", NULL, NULL},
	[COMMAND_GPU_GPU] = {"gpu", 0, "N", "the index of the GPU to show first", "0", NULL},
	{0},
};
/* clang-format on */

static int
command_gpu__handler(int argc, char **argv)
{
	struct kagent_command_parser parser;
	struct kagent_gpu_info info;
	char *cause = NULL, *end, *message;
	int json = 0, index = 0, option, shown, status;
	json_t *object = NULL, *devices = NULL;

	for (option = 1; option < argc; option++)
		json = json || strcmp(argv[option], "--json") == 0;
	kagent_command_parser_init(&parser, &kagent_command_gpu);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case COMMAND_GPU_JSON:
			break;
		case COMMAND_GPU_GPU:
			index = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || end == optarg || index < 0)
				return kagent_command_fail(&kagent_command_gpu, json, "usage",
							   "--gpu needs a GPU index");
			break;
		case KAGENT_COMMAND_HELP:
			kagent_command_print_help(&kagent_command_gpu, stdout);
			return 0;
		default:
			message = kagent_asprintf("%s %s", argv[optind - 1],
						  option == KAGENT_COMMAND_MISSING_VALUE
						      ? "needs a value"
						      : "is no option of kagent gpu");
			status = kagent_command_fail(&kagent_command_gpu, json, "usage", message);
			free(message);
			return status;
		}
	}
	if (optind != argc)
		return kagent_command_fail(&kagent_command_gpu, json, "usage", "takes no operands");
	if (kagent_cuda_driver_probe(&info, index, &cause) != 0) {
		status = kagent_command_fail(&kagent_command_gpu, json, "no_gpu", cause);
		free(cause);
		return status;
	}
	if (json) {
		object = kagent_cuda_driver_info_to_json(&info);
		devices = json_array();
	}
	/* Show every device, the asked one first being the usual case of one GPU. */
	for (shown = 0; shown < info.device_count; shown++) {
		struct kagent_gpu_info each = info;

		if (shown != index && kagent_cuda_driver_probe(&each, shown, &cause) != 0) {
			free(cause);
			cause = NULL;
			continue;
		}
		if (json)
			json_array_append_new(devices, kagent_cuda_driver_info_to_json(&each));
		else
			printf("GPU %d: %s (compute capability %s, driver CUDA %s, %s)\n",
			       each.index, each.name, each.compute_capability, each.driver,
			       each.uuid[0] ? each.uuid : "no uuid");
	}
	if (json) {
		json_object_set_new(object, "devices", devices);
		json_dumpf(object, stdout, JSON_COMPACT);
		fputc('\n', stdout);
		json_decref(object);
	}
	return 0;
}

const struct kagent_command kagent_command_gpu = {
    .name = "gpu",
    .help = "show the GPUs the NVIDIA driver sees (exit 2 when there is none)",
    .options = command_gpu__options,
    .handler = command_gpu__handler,
};
