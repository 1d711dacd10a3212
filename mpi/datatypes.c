/* circulant-mpi: the buffers circulant sees. circulant moves contiguous bytes: a buffer of a
 * contiguous datatype is used as it is, any other is packed into a copy of its own (and
 * unpacked after the call); the `v` collectives' blocks likewise. And the reductions'
 * datatypes and operations in circulant's terms. */
#define _GNU_SOURCE
#include "layer.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

unsigned char g_empty[1]; /* a valid address for zero bytes */

/* Whether `count` elements of `type` are `count * size` bytes one after another from the
 * buffer's address: a predefined type without gaps, or duplicates and contiguous runs of one. */
int contiguous(MPI_Datatype type) {
  int ni, na, nd, combiner;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return 0;
  if (combiner == MPI_COMBINER_NAMED) {
    MPI_Count size, lb, extent;
    if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS) return 0;
    if (PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS) return 0;
    return lb == 0 && extent == size;
  }
  if ((combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS) || nd != 1 ||
      ni > 1 || na > 0)
    return 0;
  int ints[1];
  MPI_Aint addrs[1];
  MPI_Datatype inner;
  if (PMPI_Type_get_contents(type, ni, na, nd, ints, addrs, &inner) != MPI_SUCCESS) return 0;
  int yes = contiguous(inner);
  int ci, ca, cd, cc;
  if (PMPI_Type_get_envelope(inner, &ci, &ca, &cd, &cc) == MPI_SUCCESS && cc != MPI_COMBINER_NAMED)
    PMPI_Type_free(&inner);
  return yes;
}

/* The predefined datatypes programs use most, the most used first, each beside its size
 * (from MPI_Init; 0 before, -1 where this MPI lacks the type): a lookup of one of the first
 * four reads one cache line. */
static struct named {
  MPI_Datatype type;
  MPI_Count size;
} g_named[] __attribute__((aligned(64))) = {
    {MPI_BYTE, 0},     {MPI_INT, 0},     {MPI_DOUBLE, 0},       {MPI_CHAR, 0},
    {MPI_FLOAT, 0},    {MPI_LONG, 0},    {MPI_UNSIGNED, 0},     {MPI_UNSIGNED_LONG, 0},
    {MPI_LONG_LONG, 0}, {MPI_INT32_T, 0}, {MPI_INT64_T, 0},     {MPI_UINT32_T, 0},
    {MPI_UINT64_T, 0}, {MPI_INTEGER, 0}, {MPI_REAL, 0},         {MPI_DOUBLE_PRECISION, 0}};
enum { N_NAMED = sizeof g_named / sizeof g_named[0] };

void types_start(void) {
  for (int i = 0; i < N_NAMED; i++)
    if (g_named[i].type == MPI_DATATYPE_NULL ||
        PMPI_Type_size_x(g_named[i].type, &g_named[i].size) != MPI_SUCCESS)
      g_named[i].size = -1;
  for (int i = 0; i < GATE_TYPES; i++) {
    int preset = i < GATE_PRESET_TYPES && g_named[i].size > 0 && g_named[i].size <= UINT8_MAX;
    g_gate.types[i] = preset ? g_named[i].type : MPI_DATATYPE_NULL;
    g_gate.type_sizes[i] = preset ? (uint8_t)g_named[i].size : 0;
  }
}

/* The gate takes named type `i` where it has a free entry. */
static void gate_learn_type(int i) {
  if (!g_gate.open || g_named[i].size > UINT8_MAX) return;
  for (int j = GATE_PRESET_TYPES; j < GATE_TYPES; j++) {
    if (g_gate.types[j] == g_named[i].type) return;
    if (g_gate.types[j] == MPI_DATATYPE_NULL) {
      g_gate.type_sizes[j] = (uint8_t)g_named[i].size;
      g_gate.types[j] = g_named[i].type;
      return;
    }
  }
}

