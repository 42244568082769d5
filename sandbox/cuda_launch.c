/*
 * Compile, load and launch CUDA kernels for the candidate child (see
 * include/kagent/sandbox/cuda_launch.h). The driver API comes from dlopen at first use
 * so this library loads, and its compile half works, on machines with no GPU;
 * the CUDA types come from cuda.h, the functions never from libcuda's import
 * table. Every launch is checked against the device's and the kernel's limits
 * before cuLaunchKernel sees it, so a bad shape is a message, not a sticky
 * CUDA error.
 */
#include "ctypes_buffer.h"
#include "kagent/sandbox/cuda_launch.h"

#include "kagent/base/alloc.h"
#include "kagent/cuda/compile.h"
#include "kagent/cuda/demangle.h"

#include <ctype.h>
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_LAUNCH_MAX_WORDS 16

struct cuda_launch__driver {
	void *library;
	int status; /* 0, or the negative errno of the failed load */
	char message[512];
	CUresult (*init)(unsigned int flags);
	CUresult (*device_get)(CUdevice *device, int ordinal);
	CUresult (*device_get_attribute)(int *value, CUdevice_attribute attribute, CUdevice device);
	CUresult (*primary_retain)(CUcontext *context, CUdevice device);
	CUresult (*primary_release)(CUdevice device);
	CUresult (*context_get_current)(CUcontext *context);
	CUresult (*context_set_current)(CUcontext context);
	CUresult (*module_load_data)(CUmodule *module, const void *image);
	CUresult (*module_unload)(CUmodule module);
	CUresult (*module_get_function)(CUfunction *function, CUmodule module, const char *name);
	CUresult (*function_get_attribute)(int *value, CUfunction_attribute attribute,
					   CUfunction function);
	CUresult (*function_set_attribute)(CUfunction function, CUfunction_attribute attribute,
					   int value);
	CUresult (*function_get_param_info)(CUfunction function, size_t index, size_t *offset,
					    size_t *size);
	CUresult (*launch_kernel)(CUfunction function, unsigned grid_x, unsigned grid_y,
				  unsigned grid_z, unsigned block_x, unsigned block_y,
				  unsigned block_z, unsigned shared_bytes, CUstream stream,
				  void **parameters, void **extra);
	CUresult (*get_error_string)(CUresult result, const char **text);
};

struct cuda_launch__kernel {
	char *name;	 /* as the caller asked for it */
	char *symbol;	 /* the cubin's (mangled) name */
	char *signature; /* the demangled signature, NULL for extern "C" */
	bool have_types;
	enum kagent_cuda_launch_type types[KAGENT_CUDA_LAUNCH_MAX_PARAMETERS];
	size_t parameter_count;
	long long driver_count; /* from cuFuncGetParamInfo; -1 when the driver cannot say */
	int registers;
	CUfunction function;
	int max_threads;
	size_t static_shared;
	size_t shared_opted_in;
};

struct kagent_cuda_module {
	struct kagent_compile_result *result;
	struct cuda_launch__kernel *kernels;
	size_t kernel_count;
	bool loaded;
	CUdevice device;
	CUcontext context;
	CUmodule handle;
	unsigned max_threads_per_block, max_block[3], max_grid[3];
	size_t max_shared_optin;
};

static pthread_mutex_t cuda_launch__lock = PTHREAD_MUTEX_INITIALIZER;
static struct cuda_launch__driver cuda_launch__api;
static bool cuda_launch__api_tried;

static int
cuda_launch__driver_fail(const struct cuda_launch__driver *api, char *cause, size_t cause_size,
			 const char *what, CUresult result)
{
	const char *text = NULL;

	if (api->get_error_string == NULL || api->get_error_string(result, &text) != CUDA_SUCCESS ||
	    text == NULL)
		text = "unknown error";
	return kagent_ctypes_buffer_error(
	    cause, cause_size, result == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO,
	    "%s failed with CUDA error %d (%s)", what, (int)result, text);
}

/* -------------------------------------------------------------------------------------- */
/* Parameter lists                                                                         */

const char *
kagent_cuda_launch_type_name(enum kagent_cuda_launch_type type)
{
	static const char *const names[] = {
	    "unknown", "pointer", "bool",   "int8",  "uint8",  "int16", "uint16",   "int32",
	    "uint32",  "int64",	  "uint64", "float", "double", "half",	"bfloat16",
	};

	if ((size_t)type >= sizeof names / sizeof names[0])
		return "unknown";
	return names[type];
}

