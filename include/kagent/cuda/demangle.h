/*
 * Demangles the Itanium C++ names of CUDA kernels, so reports can show
 * `void scale<float>(float*, int)` instead of `_Z5scaleIfEvPT_i`. The work is
 * done by libiberty's demangler, the one c++filt and libstdc++'s
 * __cxa_demangle are built from (docs/libraries.md says why it and not
 * CUDA's own); this module bounds its cost and picks a short name for display.
 */
#ifndef KAGENT_DEMANGLE_H
#define KAGENT_DEMANGLE_H

/*
 * A kernel name nvcc and NVRTC produce is at most a few thousand bytes
 * (PyTorch's longest: 2,301 mangled, 5,210 demangled). Longer input is
 * refused before parsing, as the parser's stack use grows with it; longer
 * output is cut off while printing, as substitutions let a short name
 * demangle to exponentially long text.
 */
#define KAGENT_DEMANGLE_MAX_INPUT 4096
#define KAGENT_DEMANGLE_MAX_OUTPUT 16384

/*
 * Fills *demangled_out (caller frees) in c++filt's spelling. Returns 0,
 * -EINVAL for a name that is not mangled or that the demangler rejects, or
 * -E2BIG past the caps.
 */
int kagent_demangle_itanium(const char *mangled, char **demangled_out);
/*
 * The best short name for display: the demangled name when supported, else
 * the unqualified function name read from the mangling, else the input.
 * *exact_out tells whether the whole signature was demangled.
 */
char *kagent_demangle_display(const char *mangled, int *exact_out);

#endif
