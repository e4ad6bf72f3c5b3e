/*
 * grow.h - room for one more element in a growable array (v, n, cap):
 * the capacity doubles (from first) when the array is full.
 */
#ifndef QPOOL_GROW_H
#define QPOOL_GROW_H

#include <limits.h>
#include <stddef.h>
#include <stdlib.h>

#include "core/util.h"

/* v, or v reallocated with room for element n (of size bytes); *cap the
 * new capacity. Usage: v = xgrow(v, n, &cap, sizeof *v, 8); v[n++] = ... */
static inline void *xgrow(void *v, int n, int *cap, size_t size, int first)
{
    if (n < *cap) return v;
    if (*cap > INT_MAX / 2) abort(); /* never near: every caller's array is bounded far below */
    *cap = *cap ? *cap * 2 : (first > 0 ? first : 1);
    return xrealloc(v, size * (size_t)*cap);
}

#endif