static const struct {
	const char *name;
	enum kagent_cuda_launch_type type;
} cuda_launch__typedefs[] = {
    {"size_t", KAGENT_CUDA_LAUNCH_UINT64},	  {"uint64_t", KAGENT_CUDA_LAUNCH_UINT64},
    {"ssize_t", KAGENT_CUDA_LAUNCH_INT64},	  {"ptrdiff_t", KAGENT_CUDA_LAUNCH_INT64},
    {"int64_t", KAGENT_CUDA_LAUNCH_INT64},	  {"intptr_t", KAGENT_CUDA_LAUNCH_INT64},
    {"uintptr_t", KAGENT_CUDA_LAUNCH_UINT64},	  {"int32_t", KAGENT_CUDA_LAUNCH_INT32},
    {"uint32_t", KAGENT_CUDA_LAUNCH_UINT32},	  {"int16_t", KAGENT_CUDA_LAUNCH_INT16},
    {"uint16_t", KAGENT_CUDA_LAUNCH_UINT16},	  {"int8_t", KAGENT_CUDA_LAUNCH_INT8},
    {"uint8_t", KAGENT_CUDA_LAUNCH_UINT8},	  {"half", KAGENT_CUDA_LAUNCH_HALF},
    {"__half", KAGENT_CUDA_LAUNCH_HALF},	  {"__nv_bfloat16", KAGENT_CUDA_LAUNCH_BFLOAT16},
    {"nv_bfloat16", KAGENT_CUDA_LAUNCH_BFLOAT16},
};

static bool
cuda_launch__is_qualifier(const char *word)
{
	static const char *const qualifiers[] = {
	    "const",  "volatile", "__restrict__", "__restrict",	       "restrict",
	    "struct", "class",	  "typename",	  "__grid_constant__", "register",
	};
	size_t index;

	for (index = 0; index < sizeof qualifiers / sizeof qualifiers[0]; index++) {
		if (strcmp(word, qualifiers[index]) == 0)
			return true;
	}
	return false;
}

/* How c++filt spells an anonymous namespace: its '(' opens no parameter list. */
#define CUDA_LAUNCH_ANONYMOUS_NAMESPACE "(anonymous namespace)"

/* The '(' that opens the parameter list of a demangled signature (outside template arguments
 * and anonymous namespaces), or NULL when it has none. */
static const char *
cuda_launch__parameters_start(const char *signature)
{
	const char *p;
	int depth = 0;

	for (p = signature; *p != '\0'; p++) {
		if (*p == '<')
			depth++;
		else if (*p == '>' && depth > 0)
			depth--;
		else if (*p == '(' && depth == 0) {
			if (strncmp(p, CUDA_LAUNCH_ANONYMOUS_NAMESPACE,
				    strlen(CUDA_LAUNCH_ANONYMOUS_NAMESPACE)) != 0)
				return p;
			p += strlen(CUDA_LAUNCH_ANONYMOUS_NAMESPACE) - 1;
		}
	}
	return NULL;
}

/* One parameter's text (start..end): its type, from keywords or a known typedef name. */
static enum kagent_cuda_launch_type
cuda_launch__parameter_type(const char *start, const char *end)
{
	char words[CUDA_LAUNCH_MAX_WORDS][64];
	size_t word_count = 0, index;
	int depth = 0, longs = 0, is_unsigned = 0, is_char = 0, is_short = 0, is_int = 0;
	int is_signed = 0, is_float = 0, is_double = 0, is_bool = 0, is_void = 0, others = 0;
	bool pointer = false;
	const char *p = start, *first_other = NULL;

	/* A closure ("{lambda(float)#1}") or an unnamed type: its layout is not in its name. */
	if (memchr(start, '{', (size_t)(end - start)) != NULL)
		return KAGENT_CUDA_LAUNCH_UNKNOWN;
	while (p < end) {
		if (isalpha((unsigned char)*p) || *p == '_') {
			const char *word = p;
			size_t length;

			while (p < end && (isalnum((unsigned char)*p) || *p == '_'))
				p++;
			length = (size_t)(p - word);
			if (depth > 0 || length >= sizeof words[0])
				continue;
			/* A namespace qualifier ("std::") names no type by itself. */
			if (p + 1 < end && p[0] == ':' && p[1] == ':')
				continue;
			if (word_count < CUDA_LAUNCH_MAX_WORDS) {
				memcpy(words[word_count], word, length);
				words[word_count++][length] = '\0';
			}
			continue;
		}
		if (*p == '<')
			depth++;
		else if (*p == '>' && depth > 0)
			depth--;
		else if (depth == 0 && (*p == '*' || *p == '['))
			pointer = true;
		p++;
	}
	if (pointer)
		return KAGENT_CUDA_LAUNCH_POINTER;
	for (index = 0; index < word_count; index++) {
		const char *word = words[index];

		if (cuda_launch__is_qualifier(word))
			continue;
		if (strcmp(word, "long") == 0)
			longs++;
		else if (strcmp(word, "unsigned") == 0)
			is_unsigned = 1;
		else if (strcmp(word, "signed") == 0)
			is_signed = 1;
		else if (strcmp(word, "char") == 0)
			is_char = 1;
		else if (strcmp(word, "short") == 0)
			is_short = 1;
		else if (strcmp(word, "int") == 0)
			is_int = 1;
		else if (strcmp(word, "float") == 0)
			is_float = 1;
		else if (strcmp(word, "double") == 0)
			is_double = 1;
		else if (strcmp(word, "bool") == 0)
			is_bool = 1;
		else if (strcmp(word, "void") == 0)
			is_void = 1;
		else if (others++ == 0)
			first_other = word;
	}
	if (is_double)
		return longs ? KAGENT_CUDA_LAUNCH_UNKNOWN : KAGENT_CUDA_LAUNCH_DOUBLE;
	if (is_float)
		return KAGENT_CUDA_LAUNCH_FLOAT;
	if (is_bool)
		return KAGENT_CUDA_LAUNCH_BOOL;
	if (is_char)
		return is_unsigned ? KAGENT_CUDA_LAUNCH_UINT8 : KAGENT_CUDA_LAUNCH_INT8;
	if (is_short)
		return is_unsigned ? KAGENT_CUDA_LAUNCH_UINT16 : KAGENT_CUDA_LAUNCH_INT16;
	if (longs > 0)
		return is_unsigned ? KAGENT_CUDA_LAUNCH_UINT64 : KAGENT_CUDA_LAUNCH_INT64;
	if (is_int || is_unsigned || is_signed)
		return is_unsigned ? KAGENT_CUDA_LAUNCH_UINT32 : KAGENT_CUDA_LAUNCH_INT32;
	if (is_void || first_other == NULL)
		return KAGENT_CUDA_LAUNCH_UNKNOWN;
	for (index = 0; index < sizeof cuda_launch__typedefs / sizeof cuda_launch__typedefs[0];
	     index++) {
		if (strcmp(first_other, cuda_launch__typedefs[index].name) == 0)
			return cuda_launch__typedefs[index].type;
	}
	return KAGENT_CUDA_LAUNCH_UNKNOWN;
}

