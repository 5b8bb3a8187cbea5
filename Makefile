# opal build. `make run` profiles this machine; `make test` runs every test;
# `make check` the fast tier that needs neither root nor BPF.
# Dependencies are installed by scripts/install-deps.sh (idempotent).

BUILD      ?= build
GEN        := $(BUILD)/gen
CC         ?= cc
CLANG      ?= clang
BPFTOOL    ?= bpftool
PROTOC_C   ?= protoc-c
DURATION   ?= 10
FREQUENCY  ?= 20
INTERVAL   ?= 5
DEMO       ?= 1
OFFCPU     ?= 0
OUT        ?= out

PKGS       := libbpf libelf libdw sqlite3 libprotobuf-c jansson libmicrohttpd libcurl zlib libcrypto libseccomp \
              liblzma libzstd libdebuginfod libarchive libdeflate
PKG_CFLAGS  = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS    = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# CPPFLAGS and LDFLAGS come from the caller only (dpkg-buildflags' hardening
# under `make deb`); CFLAGS defaults to -O2 -g.
CFLAGS     ?= -O2 -g
CFLAGS     += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
              -D_GNU_SOURCE -fno-strict-aliasing -I. -I$(GEN) -I$(BUILD) $(PKG_CFLAGS)
LDLIBS     += $(PKG_LIBS) -liberty -lpthread

PROTOS     := $(shell find proto -name '*.proto' | sort)
PROTO_C    := $(patsubst proto/%.proto,$(GEN)/%.pb-c.c,$(PROTOS))
PROTO_H    := $(PROTO_C:.c=.h)
PROTO_O    := $(PROTO_C:.c=.o)

