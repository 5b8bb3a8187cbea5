/* For unit tests: a symbol's value and size read from an ELF file's
 * .symtab with libelf, not with the code under test. Include after
 * <cmocka.h>. */
#ifndef OPAL_TEST_ELF_SYMBOL_H
#define OPAL_TEST_ELF_SYMBOL_H

#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Value of symbol `sym` in the .symtab of the ELF file open on `fd` (the
 * caller keeps it); *size (may be NULL) gets its st_size. Fails the test
 * when the symbol is missing; `what` names the file in that message. */
static __attribute__((unused)) uint64_t test_elf_symbol(int fd, const char *what,
							 const char *sym, uint64_t *size)
{
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	Elf_Scn *scn = NULL;
	uint64_t value = 0;
	bool found = false;
	while (!found && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			gelf_getsym(data, (int)i, &s);
			const char *n = elf_strptr(elf, sh.sh_link, s.st_name);
			if (n && strcmp(n, sym) == 0) {
				value = s.st_value;
				if (size)
					*size = s.st_size;
				found = true;
				break;
			}
		}
	}
	elf_end(elf);
	if (!found)
		fail_msg("symbol %s not in %s", sym, what);
	return value;
}

#endif