static bool
cuda_launch__blank(const char *start, const char *end)
{
	for (; start < end; start++) {
		if (!isspace((unsigned char)*start))
			return false;
	}
	return true;
}

int
kagent_cuda_launch_parse_parameters(const char *list, enum kagent_cuda_launch_type *types,
				    size_t capacity, size_t *count_out, char *cause,
				    size_t cause_size)
{
	const char *start, *end, *p, *piece;
	int depth = 0;
	size_t count = 0;

	*count_out = 0;
	if (list == NULL)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL, "no parameter list");
	start = list;
	end = list + strlen(list);
	/* With parentheses: the first '(' outside template arguments opens the list. */
	if ((p = cuda_launch__parameters_start(list)) != NULL) {
		int parentheses = 0;

		start = p + 1;
		for (end = start, parentheses = 1; *end != '\0'; end++) {
			if (*end == '(')
				parentheses++;
			else if (*end == ')' && --parentheses == 0)
				break;
		}
		if (*end != ')')
			return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
							  "unbalanced parentheses in '%s'", list);
	}
	if (cuda_launch__blank(start, end))
		goto out;
	{
		const char *q = start;

		while (isspace((unsigned char)*q))
			q++;
		if (strncmp(q, "void", 4) == 0 && cuda_launch__blank(q + 4, end))
			goto out;
	}
	depth = 0;
	for (p = piece = start; p <= end; p++) {
		if (p < end && (*p == '<' || *p == '(' || *p == '['))
			depth++;
		else if (p < end && (*p == '>' || *p == ')' || *p == ']') && depth > 0)
			depth--;
		else if (p == end || (*p == ',' && depth == 0)) {
			if (count >= capacity)
				return kagent_ctypes_buffer_error(cause, cause_size, -E2BIG,
								  "more than %zu parameters",
								  capacity);
			types[count++] = cuda_launch__parameter_type(piece, p);
			piece = p + 1;
		}
	}
out:
	*count_out = count;
	return 0;
}

int
kagent_cuda_launch_check(const struct kagent_cuda_launch_limits *limits, const unsigned grid[3],
			 const unsigned block[3], size_t shared_bytes, char *cause,
			 size_t cause_size)
{
	static const char axes[] = "xyz";
	unsigned long long threads = 1;
	int axis;

	for (axis = 0; axis < 3; axis++) {
		if (grid[axis] == 0 || block[axis] == 0)
			return kagent_ctypes_buffer_error(
			    cause, cause_size, -EINVAL,
			    "grid (%u, %u, %u) and block (%u, %u, %u) must "
			    "have every dimension at least 1",
			    grid[0], grid[1], grid[2], block[0], block[1], block[2]);
		if (block[axis] > limits->max_block[axis])
			return kagent_ctypes_buffer_error(
			    cause, cause_size, -EINVAL,
			    "block %c dimension %u exceeds the device's "
			    "maximum %u",
			    axes[axis], block[axis], limits->max_block[axis]);
		if (grid[axis] > limits->max_grid[axis])
			return kagent_ctypes_buffer_error(
			    cause, cause_size, -EINVAL,
			    "grid %c dimension %u exceeds the device's "
			    "maximum %u",
			    axes[axis], grid[axis], limits->max_grid[axis]);
		threads *= block[axis];
	}
	if (threads > limits->max_threads_per_block)
		return kagent_ctypes_buffer_error(
		    cause, cause_size, -EINVAL,
		    "block (%u, %u, %u) has %llu threads; at most %u are "
		    "allowed per block",
		    block[0], block[1], block[2], threads, limits->max_threads_per_block);
	if (shared_bytes + limits->static_shared_bytes > limits->max_shared_bytes_optin)
		return kagent_ctypes_buffer_error(
		    cause, cause_size, -EINVAL,
		    "%zu bytes of dynamic shared memory plus %zu static "
		    "exceed the device's maximum of %zu per block",
		    shared_bytes, limits->static_shared_bytes, limits->max_shared_bytes_optin);
	return 0;
}

