/* Growable arrays: the element storage of the collector's lists (CIEs and
 * FDE ranges of a CFI section, the table builder's spans and bodies, the
 * aggregated processes, threads, mappings and stacks). */
#ifndef OPAL_COLLECTOR_ARRAY_H
#define OPAL_COLLECTOR_ARRAY_H

#include <stddef.h>

/* Makes room in *arr (an array of `elem`-byte elements with *cap of them
 * allocated) for `need` elements: the capacity becomes `first` (when 0)
 * and doubles until it holds them. Returns 0, or -ENOMEM (realloc failed
 * or the byte count would not fit a size_t), leaving *arr and *cap as
 * they were. The callers bound `need` by their own limits. */
int opal_array_reserve(void **arr, size_t *cap, size_t need, size_t elem, size_t first);

#endif