int type_size(MPI_Datatype type, MPI_Count *size) {
  for (int i = 0; i < N_NAMED; i++)
    if (g_named[i].type == type && g_named[i].size > 0) {
      *size = g_named[i].size;
      if (i >= GATE_PRESET_TYPES) gate_learn_type(i);
      return 1;
    }
  return PMPI_Type_size_x(type, size) == MPI_SUCCESS;
}

int type_bytes(MPI_Datatype type, MPI_Count count, uint64_t *bytes) {
  MPI_Count size;
  if (count < 0 || !type_size(type, &size) || size < 0) return 0;
  if (size != 0 && (uint64_t)count > (uint64_t)INT64_MAX / (uint64_t)size) return 0;
  *bytes = (uint64_t)count * (uint64_t)size;
  return 1;
}

MPI_Aint type_extent(MPI_Datatype type) {
  MPI_Count lb, extent;
  PMPI_Type_get_extent_x(type, &lb, &extent);
  return (MPI_Aint)extent;
}

int pack_into(void *dst, uint64_t bytes, const void *buf, MPI_Count count,
                     MPI_Datatype type, MPI_Comm comm) {
#if LAYER_LARGE_COUNT
  MPI_Count pos = 0;
  int rc = PMPI_Pack_c(buf, count, type, dst, (MPI_Count)bytes, &pos, comm);
#else
  int pos = 0;
  if (count > INT_MAX || bytes > INT_MAX) return MPI_ERR_COUNT;
  int rc = PMPI_Pack(buf, (int)count, type, dst, (int)bytes, &pos, comm);
#endif
  if (rc == MPI_SUCCESS && (uint64_t)pos != bytes) rc = MPI_ERR_TYPE;
  return rc;
}

int unpack_from(const void *src, uint64_t bytes, void *buf, MPI_Count count,
                       MPI_Datatype type, MPI_Comm comm) {
#if LAYER_LARGE_COUNT
  MPI_Count pos = 0;
  int rc = PMPI_Unpack_c(src, (MPI_Count)bytes, &pos, buf, count, type, comm);
#else
  int pos = 0;
  if (count > INT_MAX || bytes > INT_MAX) return MPI_ERR_COUNT;
  int rc = PMPI_Unpack(src, (int)bytes, &pos, buf, (int)count, type, comm);
#endif
  if (rc == MPI_SUCCESS && (uint64_t)pos != bytes) rc = MPI_ERR_TYPE;
  return rc;
}

int side_of(struct side *s, const void *buf, MPI_Count count, MPI_Datatype type) {
  memset(s, 0, sizeof *s);
  s->buf = (void *)buf;
  s->count = count;
  s->type = type;
  return type_bytes(type, count, &s->bytes);
}

/* Makes `s->at` point at its bytes; `fill`: pack the current content. */
int side_open(struct side *s, int fill, MPI_Comm comm) {
  if (s->bytes == 0) {
    s->at = g_empty;
    return MPI_SUCCESS;
  }
  if (contiguous(s->type)) {
    s->at = s->buf;
    return MPI_SUCCESS;
  }
  s->tmp = malloc(s->bytes);
  if (!s->tmp) return MPI_ERR_NO_MEM;
  s->at = s->tmp;
  return fill ? pack_into(s->tmp, s->bytes, s->buf, s->count, s->type, comm) : MPI_SUCCESS;
}

/* Unpacks a packed receive side (if `rc` is success) and frees its copy. */
int side_close(struct side *s, int unpack, int rc, MPI_Comm comm) {
  if (s->tmp && unpack && rc == MPI_SUCCESS)
    rc = unpack_from(s->tmp, s->bytes, s->buf, s->count, s->type, comm);
  free(s->tmp);
  s->tmp = NULL;
  return rc;
}

/* Without MPI_Pack_c, packing is limited to int sizes: such calls are not served. */
int packable(uint64_t bytes) {
#if LAYER_LARGE_COUNT
  (void)bytes;
  return 1;
#else
  return bytes <= INT_MAX;
#endif
}