/* -------------------------------------------------------------------------------------- */
/* The driver                                                                              */

static int
cuda_launch__driver_load(struct cuda_launch__driver **api_out, char *cause, size_t cause_size)
{
	struct cuda_launch__driver *api = &cuda_launch__api;
	const char *name;
	CUresult result;

	pthread_mutex_lock(&cuda_launch__lock);
	if (cuda_launch__api_tried)
		goto out;
	cuda_launch__api_tried = true;
	name = getenv("KAGENT_LIBCUDA");
	if (name == NULL || name[0] == '\0')
		name = "libcuda.so.1";
	api->library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (api->library == NULL) {
		api->status = -ENODEV;
		snprintf(api->message, sizeof api->message,
			 "no NVIDIA driver found (%s could not be loaded): CUDA kernels need a "
			 "GPU",
			 name);
		goto out;
	}
#define CUDA_LAUNCH_RESOLVE(field, symbol) *(void **)(&api->field) = dlsym(api->library, symbol)
	CUDA_LAUNCH_RESOLVE(init, "cuInit");
	CUDA_LAUNCH_RESOLVE(device_get, "cuDeviceGet");
	CUDA_LAUNCH_RESOLVE(device_get_attribute, "cuDeviceGetAttribute");
	CUDA_LAUNCH_RESOLVE(primary_retain, "cuDevicePrimaryCtxRetain");
	CUDA_LAUNCH_RESOLVE(primary_release, "cuDevicePrimaryCtxRelease_v2");
	CUDA_LAUNCH_RESOLVE(context_get_current, "cuCtxGetCurrent");
	CUDA_LAUNCH_RESOLVE(context_set_current, "cuCtxSetCurrent");
	CUDA_LAUNCH_RESOLVE(module_load_data, "cuModuleLoadData");
	CUDA_LAUNCH_RESOLVE(module_unload, "cuModuleUnload");
	CUDA_LAUNCH_RESOLVE(module_get_function, "cuModuleGetFunction");
	CUDA_LAUNCH_RESOLVE(function_get_attribute, "cuFuncGetAttribute");
	CUDA_LAUNCH_RESOLVE(function_set_attribute, "cuFuncSetAttribute");
	CUDA_LAUNCH_RESOLVE(function_get_param_info, "cuFuncGetParamInfo");
	CUDA_LAUNCH_RESOLVE(launch_kernel, "cuLaunchKernel");
	CUDA_LAUNCH_RESOLVE(get_error_string, "cuGetErrorString");
#undef CUDA_LAUNCH_RESOLVE
	if (api->init == NULL || api->device_get == NULL || api->device_get_attribute == NULL ||
	    api->primary_retain == NULL || api->primary_release == NULL ||
	    api->context_get_current == NULL || api->context_set_current == NULL ||
	    api->module_load_data == NULL || api->module_unload == NULL ||
	    api->module_get_function == NULL || api->function_get_attribute == NULL ||
	    api->function_set_attribute == NULL || api->launch_kernel == NULL) {
		api->status = -ENOSYS;
		snprintf(api->message, sizeof api->message,
			 "%s is not a usable NVIDIA driver: it lacks the CUDA driver API", name);
		goto out;
	}
	result = api->init(0);
	if (result != CUDA_SUCCESS) {
		const char *text = NULL;

		if (api->get_error_string == NULL || api->get_error_string(result, &text) != 0)
			text = NULL;
		api->status = -ENODEV;
		snprintf(api->message, sizeof api->message,
			 "the NVIDIA driver could not be initialised: cuInit failed with CUDA "
			 "error %d (%s): no usable GPU",
			 (int)result, text ? text : "unknown error");
		goto out;
	}
out:
	pthread_mutex_unlock(&cuda_launch__lock);
	*api_out = api;
	if (api->status < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, api->status, "%s",
						  api->message);
	return 0;
}