# Each daemon is its folder tree; its main.c sits at the top. Inside a
# daemon includes are written from the daemon's folder ("proc/files.h"),
# elsewhere (shared/, tests, tools) from the repository's ("shared/log.h",
# "symbolizer/profile/otlp.h"). docs/architecture.md has the layer map.
SHARED_SRC := $(wildcard shared/*.c)
COLL_SRC   := $(filter-out collector/main.c,$(shell find collector -name '*.c' | sort))
SYM_SRC    := $(filter-out symbolizer/main.c,$(shell find symbolizer -name '*.c' | sort))
SHARED_O   := $(patsubst %.c,$(BUILD)/%.o,$(SHARED_SRC))
COLL_O     := $(patsubst %.c,$(BUILD)/%.o,$(COLL_SRC))
SYM_O      := $(patsubst %.c,$(BUILD)/%.o,$(SYM_SRC))

LIBSHARED  := $(BUILD)/libopal_shared.a
LIBCOLL    := $(BUILD)/libopal_collector.a
LIBSYM     := $(BUILD)/libopal_symbolizer.a

BPF_SRC    := $(wildcard bpf/*.bpf.c)
BPF_O      := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRC))
SKELS      := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRC))

BINS       := $(BUILD)/opal-collector $(BUILD)/opal-symbolizer $(BUILD)/opal-report \
              $(BUILD)/opal-debuginfo

UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
# Unit tests left out of `make check` because cases of theirs need root:
# BPF programs and maps (sampling, unwind), files opened through
# /proc/self/map_files as the collector opens them (unwind:
# CAP_CHECKPOINT_RESTORE), other users' files read with the collector's
# CAP_DAC_READ_SEARCH (debuglink). docs/testing.md.
ROOT_UNIT  := test_collector_sampling test_collector_unwind test_collector_debuglink
CHECK_BINS := $(filter-out $(addprefix $(BUILD)/tests/,$(ROOT_UNIT)),$(UNIT_BINS))
FIXTURES   := $(BUILD)/fixtures/.stamp

.PHONY: all deps run test check unit integration fixtures fuzz clean
.DELETE_ON_ERROR:
.SECONDARY: $(PROTO_C) $(PROTO_H) $(BUILD)/vmlinux.h $(BPF_O) $(SKELS)

all: $(BINS)

deps:
	@scripts/install-deps.sh

# ---- generated code ------------------------------------------------------
$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto
	@mkdir -p $(GEN)
	$(PROTOC_C) --c_out=$(GEN) -Iproto $<

# The flame graph page as a C string: each line of the template becomes a
# string literal with \, " and ? escaped (? so no trigraph can form).
$(GEN)/flamegraph_html.h: symbolizer/profile/flamegraph.html
	@mkdir -p $(GEN)
	{ echo '/* Generated from symbolizer/profile/flamegraph.html by the Makefile. */'; \
	  echo 'static const char opal_flamegraph_template[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/symbolizer/profile/flamegraph.o: $(GEN)/flamegraph_html.h

$(BUILD)/vmlinux.h:
	@mkdir -p $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(BUILD)/vmlinux.h $(wildcard bpf/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -I$(BUILD) -Ibpf -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@

# BPF programs built only for unit tests (tests/bpf), e.g. one the verifier
# rejects: skeletons build/tests/NAME.skel.h.
$(BUILD)/tests/bpf/%.bpf.o: tests/bpf/%.bpf.c $(BUILD)/vmlinux.h
	@mkdir -p $(dir $@)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -I$(BUILD) -Ibpf -c $< -o $@
$(BUILD)/tests/%.skel.h: $(BUILD)/tests/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@
$(BUILD)/tests/test_collector_bpf_load: $(BUILD)/tests/unverifiable.skel.h

# ---- C objects -----------------------------------------------------------
$(GEN)/%.pb-c.o: $(GEN)/%.pb-c.c $(PROTO_H)
	$(CC) $(CPPFLAGS) $(CFLAGS) -w -c $< -o $@

# The include root of each source: its daemon's folder, or both daemons'
# for tests and tools (no path exists in both trees: tests/lint/layout.sh).
SRC_INC    := -Icollector -Isymbolizer
$(BUILD)/collector/%.o: SRC_INC := -Icollector
$(BUILD)/symbolizer/%.o: SRC_INC := -Isymbolizer
$(BUILD)/shared/%.o: SRC_INC :=

$(BUILD)/%.o: %.c $(PROTO_H) $(SKELS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SRC_INC) -MMD -MP -c $< -o $@

# Not in $(BUILD)/deb and $(BUILD)/deb-root: the package build's tree and
# the package test's Debian root have their own.
-include $(shell find $(BUILD) \( -path $(BUILD)/deb -o -path $(BUILD)/deb-root \) -prune \
	-o -name '*.d' -type f -print 2>/dev/null)

# Thin archives (T): members are named by their path, so files of the same
# name in different folders stay apart.
$(LIBSHARED): $(SHARED_O) $(PROTO_O)
	rm -f $@ && $(AR) rcsT $@ $^
$(LIBCOLL): $(COLL_O)
	rm -f $@ && $(AR) rcsT $@ $^
$(LIBSYM): $(SYM_O)
	rm -f $@ && $(AR) rcsT $@ $^

$(BUILD)/opal-collector: $(BUILD)/collector/main.o $(LIBCOLL) $(LIBSHARED)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BUILD)/opal-symbolizer: $(BUILD)/symbolizer/main.o $(LIBSYM) $(LIBSHARED)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BUILD)/opal-report: $(BUILD)/tools/opal-report.o $(LIBSYM) $(LIBSHARED)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BUILD)/opal-debuginfo: $(BUILD)/tools/opal-debuginfo.o $(LIBSYM) $(LIBSHARED)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

