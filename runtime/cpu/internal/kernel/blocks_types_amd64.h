// One type's kernels (blocks_amd64.s): its AVX2 and AVX-512 loops, and the
// AVX-512 loop of four activation rows with and without VNNI (and of
// eight, two tiles, for the types that name NAME512X8: no mins),
// then its definitions undone for the next type.
#include "blocks_avx2_amd64.h"
#include "blocks_avx512_amd64.h"
#define TILENAME NAME512X4
#include "blocks_tile_avx512_amd64.h"
#undef TILENAME
#define VNNI
#define TILENAME NAME512X4V
#include "blocks_tile_avx512_amd64.h"
#undef TILENAME
#undef VNNI
#ifdef NAME512X8
#define ROWS8
#define TILENAME NAME512X8
#include "blocks_tile_avx512_amd64.h"
#undef TILENAME
#define VNNI
#define TILENAME NAME512X8V
#include "blocks_tile_avx512_amd64.h"
#undef TILENAME
#undef VNNI
#undef ROWS8
#undef NAME512X8
#undef NAME512X8V
#endif
#ifdef WIDENAME
#include "blocks_wide_avx512_amd64.h"
// The AVX2 form's expansion (for dotWideAVX2): every type a row at a time.
#define WROWNAME WIDE2NAME
#define WROWPAIR UNPACK; VMOVDQU Y8, (AX); VMOVDQU Y9, 1024(AX); UNPACK; VMOVDQU Y8, 32(AX); VMOVDQU Y9, 1056(AX)
#define WROWSINGLE UNPACK; VMOVDQU Y8, (AX); VMOVDQU Y9, 1024(AX)
#include "blocks_wide_rows_amd64.h"
#undef WROWNAME
#undef WROWPAIR
#undef WROWSINGLE
#undef WIDENAME
#undef WIDE2NAME
#ifdef WIDEMAP
#undef WIDEMAP
#undef WIDECONST
#endif
#endif
#undef NAME
#undef NAME512
#undef NAME512X4
#undef NAME512X4V
#undef CONSTS
#undef SCALES
#undef UNPACK
#undef UNPACK2
