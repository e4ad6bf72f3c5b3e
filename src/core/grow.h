/*
 * grow.h - room for one more element in a growable array (v, n, cap):
 * the capacity doubles (from first) when the array is full.
 */
#ifndef QPOOL_GROW_H
#define QPOOL_GROW_H

#include <stddef.h>

#include "core/util.h"

/* v, or v reallocated with room for element n (of size bytes); *cap the
 * new capacity. Usage: v = xgrow(v, n, &cap, sizeof *v, 8); v[n++] = ... */
static inline void *xgrow(void *v, int n, int *cap, size_t size, int first)
{
    if (n < *cap) return v;
    *cap = *cap ? *cap * 2 : first;
    return xrealloc(v, size * (size_t)*cap);
}

#endif
