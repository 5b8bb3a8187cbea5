/* Received OTLP profiles symbolized by this symbolizer: the resolver of
 * profile/otlp_rewrite.h on opal_symbolizer (symbolize.h). */
#ifndef OPAL_SYM_OTLP_H
#define OPAL_SYM_OTLP_H

#include "profile/otlp_rewrite.h"

struct opal_symbolizer;

/* Rewrites `rx` (opal_otlp_rx_rewrite) with what `s` knows: a Mapping's
 * file is found by its htlhash file ID (a collector's descriptor, cached
 * frames, an upload of that ID), else by its GNU build ID (uploads,
 * /usr/lib/debug, debuginfod: opal_symbolizer_ensure_build_id, which may
 * wait for a download); addresses are looked up as they are, through the
 * caches and the fleet upstream like every native lookup. Writes the new
 * SQLite rows at the end. Returns opal_otlp_rx_rewrite's result. */
int opal_symbolize_otlp(struct opal_symbolizer *s, struct opal_otlp_rx *rx,
			struct opal_otlp_rx_stats *st);

#endif