static int
cuda_launch__device_arch(int ordinal, char *arch, size_t arch_size, char *cause, size_t cause_size)
{
	struct cuda_launch__driver *api = NULL;
	CUdevice device;
	CUresult result;
	int status, major = 0, minor = 0;

	status = cuda_launch__driver_load(&api, cause, cause_size);
	if (status < 0)
		goto out;
	result = api->device_get(&device, ordinal);
	if (result != CUDA_SUCCESS) {
		status = cuda_launch__driver_fail(api, cause, cause_size, "cuDeviceGet", result);
		goto out;
	}
	api->device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
	api->device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
	/* sm_90a unlocks wgmma and loads only on 9.0, which is exactly this device. */
	snprintf(arch, arch_size, "sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
out:
	return status;
}

/* -------------------------------------------------------------------------------------- */
/* Compiling and finding kernels                                                           */

static bool
cuda_launch__is_expression(const char *name)
{
	return strchr(name, '<') != NULL || strstr(name, "::") != NULL;
}

static bool
cuda_launch__valid_name(const char *name)
{
	const char *p;

	if (name == NULL || name[0] == '\0' || strlen(name) > 1024)
		return false;
	for (p = name; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	}
	return true;
}

/* The unqualified function name of a demangled signature: "void ns::f<int>(int*)" -> "f". */
static char *
cuda_launch__base_name(const char *signature)
{
	const char *p, *end = cuda_launch__parameters_start(signature), *begin;
	int depth = 0;

	if (end == NULL)
		end = signature + strlen(signature);
	/* Drop template arguments right before the parentheses. */
	if (end > signature && end[-1] == '>') {
		depth = 0;
		for (p = end - 1; p > signature; p--) {
			if (*p == '>')
				depth++;
			else if (*p == '<' && --depth == 0)
				break;
		}
		end = p;
	}
	for (begin = end; begin > signature; begin--) {
		if (begin[-1] == ' ' || begin[-1] == ':')
			break;
	}
	return kagent_strndup(begin, (size_t)(end - begin));
}

/* The parameter list of extern "C" __global__ NAME(...) in the source, or NULL. */
static char *
cuda_launch__source_parameters(const char *source, const char *name)
{
	size_t length = strlen(name);
	const char *p = source;

	while ((p = strstr(p, name)) != NULL) {
		const char *after = p + length, *scan, *close;
		bool word = (p == source || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
			    !(isalnum((unsigned char)*after) || *after == '_');
		bool global = false;
		int depth = 1;

		p = after;
		if (!word)
			continue;
		while (isspace((unsigned char)*after))
			after++;
		if (*after != '(')
			continue;
		/* __global__ must come between the previous declaration's end and the name. */
		for (scan = p - length; scan > source; scan--) {
			if (scan[-1] == ';' || scan[-1] == '}' || scan[-1] == '{')
				break;
		}
		{
			char *head = kagent_strndup(scan, (size_t)(p - length - scan));

			global = strstr(head, "__global__") != NULL;
			free(head);
		}
		if (!global)
			continue;
		for (close = after + 1; *close != '\0'; close++) {
			if (*close == '(')
				depth++;
			else if (*close == ')' && --depth == 0)
				break;
		}
		if (*close != ')')
			return NULL;
		return kagent_strndup(after, (size_t)(close - after + 1));
	}
	return NULL;
}

static void
cuda_launch__fill_types(struct cuda_launch__kernel *kernel, const char *source)
{
	char *demangled = NULL, *parameters = NULL;
	const char *list = NULL;
	char ignored[128];

	if (strncmp(kernel->symbol, "_Z", 2) == 0 &&
	    kagent_demangle_itanium(kernel->symbol, &demangled) == 0) {
		free(kernel->signature);
		kernel->signature = kagent_strdup(demangled);
		list = demangled;
	} else if (strncmp(kernel->symbol, "_Z", 2) != 0) {
		parameters = cuda_launch__source_parameters(source, kernel->symbol);
		list = parameters;
	}
	if (list != NULL && kagent_cuda_launch_parse_parameters(
				list, kernel->types, KAGENT_CUDA_LAUNCH_MAX_PARAMETERS,
				&kernel->parameter_count, ignored, sizeof ignored) == 0)
		kernel->have_types = true;
	free(demangled);
	free(parameters);
}

/* Appends the kernels the source defines, for a "not found" message. */
static void
cuda_launch__list_kernels(const struct kagent_compile_result *result, char *buffer, size_t size)
{
	size_t index, used = strlen(buffer);

	if (result->kernel_count == 0) {
		snprintf(buffer + used, size - used, "; the source defines no __global__ kernel");
		return;
	}
	snprintf(buffer + used, size - used, "; the source defines: ");
	for (index = 0; index < result->kernel_count; index++) {
		const struct kagent_compile_kernel *kernel = &result->kernels[index];

		used = strlen(buffer);
		if (kernel->demangle == KAGENT_COMPILE_DEMANGLE_NONE)
			snprintf(buffer + used, size - used, "%s%s (extern \"C\")",
				 index ? ", " : "", kernel->mangled_name);
		else
			snprintf(buffer + used, size - used, "%s%s", index ? ", " : "",
				 kernel->demangled_name);
	}
}

static int
cuda_launch__find(struct kagent_cuda_module *module, const char *name,
		  struct cuda_launch__kernel *kernel, char *cause, size_t cause_size)
{
	const struct kagent_compile_result *result = module->result;
	const struct kagent_compile_kernel *found = NULL;
	size_t index, matches = 0;

	for (index = 0; index < result->kernel_count; index++) {
		const struct kagent_compile_kernel *candidate = &result->kernels[index];
		bool match;

		if (cuda_launch__is_expression(name)) {
			match = candidate->demangle == KAGENT_COMPILE_DEMANGLE_NAME_EXPRESSION &&
				strcmp(candidate->demangled_name, name) == 0;
		} else if (strcmp(candidate->mangled_name, name) == 0) {
			match = true;
		} else if (strncmp(candidate->mangled_name, "_Z", 2) == 0 &&
			   candidate->demangle != KAGENT_COMPILE_DEMANGLE_NAME_EXPRESSION) {
			char *base = cuda_launch__base_name(candidate->demangled_name);

			match = strcmp(base, name) == 0;
			free(base);
		} else {
			match = false;
		}
		if (match) {
			matches++;
			if (found == NULL)
				found = candidate;
		}
	}
	if (matches == 0) {
		kagent_ctypes_buffer_error(cause, cause_size, -ENOENT, "kernel '%s' not found",
					   name);
		cuda_launch__list_kernels(result, cause, cause_size);
		return -ENOENT;
	}
	if (matches > 1)
		return kagent_ctypes_buffer_error(
		    cause, cause_size, -EINVAL,
		    "kernel name '%s' is ambiguous (overloads or template "
		    "instances): name one with a name expression such as "
		    "'%s<float>' or declare it extern \"C\"",
		    name, name);
	kernel->name = kagent_strdup(name);
	kernel->symbol = kagent_strdup(found->mangled_name);
	if (found->demangle != KAGENT_COMPILE_DEMANGLE_NONE)
		kernel->signature = kagent_strdup(found->demangled_name);
	kernel->registers = found->registers;
	kernel->driver_count = -1;
	return 0;
}

/* The compile log's diagnostics as "file:line: severity: message" lines. */
static void
cuda_launch__diagnostics(const struct kagent_compile_result *result, char *buffer, size_t size)
{
	size_t index, used;

	snprintf(buffer, size, "the CUDA source does not compile:");
	for (index = 0; index < result->diagnostic_count; index++) {
		const struct kagent_nvrtc_diagnostic *diagnostic = &result->diagnostics[index];

		if (diagnostic->severity == KAGENT_NVRTC_NOTE)
			continue;
		used = strlen(buffer);
		if (diagnostic->line > 0)
			snprintf(buffer + used, size - used, "\n%s:%d: %s: %s", diagnostic->file,
				 diagnostic->line,
				 kagent_nvrtc_log_severity_name(diagnostic->severity),
				 diagnostic->message);
		else
			snprintf(buffer + used, size - used, "\n%s: %s: %s", diagnostic->file,
				 kagent_nvrtc_log_severity_name(diagnostic->severity),
				 diagnostic->message);
	}
	if (result->diagnostic_count == 0 && result->log != NULL) {
		used = strlen(buffer);
		snprintf(buffer + used, size - used, "\n%s", result->log);
	}
}

int
kagent_cuda_module_compile(const char *source, const char *arch, int device_ordinal,
			   const char *const *kernels, size_t kernel_count,
			   const char *const *options, size_t option_count,
			   const char *cache_directory, struct kagent_cuda_module **module_out,
			   char *cause, size_t cause_size)
{
	struct kagent_cuda_module *module = kagent_calloc(1, sizeof *module);
	struct kagent_compile_request request;
	const char **expressions = NULL;
	char device_arch[32], *compile_cause = NULL;
	size_t index;
	int status = 0;

	*module_out = NULL;
	if (source == NULL) {
		status =
		    kagent_ctypes_buffer_error(cause, cause_size, -EINVAL, "no CUDA source given");
		goto out;
	}
	if (kernel_count == 0 || kernel_count > KAGENT_CUDA_LAUNCH_MAX_KERNELS) {
		status = kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						    "name between 1 and %d kernels to load",
						    KAGENT_CUDA_LAUNCH_MAX_KERNELS);
		goto out;
	}
	expressions = kagent_calloc(kernel_count, sizeof *expressions);
	memset(&request, 0, sizeof request);
	for (index = 0; index < kernel_count; index++) {
		if (!cuda_launch__valid_name(kernels[index])) {
			status =
			    kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						       "kernel name %zu is empty, overlong or has "
						       "control characters",
						       index);
			goto out;
		}
		if (cuda_launch__is_expression(kernels[index]))
			expressions[request.name_expression_count++] = kernels[index];
	}
	if (arch == NULL) {
		status = cuda_launch__device_arch(device_ordinal, device_arch, sizeof device_arch,
						  cause, cause_size);
		if (status < 0)
			goto out;
		arch = device_arch;
	}
	request.source = source;
	request.file_name = "kernel.cu";
	request.arch = arch;
	request.options = options;
	request.option_count = option_count;
	request.name_expressions = expressions;
	request.use_cache = true;
	request.cache_directory = cache_directory;
	status = kagent_compile_source(&request, &module->result, &compile_cause);
	if (status < 0) {
		kagent_ctypes_buffer_error(cause, cause_size, status, "%s", compile_cause);
		goto out;
	}
	if (!module->result->success) {
		cuda_launch__diagnostics(module->result, cause, cause_size);
		status = -ENOEXEC;
		goto out;
	}
	module->kernels = kagent_calloc(kernel_count, sizeof *module->kernels);
	for (index = 0; index < kernel_count; index++) {
		status = cuda_launch__find(module, kernels[index], &module->kernels[index], cause,
					   cause_size);
		module->kernel_count++;
		if (status < 0)
			goto out;
		cuda_launch__fill_types(&module->kernels[index], source);
	}
	*module_out = module;
	module = NULL;
out:
	kagent_cuda_module_free(module);
	free(expressions);
	free(compile_cause);
	return status;
}

