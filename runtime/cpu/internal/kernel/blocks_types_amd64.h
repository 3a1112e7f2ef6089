// One type's two kernels (blocks_amd64.s): its AVX2 and AVX-512 loops,
// then its definitions undone for the next type.
#include "blocks_avx2_amd64.h"
#include "blocks_avx512_amd64.h"
#undef NAME
#undef NAME512
#undef CONSTS
#undef SCALES
#undef UNPACK
#undef UNPACK2
