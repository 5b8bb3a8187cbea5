/* Tombstoned DWARF addresses (sym_tombstone.h). */
#include "symbolize/sym_tombstone.h"

#include <gelf.h>

bool opal_elf_zero_is_code(Elf *elf)
{
	size_t n;

	if (!elf || elf_getphdrnum(elf, &n) != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    ph.p_vaddr == 0 && ph.p_offset > 0 && ph.p_memsz > 0)
			return true;
	}
	return false;
}