/* -------------------------------------------------------------------------------------- */
/* Loading and launching                                                                   */

static int
cuda_launch__attribute(const struct cuda_launch__driver *api, CUdevice device,
		       CUdevice_attribute attribute, unsigned *value_out)
{
	int value = 0;

	if (api->device_get_attribute(&value, attribute, device) != CUDA_SUCCESS || value <= 0)
		return -EIO;
	*value_out = (unsigned)value;
	return 0;
}

/* Makes the module's context current on this thread when another one (or none) is. */
static int
cuda_launch__enter(const struct cuda_launch__driver *api, const struct kagent_cuda_module *module,
		   char *cause, size_t cause_size)
{
	CUcontext current = NULL;
	CUresult result;

	if (api->context_get_current(&current) == CUDA_SUCCESS && current == module->context)
		return 0;
	result = api->context_set_current(module->context);
	if (result != CUDA_SUCCESS)
		return cuda_launch__driver_fail(api, cause, cause_size, "cuCtxSetCurrent", result);
	return 0;
}

int
kagent_cuda_module_load(struct kagent_cuda_module *module, int device_ordinal, char *cause,
			size_t cause_size)
{
	struct cuda_launch__driver *api = NULL;
	unsigned optin = 0;
	CUresult result;
	size_t index, parameter;
	int status, value;

	if (module->loaded)
		return 0;
	status = cuda_launch__driver_load(&api, cause, cause_size);
	if (status < 0)
		goto out;
	result = api->device_get(&module->device, device_ordinal);
	if (result != CUDA_SUCCESS) {
		status = cuda_launch__driver_fail(api, cause, cause_size, "cuDeviceGet", result);
		goto out;
	}
	if (cuda_launch__attribute(api, module->device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
				   &module->max_threads_per_block) < 0 ||
	    cuda_launch__attribute(api, module->device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
				   &module->max_block[0]) < 0 ||
	    cuda_launch__attribute(api, module->device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
				   &module->max_block[1]) < 0 ||
	    cuda_launch__attribute(api, module->device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
				   &module->max_block[2]) < 0 ||
	    cuda_launch__attribute(api, module->device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
				   &module->max_grid[0]) < 0 ||
	    cuda_launch__attribute(api, module->device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
				   &module->max_grid[1]) < 0 ||
	    cuda_launch__attribute(api, module->device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
				   &module->max_grid[2]) < 0) {
		status = kagent_ctypes_buffer_error(
		    cause, cause_size, -EIO, "cannot read GPU %d's launch limits", device_ordinal);
		goto out;
	}
	if (cuda_launch__attribute(api, module->device,
				   CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
				   &optin) < 0)
		optin = KAGENT_CUDA_LAUNCH_DEFAULT_SHARED;
	module->max_shared_optin = optin;
	result = api->primary_retain(&module->context, module->device);
	if (result != CUDA_SUCCESS) {
		module->context = NULL;
		status = cuda_launch__driver_fail(api, cause, cause_size,
						  "cuDevicePrimaryCtxRetain", result);
		goto out;
	}
	status = cuda_launch__enter(api, module, cause, cause_size);
	if (status < 0)
		goto out;
	result = api->module_load_data(&module->handle, module->result->cubin);
	if (result != CUDA_SUCCESS) {
		module->handle = NULL;
		status =
		    cuda_launch__driver_fail(api, cause, cause_size, "cuModuleLoadData", result);
		goto out;
	}
	for (index = 0; index < module->kernel_count; index++) {
		struct cuda_launch__kernel *kernel = &module->kernels[index];
		size_t offset, size;

		result =
		    api->module_get_function(&kernel->function, module->handle, kernel->symbol);
		if (result != CUDA_SUCCESS) {
			status = cuda_launch__driver_fail(api, cause, cause_size,
							  "cuModuleGetFunction", result);
			goto out;
		}
		value = 0;
		api->function_get_attribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
					    kernel->function);
		kernel->max_threads = value;
		value = 0;
		api->function_get_attribute(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
					    kernel->function);
		kernel->static_shared = value > 0 ? (size_t)value : 0;
		/* The driver's own parameter count, where it can tell (CUDA 12.4 and later). */
		if (api->function_get_param_info != NULL) {
			for (parameter = 0; parameter <= KAGENT_CUDA_LAUNCH_MAX_PARAMETERS;
			     parameter++) {
				if (api->function_get_param_info(kernel->function, parameter,
								 &offset, &size) != CUDA_SUCCESS)
					break;
			}
			if (parameter > 0 ||
			    api->function_get_param_info(kernel->function, 0, &offset, &size) ==
				CUDA_ERROR_INVALID_VALUE)
				kernel->driver_count = (long long)parameter;
		}
	}
	module->loaded = true;
