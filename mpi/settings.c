/* circulant-mpi: the settings (CIRCULANT_MPI, CIRCULANT_MPI_STATS, CIRCULANT_MPI_EAGER) and the thresholds of
 * auto mode (built in, or from CIRCULANT_MPI_THRESHOLDS). */
#define _GNU_SOURCE
#include "layer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum mode g_mode = MODE_AUTO;
int g_print_stats;
int g_eager_comms = 0;

struct sized_ranges g_threshold[FORM_COUNT][OP_COUNT];

const struct ranges *ranges_of(const struct call *c) {
  static const struct ranges none;
  const struct sized_ranges *s =
      &g_threshold[variant_nonblocking(c->variant) ? FORM_NONBLOCKING : FORM_BLOCKING][c->op];
  /* One set for every size (the usual file): no need to ask the communicator's size. */
  if (s->n == 1 && s->ranks[0] == 0) return &s->r[0];
  int size = 0;
  if (s->n == 0 || !comm_size(c->comm, &size)) return &none;
  const struct ranges *r = &none;
  for (int i = 0; i < s->n && s->ranks[i] <= size; i++) r = &s->r[i];
  return r;
}

classes_t size_classes(int form, int op, int size) {
  const struct sized_ranges *s = &g_threshold[form][op];
  const struct ranges *r = NULL;
  for (int i = 0; i < s->n && s->ranks[i] <= size; i++) r = &s->r[i];
  classes_t classes = 0;
  for (int i = 0; r && i < r->n; i++)
    for (int k = 0; k <= LAST_CLASS; k++) {
      /* Class k holds the sizes from 2^(k-1) to 2^k - 1 (0: none; the last: to the end). */
      uint64_t lo = k ? 1ull << (k - 1) : 0,
               hi = k == 0 ? 0 : k == LAST_CLASS ? NEVER : (1ull << k) - 1;
      if (r->from[i] <= hi && r->to[i] >= lo) classes |= (classes_t)(1u << k);
    }
  return classes;
}

int in_ranges(const struct call *c, uint64_t bytes) {
  const struct ranges *r = ranges_of(c);
  for (int i = 0; i < r->n; i++)
    if (bytes >= r->from[i] && bytes <= r->to[i]) return 1;
  return 0;
}
const char *g_threshold_source = "built-in (mpi/thresholds-" LAYER_MPI ".txt)";

/* Built-in thresholds: the file mpi/thresholds-MPI.txt that circulant-mpi-calibrate wrote on
 * the 2-core machine of docs/performance.md, compiled in by ci/mpi-layer as the string
 * LAYER_THRESHOLDS (in the same format as a CIRCULANT_MPI_THRESHOLDS file). */
#ifndef LAYER_THRESHOLDS
#error "build with ci/mpi-layer, which defines LAYER_THRESHOLDS from mpi/thresholds-MPI.txt"
#endif

void die(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "circulant-mpi: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  layer_abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* One byte count of a thresholds line; dies naming `where` unless `text` is one. */
static uint64_t parse_bytes(const char *text, const char *where) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || *end || !*text || text[0] == '-' || text[0] == '+' || v == NEVER)
    die("%s: `%s` is not a byte count", where, text);
  return v;
}

/* Sets the ranges of communicators of `ranks` ranks or more in `s`, keeping sizes in order. */
static void set_sized(struct sized_ranges *s, int ranks, const struct ranges *r,
                      const char *where) {
  int i = 0;
  while (i < s->n && s->ranks[i] < ranks) i++;
  if (i == s->n || s->ranks[i] != ranks) {
    /* "8": MAX_SIZES. */
    if (s->n == MAX_SIZES) die("%s: more than 8 communicator sizes for one collective%s", where, "");
    memmove(&s->ranks[i + 1], &s->ranks[i], (size_t)(s->n - i) * sizeof s->ranks[0]);
    memmove(&s->r[i + 1], &s->r[i], (size_t)(s->n - i) * sizeof s->r[0]);
    s->n++;
  }
  s->ranks[i] = ranks;
  s->r[i] = *r;
}

/* Thresholds text: lines `COLLECTIVE RANGE...` or `COLLECTIVE never`, `#` comments, where a
 * range is `A-B` (A to B bytes), `A-` or `A` (A bytes and more) and a collective is a blocking
 * one (`bcast`) or, with an `i` before it, the nonblocking and persistent forms (`ibcast`),
 * either followed by `@P` for communicators of P ranks or more (without it: of any size); a
 * line sets the ranges of its collective, form and size, and the first line of a collective
 * and form in a text drops what an earlier text set for it. `source` names the text in
 * messages. */
