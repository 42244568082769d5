/*
 * Unit tests for the kernel-name demangler (tools/cuda/demangle.c). Expected
 * strings are binutils c++filt's (2.40); the NVRTC and nvcc names come from
 * real kernels compiled with CUDA 13.0 (docs/libraries.md).
 */
#include "kagent/cuda/demangle.h"

#include "test.h"

#include <errno.h>
#include <time.h>

struct vector {
	const char *mangled;
	const char *expected;
};

static void
check(const char *mangled, const char *expected)
{
	char *demangled = NULL;
	int status = kagent_demangle_itanium(mangled, &demangled);

	if (status != 0)
		fprintf(stderr, "%s: status %d\n", mangled, status);
	CHECK_INT(status, 0);
	CHECK_STRING(demangled, expected);
	free(demangled);
}

static void
check_all(const struct vector *vectors, size_t count)
{
	size_t index;

	for (index = 0; index < count; index++)
		check(vectors[index].mangled, vectors[index].expected);
}

static void
test_plain_functions(void)
{
	check("_Z6kernelPfi", "kernel(float*, int)");
	check("_Z3addPfS_S_", "add(float*, float*, float*)");
	check("_Z4noopv", "noop()");
	check("_Z1fPKfPjyRd", "f(float const*, unsigned int*, unsigned long long, double&)");
	check("_Z5sgemmiiifPKfS0_fPf",
	      "sgemm(int, int, int, float, float const*, float const*, float, float*)");
	check("_Z1gPK6__halfPS_", "g(__half const*, __half*)");
	/* Refused by the hand-written reader before, spelled as c++filt does now. */
	check("_Z1fPFviE", "f(void (*)(int))");
	check("_Z3foo", "foo"); /* the mangling of a variable named foo */
}

static void
test_namespaces_and_templates(void)
{
	check("_ZN2ns3fooEPKfS1_", "ns::foo(float const*, float const*)");
	check("_Z5scaleIfEvPT_i", "void scale<float>(float*, int)");
	check("_Z1fILi32ELj4EEvPN4cute5TupleIiiEE", "void f<32, 4u>(cute::Tuple<int, int>*)");
	check("_ZN2ns6kernelIiLi4EEEvPT_", "void ns::kernel<int, 4>(int*)");
	check("_Z7softmaxILi256ELb1EEvPKfPfi",
	      "void softmax<256, true>(float const*, float*, int)");
	check("_Z1hIN2ns3VecIfEEEvPT_S3_",
	      "void h<ns::Vec<float> >(ns::Vec<float>*, ns::Vec<float>)");
}