out:
	return status;
}

int
kagent_cuda_module_describe(const struct kagent_cuda_module *module, char *buffer,
			    size_t buffer_size, char *cause, size_t cause_size)
{
	json_t *object = NULL, *kernels = json_array();
	size_t index, parameter;
	int status;

	for (index = 0; index < module->kernel_count; index++) {
		const struct cuda_launch__kernel *kernel = &module->kernels[index];
		json_t *types = json_null();

		if (kernel->have_types) {
			json_decref(types);
			types = json_array();
			for (parameter = 0; parameter < kernel->parameter_count; parameter++)
				json_array_append_new(types,
						      json_string(kagent_cuda_launch_type_name(
							  kernel->types[parameter])));
		}
		json_array_append_new(
		    kernels, json_pack("{s:s, s:s, s:s?, s:o, s:i, s:I}", "name", kernel->name,
				       "symbol", kernel->symbol, "signature", kernel->signature,
				       "parameters", types, "registers", kernel->registers,
				       "driver_parameter_count", (json_int_t)kernel->driver_count));
	}
	object =
	    json_pack("{s:s, s:b, s:f, s:b, s:o}", "arch", module->result->arch, "cached",
		      module->result->cached, "compile_seconds", module->result->compile_seconds,
		      "loaded", module->loaded, "kernels", kernels);
	status = object != NULL
		     ? kagent_ctypes_buffer_json(object, buffer, buffer_size, cause, cause_size)
		     : kagent_ctypes_buffer_error(cause, cause_size, -ENOMEM, "out of memory");
	json_decref(object);
	return status;
}

