/* `kagent gpu`: what the NVIDIA driver reports, or why there is no usable GPU. */
#include "kagent/cli/command.h"
#include "kagent/cuda/cuda_driver.h"
#include "kagent/evaluator/verdict.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static int
command_gpu__handler(int argc, char **argv)
{
	static const struct option long_options[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"gpu", required_argument, NULL, 'g'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct kagent_gpu_info info;
	char *cause = NULL, *end;
	int json = 0, index = 0, option, status = 0, shown;
	json_t *object;

	optind = 1;
	opterr = 0;
	while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (option) {
		case 'j':
			json = 1;
			break;
		case 'g':
			index = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || index < 0) {
				kagent_command_print_usage(&kagent_command_gpu);
				return 2;
			}
			break;
		case 'h':
			kagent_command_print_usage(&kagent_command_gpu);
			return 0;
		default:
			fprintf(stderr, "kagent gpu: unknown option\n");
			kagent_command_print_usage(&kagent_command_gpu);
			return 2;
		}
	}
	if (optind != argc) {
		kagent_command_print_usage(&kagent_command_gpu);
		return 2;
	}
	if (kagent_cuda_driver_probe(&info, index, &cause) != 0) {
		fprintf(stderr, "kagent gpu: %s\n", cause);
		if (json) {
			object = kagent_verdict_error_json("no_gpu", cause);
			json_dumpf(object, stdout, JSON_COMPACT);
			fputc('\n', stdout);
			json_decref(object);
		}
		free(cause);
		return 2;
	}
	/* Show every device, the asked one first being the usual case of one GPU. */
	for (shown = 0; shown < info.device_count; shown++) {
		struct kagent_gpu_info each = info;

		if (shown != index && kagent_cuda_driver_probe(&each, shown, &cause) != 0) {
			free(cause);
			cause = NULL;
			continue;
		}
		if (json) {
			object = kagent_cuda_driver_info_to_json(&each);
			json_dumpf(object, stdout, JSON_COMPACT);
			fputc('\n', stdout);
			json_decref(object);
		} else {
			printf("GPU %d: %s (compute capability %s, driver CUDA %s, %s)\n",
			       each.index, each.name, each.compute_capability, each.driver,
			       each.uuid[0] ? each.uuid : "no uuid");
		}
	}
	return status;
}

const struct kagent_command kagent_command_gpu = {
    .name = "gpu",
    .usage = "[--json] [--gpu N]",
    .help = "show the GPUs the NVIDIA driver sees (exit 2 when there is none)",
    .handler = command_gpu__handler,
};