int circulant_type(MPI_Datatype t) {
  int ni, na, nd, combiner;
  if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
      combiner != MPI_COMBINER_NAMED)
    return -1;
  int sz;
  if (PMPI_Type_size(t, &sz) != MPI_SUCCESS) return -1;
  if (t == MPI_INT || t == MPI_LONG || t == MPI_LONG_LONG_INT || t == MPI_LONG_LONG ||
      t == MPI_INT32_T || t == MPI_INT64_T || t == MPI_INTEGER || t == MPI_AINT ||
      t == MPI_OFFSET || t == MPI_COUNT || t == MPI_INTEGER4 || t == MPI_INTEGER8)
    return sz == 4 ? CIRCULANT_INT32 : sz == 8 ? CIRCULANT_INT64 : -1;
  if (t == MPI_UNSIGNED || t == MPI_UNSIGNED_LONG || t == MPI_UNSIGNED_LONG_LONG ||
      t == MPI_UINT32_T || t == MPI_UINT64_T)
    return sz == 4 ? CIRCULANT_UINT32 : sz == 8 ? CIRCULANT_UINT64 : -1;
  if (t == MPI_FLOAT || t == MPI_REAL || t == MPI_REAL4 || t == MPI_DOUBLE ||
      t == MPI_DOUBLE_PRECISION || t == MPI_REAL8)
    return sz == 4 ? CIRCULANT_FLOAT32 : sz == 8 ? CIRCULANT_FLOAT64 : -1;
  return -1;
}

int circulant_op(MPI_Op op, int dtype) {
  int integer = dtype != CIRCULANT_FLOAT32 && dtype != CIRCULANT_FLOAT64;
  if (op == MPI_SUM) return CIRCULANT_SUM;
  if (op == MPI_PROD) return CIRCULANT_PROD;
  if (op == MPI_MIN) return CIRCULANT_MIN;
  if (op == MPI_MAX) return CIRCULANT_MAX;
  if (integer && op == MPI_BAND) return CIRCULANT_BAND;
  if (integer && op == MPI_BOR) return CIRCULANT_BOR;
  if (integer && op == MPI_BXOR) return CIRCULANT_BXOR;
  return -1;
}

/* The `v` collectives: per rank a count of elements of the receive (gatherv, allgatherv) or
 * send (scatterv) type and a displacement in its extents. */
int packed_layout(int size, const MPI_Count *counts, const MPI_Aint *displs) {
  MPI_Aint at = 0;
  for (int j = 0; j < size; j++) {
    if (displs[j] != at) return 0;
    at += (MPI_Aint)counts[j];
  }
  return 1;
}

/* Copies between the blocks of `buf` (at `displs`, in `type`) and a packed buffer. */
int blocks_copy(int into_packed, unsigned char *packed, const uint64_t *bytes, int size,
                       void *buf, const MPI_Count *counts, const MPI_Aint *displs,
                       MPI_Datatype type, int skip, MPI_Comm comm) {
  MPI_Aint ext = type_extent(type);
  int contig = contiguous(type);
  uint64_t at = 0;
  for (int j = 0; j < size; j++) {
    char *block = (char *)buf + displs[j] * ext;
    if (j != skip && bytes[j]) {
      int rc = MPI_SUCCESS;
      if (contig)
        memcpy(into_packed ? (void *)(packed + at) : (void *)block,
               into_packed ? (void *)block : (void *)(packed + at), bytes[j]);
      else if (into_packed)
        rc = pack_into(packed + at, bytes[j], block, counts[j], type, comm);
      else
        rc = unpack_from(packed + at, bytes[j], block, counts[j], type, comm);
      if (rc != MPI_SUCCESS) return rc;
    }
    at += bytes[j];
  }
  return MPI_SUCCESS;
}

int type_kept(MPI_Datatype type, MPI_Datatype *owned) {
  int ni, na, nd, combiner;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
      combiner == MPI_COMBINER_NAMED)
    return 0;
  return PMPI_Type_dup(type, owned) == MPI_SUCCESS;
}
