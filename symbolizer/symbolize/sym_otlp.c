/* The OTLP rewrite's resolver on the symbolizer (sym_otlp.h). */
#include "symbolize/sym_otlp.h"

#include <errno.h>

#include "symbolize/symbolize.h"

static int find_file(void *arg, const char *htlhash, const char *gnu_build_id, opal_file_id *key)
{
	struct opal_symbolizer *s = arg;
	int err = -ENOENT;

	if (htlhash && opal_file_id_from_hex(htlhash, key) == 0)
		err = opal_symbolizer_ensure_file_id(s, key);
	if (err < 0 && gnu_build_id)
		err = opal_symbolizer_ensure_build_id(s, gnu_build_id, key);
	return err;
}

static int symbolize(void *arg, const opal_file_id *key, uint64_t address,
		     struct opal_sym_result *out)
{
	return opal_symbolize_native(arg, key, address, false, out);
}

int opal_symbolize_otlp(struct opal_symbolizer *s, struct opal_otlp_rx *rx,
			struct opal_otlp_rx_stats *st)
{
	const struct opal_otlp_resolver r = { .find_file = find_file, .symbolize = symbolize,
					      .arg = s };
	int err = opal_otlp_rx_rewrite(rx, &r, st);

	opal_symbolizer_flush(s);   /* the request's new SQLite rows, in one transaction */
	return err;
}