/* Kernels NVRTC and nvcc named: templates, lambdas, __nv_ types and wrappers. */
static void
test_cuda_names(void)
{
	static const struct vector vectors[] = {
	    {"_Z13lambda_kernelIZ19make_lambda_kernelsiEUlfE0_EvPfT_",
	     "void lambda_kernel<make_lambda_kernels(int)::{lambda(float)#2}>(float*, "
	     "make_lambda_kernels(int)::{lambda(float)#2})"},
	    {"_Z7call_itIZ18uses_device_lambdaPfEUlfE_EfT_f",
	     "float "
	     "call_it<uses_device_lambda(float*)::{lambda(float)#1}>(uses_device_lambda(float*)::{"
	     "lambda(float)#1}, float)"},
	    {"_Z13lambda_kernelIZN5outer6HolderIiE4makeIdEEvT_EUlfE_EvPfT_",
	     "void "
	     "lambda_kernel<outer::Holder<int>::make<double>(double)::{lambda(float)#1}>(float*, "
	     "outer::Holder<int>::make<double>(double)::{lambda(float)#1})"},
	    {"_Z3fp8P13__nv_fp8_e4m3P13__nv_fp8_e5m2P7__half2P14__nv_bfloat162",
	     "fp8(__nv_fp8_e4m3*, __nv_fp8_e5m2*, __half2*, __nv_bfloat162*)"},
	    {"_Z5scaleI13__nv_bfloat16EvPT_S1_i",
	     "void scale<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16, int)"},
	    {"_ZN43_GLOBAL__N__00000000_10_kernels_cu_4d11ce8d4anonEPf",
	     "(anonymous namespace)::anon(float*)"},
	    {"_Z5tiledIiLin4ELb0EEvPKT_PS0_", "void tiled<int, -4, false>(int const*, int*)"},
	    {"_Z5modedIL4Mode2EEvPf", "void moded<(Mode)2>(float*)"},
	    {"_Z8variadicIJifPdEEvDpT_", "void variadic<int, float, double*>(int, float, double*)"},
	    {"_Z8variadicIJEEvDpT_", "void variadic<>()"},
	    {"_Z8literalsILy18446744073709551615ELc97ELln7EEvPi",
	     "void literals<18446744073709551615ull, (char)97, -7l>(int*)"},
	    {"_Z6arraysPA16_fRA4_i", "arrays(float (*) [16], int (&) [4])"},
	    {"_Z5fnptrPFviEPFfffE", "fnptr(void (*)(int), float (*)(float, float))"},
	    {"_ZN5outer5inner5applyIfNS0_2OpIfEEEEvPT_T0_",
	     "void outer::inner::apply<float, outer::inner::Op<float> >(float*, "
	     "outer::inner::Op<float>)"},
	    {"_Z10vec_kernelI3VecIS0_IsLi2EELi3EEEvPT_S3_",
	     "void vec_kernel<Vec<Vec<short, 2>, 3> >(Vec<Vec<short, 2>, 3>*, Vec<Vec<short, 2>, "
	     "3>)"},
	    {"_Z13lambda_kernelI17__nv_dl_wrapper_tI11__nv_dl_tagIPFvPfiEXadL_Z11host_launchS2_"
	     "iEELj1EEJEEEvS2_T_",
	     "void lambda_kernel<__nv_dl_wrapper_t<__nv_dl_tag<void (*)(float*, int), "
	     "&(host_launch(float*, int)), 1u>> >(float*, __nv_dl_wrapper_t<__nv_dl_tag<void "
	     "(*)(float*, int), &(host_launch(float*, int)), 1u>>)"},
	    {"_ZN3cub17CUB_300001_SM_9006detail6reduce18DeviceReduceKernelINS2_10policy_"
	     "hubIfjN4cuda3std3__44plusIvEEE10Policy1000EPfjS9_fNS7_10__identityEEEvT0_PT3_T1_NS0_"
	     "13GridEvenShareISH_EET2_T4_",
	     "void "
	     "cub::CUB_300001_SM_900::detail::reduce::DeviceReduceKernel<cub::CUB_300001_SM_900::"
	     "detail::reduce::policy_hub<float, unsigned int, cuda::std::__4::plus<void> "
	     ">::Policy1000, float*, unsigned int, cuda::std::__4::plus<void>, float, "
	     "cuda::std::__4::__identity>(float*, float*, unsigned int, "
	     "cub::CUB_300001_SM_900::GridEvenShare<unsigned int>, cuda::std::__4::plus<void>, "
	     "cuda::std::__4::__identity)"},
	    {"_ZN41_INTERNAL_00000000_10_kernels_cu_4d11ce8d18cooperative_groups4__"
	     "v17details13grid_group_idE",
	     "_INTERNAL_00000000_10_kernels_cu_4d11ce8d::cooperative_groups::__v1::details::grid_"
	     "group_id"},
	};

	check_all(vectors, sizeof vectors / sizeof vectors[0]);
}

/*
 * PyTorch kernels the hand-written reader got wrong: it lost substitution
 * candidates (a parameter named the wrong type) and did not collapse
 * references. The launcher reads parameter types from this text.
 */
static void
test_corrected(void)
{
	static const struct vector vectors[] = {
	    {"_ZN2at6native5apply20coalesceValuesKernelIN3c107complexINS3_4HalfEEENS4_IfEEEEvPlS8_"
	     "PT_SA_lll",
	     "void at::native::apply::coalesceValuesKernel<c10::complex<c10::Half>, "
	     "c10::complex<float> >(long*, long*, c10::complex<c10::Half>*, "
	     "c10::complex<c10::Half>*, long, long, long)"},
	    {"_ZN4cuda3std3__47forwardIRK13__nv_bfloat16EEOT_RNS1_16remove_referenceIS6_E4typeE",
	     "__nv_bfloat16 const& cuda::std::__4::forward<__nv_bfloat16 const&>(cuda::std::__4::"
	     "remove_reference<__nv_bfloat16 const&>::type&)"},
	};

	check_all(vectors, sizeof vectors / sizeof vectors[0]);
}

