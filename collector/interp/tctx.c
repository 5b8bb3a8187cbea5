/* Thread context walk parameters (tctx.h). */
#include "interp/tctx.h"

#include <errno.h>
#include <string.h>
#include "proc/procctx.h"

/* A DTV walk to `module` (0: not resolved yet) at `offset`. */
static int dtv_walk(uint64_t module, uint64_t offset, struct opal_tctx_walk *w)
{
	if (module == 0)
		return -EAGAIN;
	w->model = OPAL_TCTX_DTV;
	w->module = module;
	w->offset = offset;
	return 0;
}

int opal_tctx_walk_for(pid_t pid, const struct opal_tls_var *v, uint64_t bias, bool exe,
		       uint64_t lo, uint64_t hi, struct opal_tctx_walk *w)
{
	uint64_t got[2], arg[2];
	int err;

	memset(w, 0, sizeof(*w));
	if (exe) {
		w->model = OPAL_TCTX_STATIC;
		w->tpoff = (int64_t)v->value - (int64_t)opal_tls_exe_offset(v);
		return 0;
	}
	if (v->tlsdesc_got) {
		if ((err = opal_proc_read_mem(pid, v->tlsdesc_got + bias, got, sizeof(got))) < 0)
			return err;
		if ((int64_t)got[1] < 0) {   /* _dl_tlsdesc_return's argument: static TLS */
			w->model = OPAL_TCTX_STATIC;
			w->tpoff = (int64_t)got[1];
			return 0;
		}
		if (got[1] == 0 || (got[1] >= lo && got[1] < hi))
			return -EAGAIN;   /* lazy: still the relocation's own address */
		/* _dl_tlsdesc_dynamic's argument: struct tlsdesc_dynamic_arg,
		 * starting with tls_index { module, offset } */
		if ((err = opal_proc_read_mem(pid, got[1], arg, sizeof(arg))) < 0)
			return err;
		return dtv_walk(arg[0], arg[1], w);
	}
	if (v->dtpmod_got) {
		if ((err = opal_proc_read_mem(pid, v->dtpmod_got + bias, &arg[0], 8)) < 0)
			return err;
		arg[1] = v->value;
		if (v->dtpoff_got &&
		    (err = opal_proc_read_mem(pid, v->dtpoff_got + bias, &arg[1], 8)) < 0)
			return err;
		return dtv_walk(arg[0], arg[1], w);
	}
	if (v->tpoff_got) {
		if ((err = opal_proc_read_mem(pid, v->tpoff_got + bias, &got[0], 8)) < 0)
			return err;
		w->model = OPAL_TCTX_STATIC;
		w->tpoff = (int64_t)got[0];
		return 0;
	}
	return -ENOTSUP;
}