# ---- tests -----------------------------------------------------------------
$(FIXTURES): $(wildcard tests/fixtures/*/*) tests/fixtures/build.sh
	tests/fixtures/build.sh $(BUILD)/fixtures
	@touch $@

fixtures: $(FIXTURES)

$(BUILD)/tests/%: tests/unit/%.c $(LIBCOLL) $(LIBSYM) $(LIBSHARED)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(SRC_INC) -Itests/unit -MMD -MP -MF $@.d $< \
		$(LIBCOLL) $(LIBSYM) $(LIBSHARED) $(LDLIBS) -lcmocka -o $@

unit: $(UNIT_BINS) $(FIXTURES)
	tests/run-unit.sh $(BUILD) $(UNIT_BINS)

# No root, no BPF, no network: the unit tests but ROOT_UNIT, and the layer
# map's check, two test binaries at a time: about 20 s once built on 2
# CPUs (docs/testing.md).
check: $(CHECK_BINS) $(FIXTURES)
	OPAL_UNIT_JOBS=$${OPAL_UNIT_JOBS:-2} tests/run-unit.sh $(BUILD) $(CHECK_BINS)
	python3 tests/lint/layout.py

integration: all $(FIXTURES)
	tests/run-integration.sh $(BUILD)

# libFuzzer targets, each run briefly: the CFI table builder (runs as root
# over any user's binaries), the upload validator, the JSON parsers, the
# Go pclntab and CPython code-object readers, the OTLP profiles
# receiver's decode and rewrite, and the perf map and jitdump readers.
FUZZ_SECONDS ?= 20

fuzz: all $(FIXTURES)
	tests/run-fuzz.sh $(BUILD) $(FUZZ_SECONDS)

test: deps
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) fuzz
	$(MAKE) integration

run: deps
	$(MAKE) all
	scripts/run.sh --build $(BUILD) --out $(OUT) --duration $(DURATION) --frequency $(FREQUENCY) --interval $(INTERVAL) --demo $(DEMO) --offcpu $(OFFCPU)

clean:
	rm -rf $(BUILD)

# ---- install (make install PREFIX=/usr DESTDIR=...) -------------------------
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
SBINDIR     ?= $(PREFIX)/sbin
SYSCONFDIR  ?= /etc
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
MANDIR      ?= $(PREFIX)/share/man
DOCDIR      ?= $(PREFIX)/share/doc/opal
VERSION     ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
UNITS       := opal-collector.service opal-symbolizer.service opal-symbolizer.socket
# The daemons are system services (FHS: sbin); the tools are for anyone.
INST_SBINS  := opal-collector opal-symbolizer
INST_BINS   := opal-report
OPT_BINS    := opal-debuginfo
MAN8        := $(BUILD)/man/opal-collector.8 $(BUILD)/man/opal-symbolizer.8
MAN1        := $(BUILD)/man/opal-report.1 $(BUILD)/man/opal-debuginfo.1

.PHONY: install uninstall man

# Manual pages are the programs' --help, plus docs/man/<prog>.h2m sections.
$(BUILD)/man/%.8: $(BUILD)/% docs/man/%.h2m
	@mkdir -p $(dir $@)
	help2man --no-info --section 8 --version-string="$(VERSION)" --no-discard-stderr \
		--include docs/man/$*.h2m --output $@ $<
$(BUILD)/man/%.1: $(BUILD)/% docs/man/%.h2m
	@mkdir -p $(dir $@)
	help2man --no-info --section 1 --version-string="$(VERSION)" --no-discard-stderr \
		--include docs/man/$*.h2m --output $@ $<

man: $(MAN8) $(MAN1)

install: all man
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/opal \
		$(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DOCDIR)
	install -m 0755 $(addprefix $(BUILD)/,$(INST_SBINS)) $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(addprefix $(BUILD)/,$(INST_BINS)) $(DESTDIR)$(BINDIR)/
	for b in $(OPT_BINS); do \
		if [ -x $(BUILD)/$$b ]; then install -m 0755 $(BUILD)/$$b $(DESTDIR)$(BINDIR)/; fi; \
	done
	for u in $(UNITS); do \
		sed -e 's|@sbindir@|$(SBINDIR)|g' -e 's|@sysconfdir@|$(SYSCONFDIR)|g' \
		    -e 's|@docdir@|$(DOCDIR)|g' systemd/$$u.in > $(DESTDIR)$(UNITDIR)/$$u.tmp && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u.tmp && \
		mv $(DESTDIR)$(UNITDIR)/$$u.tmp $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	install -m 0644 systemd/opal.sysusers $(DESTDIR)$(SYSUSERSDIR)/opal.conf
	install -m 0644 systemd/opal.tmpfiles $(DESTDIR)$(TMPFILESDIR)/opal.conf
	@# An edited configuration is never overwritten.
	if [ -e $(DESTDIR)$(SYSCONFDIR)/opal/opal.env ]; then \
		echo "install: keeping existing $(DESTDIR)$(SYSCONFDIR)/opal/opal.env"; \
	else \
		install -m 0644 systemd/opal.env $(DESTDIR)$(SYSCONFDIR)/opal/opal.env; \
	fi
	install -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	@if [ -z "$(DESTDIR)" ]; then \
		echo "install: now run: systemd-sysusers && systemd-tmpfiles --create $(TMPFILESDIR)/opal.conf &&" \
			"systemctl daemon-reload && systemctl enable --now opal-symbolizer.socket opal-collector.service"; \
	fi

# Removes what install put there; a configuration edited since install is
# kept (and named), as package managers do until a purge.
uninstall:
	rm -f $(addprefix $(DESTDIR)$(SBINDIR)/,$(INST_SBINS))
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(INST_BINS) $(OPT_BINS))
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS))
	rm -f $(DESTDIR)$(SYSUSERSDIR)/opal.conf $(DESTDIR)$(TMPFILESDIR)/opal.conf
	rm -f $(DESTDIR)$(MANDIR)/man8/opal-collector.8 $(DESTDIR)$(MANDIR)/man8/opal-symbolizer.8 \
		$(DESTDIR)$(MANDIR)/man1/opal-report.1 $(DESTDIR)$(MANDIR)/man1/opal-debuginfo.1
	rm -rf $(DESTDIR)$(DOCDIR)
	if cmp -s systemd/opal.env $(DESTDIR)$(SYSCONFDIR)/opal/opal.env; then \
		rm -f $(DESTDIR)$(SYSCONFDIR)/opal/opal.env; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/opal/opal.env ]; then \
		echo "uninstall: keeping edited $(DESTDIR)$(SYSCONFDIR)/opal/opal.env"; \
	fi
	rmdir $(DESTDIR)$(SYSCONFDIR)/opal 2>/dev/null || true

# ---- Debian package (make deb [DEB_VERSION=...] [DEB_OUT=...]) ----------------
# opal_VERSION_amd64.deb in DEB_OUT, built by dpkg-buildpackage from debian/
# in a copy of the tree; VERSION from `git describe` unless given.
DEB_OUT     ?= $(BUILD)/deb
DEB_VERSION ?=

.PHONY: deb
deb:
	scripts/deb.sh --out $(DEB_OUT) $(if $(DEB_VERSION),--version $(DEB_VERSION))

# ---- benchmarks --------------------------------------------------------------
# The symbolization benchmark's driver; bench/symbolize/run.sh runs it.
.PHONY: bench-symbolize
bench-symbolize: $(BUILD)/bench/bench_symbolize

$(BUILD)/bench/bench_symbolize: bench/symbolize/bench_symbolize.c $(LIBSYM) $(LIBSHARED)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(SRC_INC) $< $(LIBSYM) $(LIBSHARED) $(LDLIBS) -o $@

# The symbolizer's steady state: a fake collector replaying one interval
# (bench/steady/run.sh runs it, as root).
.PHONY: bench-steady
bench-steady: all $(BUILD)/bench/bench_replay
	bench/steady/run.sh --build $(BUILD)

$(BUILD)/bench/bench_replay: bench/steady/replay.c $(LIBSHARED)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(SRC_INC) $< $(LIBSHARED) $(LDLIBS) -o $@

# Unwinding completeness and profiler overhead (docs/performance.md), as
# root: `make bench-unwind` (about 2-3 minutes), `make bench-overhead` (7-11
# minutes; BENCH_REPEAT runs of each tool at each frequency, and rounds),
# `make bench-churn` (about 2.5 minutes per BENCH_REPEAT).
BENCH_DURATION ?= 30
BENCH_REPEAT   ?= 5
.PHONY: bench-unwind bench-overhead bench-churn bench-scale
bench-unwind: all
	bench/unwind/run.sh --build $(BUILD) --duration $(BENCH_DURATION)
bench-overhead: all
	bench/overhead/run.sh --build $(BUILD) --repeat $(BENCH_REPEAT) --rounds $(BENCH_REPEAT)
bench-churn: all
	bench/churn/run.sh --build $(BUILD) --repeat $(BENCH_REPEAT)
bench-scale: all
	bench/scale/run.sh --build $(BUILD) --repeat $(BENCH_REPEAT)