int
kagent_cuda_module_launch(struct kagent_cuda_module *module, size_t kernel_index,
			  const unsigned grid[3], const unsigned block[3], size_t shared_bytes,
			  void *stream, void **arguments, size_t argument_count, char *cause,
			  size_t cause_size)
{
	struct cuda_launch__driver *api = &cuda_launch__api;
	struct kagent_cuda_launch_limits limits;
	struct cuda_launch__kernel *kernel;
	char message[512];
	CUresult result;
	long long expected = -1;
	size_t index;
	int status = 0;

	if (!module->loaded)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "the module is not loaded");
	if (kernel_index >= module->kernel_count)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "no kernel %zu (the module has %zu)",
						  kernel_index, module->kernel_count);
	kernel = &module->kernels[kernel_index];
	if (kernel->driver_count >= 0)
		expected = kernel->driver_count;
	else if (kernel->have_types)
		expected = (long long)kernel->parameter_count;
	if (expected >= 0 && (long long)argument_count != expected)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "kernel %s takes %lld arguments, %zu given",
						  kernel->name, expected, argument_count);
	for (index = 0; index < argument_count; index++) {
		if (arguments == NULL || arguments[index] == NULL)
			return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
							  "argument %zu of kernel %s has no value",
							  index, kernel->name);
	}
	memset(&limits, 0, sizeof limits);
	limits.max_threads_per_block = module->max_threads_per_block;
	if (kernel->max_threads > 0 && (unsigned)kernel->max_threads < limits.max_threads_per_block)
		limits.max_threads_per_block = (unsigned)kernel->max_threads;
	memcpy(limits.max_block, module->max_block, sizeof limits.max_block);
	memcpy(limits.max_grid, module->max_grid, sizeof limits.max_grid);
	limits.static_shared_bytes = kernel->static_shared;
	limits.max_shared_bytes_optin = module->max_shared_optin;
	status =
	    kagent_cuda_launch_check(&limits, grid, block, shared_bytes, message, sizeof message);
	if (status < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, status, "kernel %s: %s",
						  kernel->name, message);
	status = cuda_launch__enter(api, module, cause, cause_size);
	if (status < 0)
		return status;
	if (shared_bytes > KAGENT_CUDA_LAUNCH_DEFAULT_SHARED &&
	    shared_bytes > kernel->shared_opted_in) {
		result = api->function_set_attribute(
		    kernel->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
		    (int)shared_bytes);
		if (result != CUDA_SUCCESS)
			return cuda_launch__driver_fail(
			    api, cause, cause_size,
			    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", result);
		kernel->shared_opted_in = shared_bytes;
	}
	result =
	    api->launch_kernel(kernel->function, grid[0], grid[1], grid[2], block[0], block[1],
			       block[2], (unsigned)shared_bytes, (CUstream)stream, arguments, NULL);
	if (result != CUDA_SUCCESS) {
		status = cuda_launch__driver_fail(api, message, sizeof message, "cuLaunchKernel",
						  result);
		return kagent_ctypes_buffer_error(cause, cause_size, status, "kernel %s: %s",
						  kernel->name, message);
	}
	return 0;
}

void
kagent_cuda_module_free(struct kagent_cuda_module *module)
{
	struct cuda_launch__driver *api = &cuda_launch__api;
	size_t index;

	if (module == NULL)
		return;
	if (module->handle != NULL && api->module_unload != NULL)
		api->module_unload(module->handle);
	if (module->context != NULL && api->primary_release != NULL)
		api->primary_release(module->device);
	for (index = 0; index < module->kernel_count; index++) {
		free(module->kernels[index].name);
		free(module->kernels[index].symbol);
		free(module->kernels[index].signature);
	}
	free(module->kernels);
	kagent_compile_result_free(module->result);
	free(module);
}