static void parse_thresholds(const char *text, const char *source) {
  int touched[FORM_COUNT][OP_COUNT] = {{0}};
  int number = 0;
  while (*text) {
    char line[512];
    size_t len = strcspn(text, "\n");
    number++;
    if (len >= sizeof line) {
      char where[600];
      snprintf(where, sizeof where, "%s line %d", source, number);
      die("%s: a line longer than 511 characters%s", where, "");
    }
    memcpy(line, text, len);
    line[len] = 0;
    text += len + (text[len] == '\n');
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *save = NULL, *name = strtok_r(line, " \t\r", &save);
    if (!name) continue;
    char where[600];
    snprintf(where, sizeof where, "%s line %d", source, number);
    int ranks = 0;
    char *at = strchr(name, '@');
    if (at) {
      *at = 0;
      char *end;
      errno = 0;
      long v = strtol(at + 1, &end, 10);
      if (errno || *end || at[1] < '0' || at[1] > '9' || v < 1 || v > INT_MAX)
        die("%s: `@%s` is not a number of ranks (1 or more)", where, at + 1);
      ranks = (int)v;
    }
    int op = -1, form = FORM_BLOCKING;
    for (int i = 0; i < OP_COUNT; i++)
      if (strcmp(name, op_names[i]) == 0) op = i;
    for (int i = 0; i < OP_COUNT && op < 0; i++)
      if (name[0] == 'i' && strcmp(name + 1, op_names[i]) == 0) op = i, form = FORM_NONBLOCKING;
    if (op < 0) die("%s: unknown collective `%s`", where, name);
    struct ranges r = {0};
    int never = 0, words = 0;
    for (char *w = strtok_r(NULL, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) {
      words++;
      if (strcmp(w, "never") == 0) {
        never = 1;
        continue;
      }
      if (r.n == MAX_RANGES) die("%s: more than 16 ranges%s", where, "");
      char range[64];
      snprintf(range, sizeof range, "%s", w);
      char *dash = strchr(w, '-');
      if (dash) *dash = 0;
      r.from[r.n] = parse_bytes(w, where);
      r.to[r.n] = dash && dash[1] ? parse_bytes(dash + 1, where) : NEVER;
      if (r.to[r.n] < r.from[r.n]) die("%s: `%s`, a range that ends before it begins", where, range);
      r.n++;
    }
    if (words == 0 || (never && words != 1))
      die("%s: expected `COLLECTIVE never` or `COLLECTIVE` and byte ranges (`A-B`, `A-`, `A`)%s",
          where, "");
    if (!touched[form][op]) g_threshold[form][op].n = 0;
    touched[form][op] = 1;
    set_sized(&g_threshold[form][op], ranks, &r, where);
  }
}

static void read_thresholds(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) die("cannot read CIRCULANT_MPI_THRESHOLDS=%s: %s", path, strerror(errno));
  size_t cap = 4096, len = 0;
  char *text = malloc(cap);
  while (text) {
    size_t got = fread(text + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0) break;
    if (len + 1 == cap) text = realloc(text, cap *= 2);
  }
  int failed = ferror(f);
  fclose(f);
  if (!text || failed) die("cannot read CIRCULANT_MPI_THRESHOLDS=%s%s", path, "");
  text[len] = 0;
  if (strlen(text) != len) die("CIRCULANT_MPI_THRESHOLDS=%s: not a text file%s", path, "");
  parse_thresholds(text, path);
  free(text);
  g_threshold_source = path;
}

void read_settings(void) {
  const char *mode = getenv("CIRCULANT_MPI");
  if (!mode || !*mode || strcmp(mode, "auto") == 0)
    g_mode = MODE_AUTO;
  else if (strcmp(mode, "on") == 0)
    g_mode = MODE_ON;
  else if (strcmp(mode, "off") == 0)
    g_mode = MODE_OFF;
  else
    die("CIRCULANT_MPI=%s: expected off, on or auto%s", mode, "");
  const char *stats = getenv("CIRCULANT_MPI_STATS");
  if (stats && *stats) {
    if (strcmp(stats, "1") == 0)
      g_print_stats = 1;
    else if (strcmp(stats, "0") != 0)
      die("CIRCULANT_MPI_STATS=%s: expected 0 or 1%s", stats, "");
  }
  g_gate.counting = g_print_stats;
  const char *eager = getenv("CIRCULANT_MPI_EAGER");
  if (eager && *eager) {
    char *end;
    errno = 0;
    long v = strtol(eager, &end, 10);
    if (errno || *end || v < 0 || v > INT_MAX)
      die("CIRCULANT_MPI_EAGER=%s: expected a number of communicators (0 or more)%s", eager, "");
    g_eager_comms = (int)v;
  }
  memset(g_threshold, 0, sizeof g_threshold);
  parse_thresholds(LAYER_THRESHOLDS, "the built-in thresholds");
  const char *file = getenv("CIRCULANT_MPI_THRESHOLDS");
  if (file && *file) read_thresholds(file);
}
