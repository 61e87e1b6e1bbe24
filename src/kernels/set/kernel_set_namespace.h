// Each kernel set's code lives in its own namespace, k25::<K25_KERNEL_SET> (isa_scalar,
// isa_avx2, ...), given by the build when it compiles src/kernels/set/ for that set, so the
// sets' functions and inline helpers never merge across sets. Code outside the sets that
// includes these internal headers (tests) sees the scalar set's declarations.
#pragma once

#if !defined(K25_KERNEL_SET)
#define K25_KERNEL_SET isa_scalar
#endif
