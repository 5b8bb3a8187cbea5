/* Minimal ELF image holding one CFI section (see unwind_image.h). Layout:
 * Elf64_Ehdr | section bytes (padded to 8) | .shstrtab | 3 Elf64_Shdr
 * (null, the CFI section, .shstrtab). */
#include "unwind/table/unwind_image.h"

#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

static const char shstrtab[] = "\0.eh_frame\0.debug_frame\0.shstrtab";
#define NAME_EH_FRAME    1
#define NAME_DEBUG_FRAME 11
#define NAME_SHSTRTAB    24

static size_t align8(size_t v)
{
	return (v + 7) & ~(size_t)7;
}

int opal_cfi_image_init(struct opal_cfi_image *img, bool eh_frame, size_t size, uint64_t sh_addr)
{
	memset(img, 0, sizeof(*img));
	if (size > SIZE_MAX / 2)
		return -E2BIG;
	size_t data_off = sizeof(Elf64_Ehdr);
	size_t str_off = data_off + align8(size);
	size_t sh_off = align8(str_off + sizeof(shstrtab));
	size_t len = sh_off + 3 * sizeof(Elf64_Shdr);

	img->buf = calloc(1, len);
	if (!img->buf)
		return -ENOMEM;
	img->len = len;
	img->bytes = img->buf + data_off;
	img->size = size;

	Elf64_Ehdr eh = {
		.e_type = ET_DYN,
		.e_machine = EM_X86_64,   /* libdw picks its ABI CFI defaults from it */
		.e_version = EV_CURRENT,
		.e_shoff = sh_off,
		.e_ehsize = sizeof(Elf64_Ehdr),
		.e_shentsize = sizeof(Elf64_Shdr),
		.e_shnum = 3,
		.e_shstrndx = 2,
	};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	memcpy(img->buf, &eh, sizeof(eh));
	memcpy(img->buf + str_off, shstrtab, sizeof(shstrtab));

	Elf64_Shdr sh[3] = {
		[1] = {
			.sh_name = eh_frame ? NAME_EH_FRAME : NAME_DEBUG_FRAME,
			.sh_type = SHT_PROGBITS,
			.sh_flags = eh_frame ? SHF_ALLOC : 0,
			.sh_addr = sh_addr,
			.sh_offset = data_off,
			.sh_size = size,
			.sh_addralign = 8,
		},
		[2] = {
			.sh_name = NAME_SHSTRTAB,
			.sh_type = SHT_STRTAB,
			.sh_offset = str_off,
			.sh_size = sizeof(shstrtab),
			.sh_addralign = 1,
		},
	};
	memcpy(img->buf + sh_off, sh, sizeof(sh));
	return 0;
}

int opal_cfi_image_open(struct opal_cfi_image *img)
{
	img->elf = elf_memory((char *)img->buf, img->len);
	if (!img->elf)
		return -ENOEXEC;
	Elf_Scn *scn = elf_getscn(img->elf, 1);
	img->data = scn ? elf_getdata(scn, NULL) : NULL;
	if (!img->data || img->data->d_size != img->size)
		return -ENOEXEC;
	return 0;
}

void opal_cfi_image_free(struct opal_cfi_image *img)
{
	if (img->elf)
		elf_end(img->elf);
	free(img->buf);
	memset(img, 0, sizeof(*img));
}