static void
test_refused(void)
{
	char *demangled = NULL;

	CHECK_INT(kagent_demangle_itanium("plain", &demangled), -EINVAL);
	CHECK_INT(kagent_demangle_itanium("_Z", &demangled), -EINVAL);
	CHECK_INT(kagent_demangle_itanium("_Z99foo", &demangled), -EINVAL);
	CHECK_INT(kagent_demangle_itanium("_Z1fS_", &demangled), -EINVAL);
	CHECK_INT(kagent_demangle_itanium("_Z6kernelPFvi", &demangled), -EINVAL);
	CHECK(demangled == NULL);
}

/*
 * A name whose text doubles with every level: std::pair<a, a>, then a pair of
 * those, ... 40 levels take 461 bytes mangled and would print some 30 TB.
 */
static void
doubling_name(char *buffer, size_t size, int levels)
{
	static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	int level;

	snprintf(buffer, size, "_Z6kernel1aSt4pairIS_S_E");
	for (level = 1; level < levels; level++) {
		size_t used = strlen(buffer);
		/* The pair of the level before is substitution `level`, in base 36. */
		char id[3] = {digits[level % 36], '\0', '\0'};

		if (level >= 36) {
			id[0] = digits[level / 36];
			id[1] = digits[level % 36];
		}
		snprintf(buffer + used, size - used, "S0_IS%s_S%s_E", id, id);
	}
}

static void
test_display(void)
{
	char buffer[1024];
	int exact = -1;
	char *name;

	name = kagent_demangle_display("_Z6kernelPfi", &exact);
	CHECK_STRING(name, "kernel(float*, int)");
	CHECK_INT(exact, 1);
	free(name);
	/* Truncated: the function's name is still read from the mangling. */
	name = kagent_demangle_display("_Z6kernelPFvi", &exact);
	CHECK_STRING(name, "kernel");
	CHECK_INT(exact, 0);
	free(name);
	name = kagent_demangle_display("_ZN2ns6kernelIiLi4EEEvPT", &exact);
	CHECK_STRING(name, "kernel");
	CHECK_INT(exact, 0);
	free(name);
	doubling_name(buffer, sizeof buffer, 40);
	name = kagent_demangle_display(buffer, &exact);
	CHECK_STRING(name, "kernel");
	CHECK_INT(exact, 0);
	free(name);
	name = kagent_demangle_display("plain", &exact);
	CHECK_STRING(name, "plain");
	CHECK_INT(exact, 0);
	free(name);
}

static void
test_hostile(void)
{
	char buffer[KAGENT_DEMANGLE_MAX_INPUT + 64], *demangled = NULL;
	struct timespec start, end;
	unsigned seed = 99;
	int round, index;

	/* Small enough to print whole, then past the output cap, and quickly. */
	doubling_name(buffer, sizeof buffer, 8);
	CHECK_INT(kagent_demangle_itanium(buffer, &demangled), 0);
	CHECK(strlen(demangled) > 5000);
	free(demangled);
	demangled = NULL;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (round = 0; round < 100; round++) {
		doubling_name(buffer, sizeof buffer, 40 + round % 30);
		CHECK_INT(kagent_demangle_itanium(buffer, &demangled), -E2BIG);
		CHECK(demangled == NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	CHECK((double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9 <
	      5.0);
	/* Deep nesting must hit the recursion limit, not the stack. */
	strcpy(buffer, "_Z1f");
	for (index = 0; index < 2000; index++)
		strcat(buffer, "P");
	strcat(buffer, "i");
	CHECK(kagent_demangle_itanium(buffer, &demangled) < 0);
	memset(buffer, 'P', sizeof buffer - 1);
	buffer[sizeof buffer - 1] = '\0';
	CHECK_INT(kagent_demangle_itanium(buffer, &demangled), -E2BIG);
	for (round = 0; round < 20000; round++) {
		const char *base = "_Z1hIN2ns3VecIfEEEvPT_S3_Li4ELj7EEvPKfS0_";
		size_t length = strlen(base);
		int flips;

		memcpy(buffer, base, length + 1);
		for (flips = 0; flips < 1 + round % 6; flips++) {
			seed = seed * 1103515245 + 12345;
			buffer[2 + (seed >> 8) % (length - 2)] =
			    "_0123456789IELNSPKTRfijvn"[(seed >> 16) % 25];
		}
		if (kagent_demangle_itanium(buffer, &demangled) == 0)
			free(demangled);
		demangled = NULL;
	}
}

static const struct kagent_test tests[] = {
    {"plain_functions", test_plain_functions},
    {"namespaces_and_templates", test_namespaces_and_templates},
    {"cuda_names", test_cuda_names},
    {"corrected", test_corrected},
    {"refused", test_refused},
    {"display", test_display},
    {"hostile", test_hostile},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
