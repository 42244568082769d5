/*
 * A small Itanium C++ ABI demangler for the names of CUDA kernels, so reports
 * can show `void scale<float>(float*, int)` instead of `_Z5scaleIfEvPT_i`
 * without linking a C++ runtime. It covers plain and namespaced functions,
 * builtin, pointer, reference, cv-qualified, class and template-parameter
 * types, substitutions and template arguments that are types or integer
 * literals; anything else (function pointers, packs, expressions, operators,
 * lambdas...) is refused rather than guessed.
 */
#ifndef KAGENT_DEMANGLE_H
#define KAGENT_DEMANGLE_H

#define KAGENT_DEMANGLE_MAX_INPUT 4096

/*
 * Fills *demangled_out (caller frees) in c++filt's spelling. Returns 0,
 * -EINVAL for a name that is not mangled or uses something unsupported, or
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
