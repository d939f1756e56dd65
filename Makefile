# iowhy: `make` builds what iowhy needs (BPF objects, the recorder, .venv with iowhy
# installed, the man page and completions); `make test` runs lint and every test tier;
# `make demo` is the main job; `make test-unit` runs the unit tier only and needs nothing
# but python3-venv (no root). On a fresh Debian 12 machine, as root, each target installs
# the packages it needs first (quietly when everything is already there): `make` only the
# build's, `make test`, `make demo`, `make lab` and `make gallery` also their own, and
# build lab/emudisk.

SHELL := /bin/bash
PYTHON ?= /usr/bin/python3
VENV := .venv
OUT := probes/.output
CLANG ?= clang
BPFTOOL ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' analyzer/iowhy/__init__.py)
ARCH := $(shell uname -m | sed 's/x86_64/x86/; s/aarch64/arm64/')

# What building and running iowhy needs (`make`, `make all`).
APT_PACKAGES := clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev pkg-config make \
	gcc python3 python3-venv python3-dev util-linux
# The emulated disk of the lab and the lab tests (lab/emudisk, a FUSE daemon).
FUSE_PACKAGES := fuse3 libfuse3-dev
# What only the tests need on top (`make test`): filesystems, independent tools to check
# iowhy against, the lab workloads' programs, a browser for the PNG output.
TEST_PACKAGES := xfsprogs e2fsprogs btrfs-progs bpftrace strace fio sqlite3 eatmydata chromium \
	linux-perf zsh blktrace
# What the demo, the lab and the gallery need on top (`make demo`, `make lab`,
# `make gallery`): the workloads' programs and the kernel tarball they extract.
LAB_PACKAGES := xfsprogs e2fsprogs btrfs-progs fio sqlite3 eatmydata xz-utils tar \
	linux-source-6.1 chromium
# The recorder: main's steps in recorder.c, each part in its own file (recorder.h).
RECORDER_SRC := probes/recorder.c probes/rec_options.c probes/rec_writer.c probes/rec_compact.c \
	probes/rec_drain.c probes/rec_stats.c probes/rec_probes.c probes/rec_workload.c \
	probes/rec_cgroup.c probes/rec_flight.c probes/rec_top.c
PY_SRC := $(shell find analyzer reports lab -name '*.py' 2>/dev/null) setup.cfg pyproject.toml

.PHONY: all deps probes probes-empty bpf-primitives venv emudisk lint test test-unit test-fast demo lab \
	gallery bench clean

all: probes venv man completions

# -- system packages ---------------------------------------------------------------
# One stamp per package set, so `make` never installs what only the tests or the lab need.
define install_missing
	@mkdir -p $(OUT)
	@missing=$$(for p in $(1); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		if [ "$$(id -u)" != 0 ]; then echo "make: need root to install $$missing" >&2; exit 1; fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
			|| { echo "make: apt-get install failed for: $$missing" >&2; exit 1; }; \
	fi
	@touch $@
endef

deps: $(OUT)/.deps
$(OUT)/.deps: Makefile
	$(call install_missing,$(APT_PACKAGES))
$(OUT)/.deps-fuse: Makefile | $(OUT)/.deps
	$(call install_missing,$(FUSE_PACKAGES))
$(OUT)/.deps-test: Makefile | $(OUT)/.deps
	$(call install_missing,$(TEST_PACKAGES))
$(OUT)/.deps-lab: Makefile | $(OUT)/.deps
	$(call install_missing,$(LAB_PACKAGES))

# -- probes -------------------------------------------------------------------------
probes: probes/iowhy-record

$(OUT)/vmlinux.h: | $(OUT)/.deps
	@test -r /sys/kernel/btf/vmlinux || { echo "make: no /sys/kernel/btf/vmlinux: iowhy needs a kernel with BTF (CONFIG_DEBUG_INFO_BTF=y)" >&2; exit 1; }
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(OUT)/iowhy.bpf.o: probes/iowhy.bpf.c probes/iowhy.h probes/core_fixes.bpf.h $(OUT)/vmlinux.h
	$(CLANG) -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -I$(OUT) -Iprobes \
		-Wall -Wno-unused-function -c probes/iowhy.bpf.c -o $@.tmp.o
	$(BPFTOOL) gen object $@ $@.tmp.o && rm -f $@.tmp.o

$(OUT)/iowhy.skel.h: $(OUT)/iowhy.bpf.o
	$(BPFTOOL) gen skeleton $< name iowhy_bpf > $@

probes/iowhy-record: $(RECORDER_SRC) probes/recorder.h probes/rec_compact.h probes/iowhy.h $(OUT)/iowhy.skel.h \
		analyzer/iowhy/__init__.py
	$(CC) -O2 -g -Wall -Wextra -Wno-unused-parameter -I$(OUT) -Iprobes $(RECORDER_SRC) \
		-DIOWHY_VERSION='"$(VERSION)"' \
		-o $@ -lbpf -lelf -lz -lzstd -pthread

# The recorder over probes that return at once (IOWHY_EMPTY_PROBES): only for
# `bench_record.py --only floor`, which times the kernel's dispatch to them.
probes-empty: $(OUT)/iowhy-record-empty
$(OUT)/empty/iowhy.bpf.o: probes/iowhy.bpf.c probes/iowhy.h probes/core_fixes.bpf.h $(OUT)/vmlinux.h
	@mkdir -p $(OUT)/empty
	$(CLANG) -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -DIOWHY_EMPTY_PROBES -I$(OUT) \
		-Iprobes -Wall -Wno-unused-function -c probes/iowhy.bpf.c -o $@.tmp.o
	$(BPFTOOL) gen object $@ $@.tmp.o && rm -f $@.tmp.o

$(OUT)/empty/iowhy.skel.h: $(OUT)/empty/iowhy.bpf.o
	$(BPFTOOL) gen skeleton $< name iowhy_bpf > $@

$(OUT)/iowhy-record-empty: $(RECORDER_SRC) probes/recorder.h probes/rec_compact.h probes/iowhy.h \
		$(OUT)/empty/iowhy.skel.h analyzer/iowhy/__init__.py
	$(CC) -O2 -g -Wall -Wextra -Wno-unused-parameter -I$(OUT)/empty -Iprobes $(RECORDER_SRC) \
		-DIOWHY_VERSION='"$(VERSION)"' \
		-o $@ -lbpf -lelf -lz -lzstd -pthread

# What one call of each BPF primitive the probes use costs here (bench/bpf_primitives.c;
# bench/README.md): built on demand, run as root with probes/.output/bpf_primitives.
bpf-primitives: $(OUT)/bpf_primitives
$(OUT)/bpf_primitives.bpf.o: bench/bpf_primitives.bpf.c $(OUT)/vmlinux.h
	$(CLANG) -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -I$(OUT) \
		-Wall -c bench/bpf_primitives.bpf.c -o $@.tmp.o
	$(BPFTOOL) gen object $@ $@.tmp.o && rm -f $@.tmp.o

$(OUT)/bpf_primitives.skel.h: $(OUT)/bpf_primitives.bpf.o
	$(BPFTOOL) gen skeleton $< name bpf_primitives > $@

$(OUT)/bpf_primitives: bench/bpf_primitives.c $(OUT)/bpf_primitives.skel.h
	$(CC) -O2 -g -Wall -Wextra -I$(OUT) bench/bpf_primitives.c -o $@ -lbpf -lelf -lz

# -- lab: the emulated disk (FUSE daemon) --------------------------------------------
# Built by the targets that use it (test, demo, lab, gallery), not by `make`: it needs
# libfuse3-dev, which only they install.
lab/emudisk: lab/emudisk.c | $(OUT)/.deps-fuse
	$(CC) -O2 -g -Wall -Wextra -Wno-unused-parameter lab/emudisk.c -o $@ \
		$$(pkg-config --cflags --libs fuse3) -lm

emudisk: $(VENV)/libexec/iowhy/emudisk
$(VENV)/libexec/iowhy/emudisk: lab/emudisk $(VENV)/.installed
	@install -D -m 0755 lab/emudisk $@

# -- python -------------------------------------------------------------------------
venv: $(VENV)/.installed
# The recorder goes to the venv's libexec/iowhy, where `iowhy record` looks for it.
$(VENV)/.installed: $(PY_SRC) probes/iowhy-record | $(OUT)/.deps
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check '.[dev]' >/dev/null
	@install -D -m 0755 probes/iowhy-record $(VENV)/libexec/iowhy/iowhy-record
	@touch $@

lint: $(VENV)/.installed
	$(VENV)/bin/flake8 analyzer reports tests lab bench tools
	$(VENV)/bin/mypy

test: all lint emudisk | $(OUT)/.deps-test
	$(VENV)/bin/pytest -ra -v --slow tests

# The unit tier (tests/unit: no root, no kernel, no BPF build) in a venv holding only the
# Python package and its dev tools; it works as any user on a plain checkout.
$(VENV)/.installed-py: $(PY_SRC)
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check '.[dev]' >/dev/null
	@touch $@

test-unit: $(VENV)/.installed-py
	$(VENV)/bin/pytest -ra -q tests/unit

test-fast: all emudisk | $(OUT)/.deps-test
	$(VENV)/bin/pytest -ra -q -m 'not bpf and not lab' tests

demo: all emudisk | $(OUT)/.deps-lab
	bash lab/demo.sh

# Every lab scenario on each of its filesystems, emulated hdd-7200, checked against the
# ground truth (root; a few minutes). Results side by side in out/lab.
lab: all emudisk | $(OUT)/.deps-lab
	$(VENV)/bin/iowhy lab run all --out out/lab

bench: all
	$(VENV)/bin/python bench/bench_record.py
	$(VENV)/bin/python bench/bench_analyze.py

# The seeds' scenarios as HTML reports and compare pages in reports/gallery (root).
gallery: all emudisk | $(OUT)/.deps-lab
	$(VENV)/bin/python -m iowhy.lab.gallery --out reports/gallery --work out/gallery

clean:
	rm -rf $(OUT) probes/iowhy-record lab/emudisk build *.egg-info

# -- man page, shell completion, syscall names (generated by tools/) ----------------------
.PHONY: man completions syscall-table parquet-schema install uninstall
MAN_PAGE := build/man/iowhy.1
BASH_COMPLETION := build/completion/iowhy.bash
ZSH_COMPLETION := build/completion/_iowhy

man: $(MAN_PAGE)
completions: $(BASH_COMPLETION) $(ZSH_COMPLETION)

# The page is checked as it is built: `man --warnings` must print nothing.
build/.deps-man:
	@mkdir -p $(@D)
	@if ! command -v man >/dev/null || ! command -v groff >/dev/null; then \
		echo "installing: man-db groff-base"; \
		if [ "$$(id -u)" != 0 ]; then echo "make: need root to install man-db groff-base" >&2; exit 1; fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends man-db groff-base >/dev/null \
			|| { echo "make: apt-get install failed for: man-db groff-base" >&2; exit 1; }; \
	fi
	@touch $@

$(MAN_PAGE): tools/clidoc.py $(VENV)/.installed | build/.deps-man
	@mkdir -p $(@D)
	$(VENV)/bin/python tools/clidoc.py man -o $@.tmp
	@warn=$$(man --warnings -l $@.tmp 2>&1 >/dev/null); \
	if [ -n "$$warn" ]; then echo "$$warn" >&2; echo "make: $@: man --warnings complained" >&2; exit 1; fi
	@mv $@.tmp $@

$(BASH_COMPLETION): tools/clidoc.py $(VENV)/.installed
	@mkdir -p $(@D)
	$(VENV)/bin/python tools/clidoc.py bash -o $@

$(ZSH_COMPLETION): tools/clidoc.py $(VENV)/.installed
	@mkdir -p $(@D)
	$(VENV)/bin/python tools/clidoc.py zsh -o $@

# Syscall names of x86-64 and arm64 from the kernel's UAPI headers (linux-libc-dev). The
# module is committed (so `pip install .` needs no headers) and regenerated when the
# headers change; tests/unit/test_syscalls.py checks that it matches them.
SYSCALL_HEADERS := $(wildcard /usr/include/x86_64-linux-gnu/asm/unistd_64.h \
	/usr/include/asm-generic/unistd.h /usr/include/linux/version.h)
analyzer/iowhy/syscall_table.py: tools/gen_syscall_table.py $(SYSCALL_HEADERS)
	CC="$(CC)" $(PYTHON) tools/gen_syscall_table.py -o $@
syscall-table:
	CC="$(CC)" $(PYTHON) tools/gen_syscall_table.py -o analyzer/iowhy/syscall_table.py

# docs/parquet-schema.md is generated from the export's schema (analyzer/iowhy/export/
# schema.py); tests/unit/test_export_parquet_parity.py checks that the committed page is current.
parquet-schema: $(VENV)/.installed-py
	$(VENV)/bin/python -m iowhy.export.schema -o docs/parquet-schema.md

# -- install: `make install [PREFIX=/usr/local] [DESTDIR=]` ----------------------------------
# PREFIX/bin/iowhy is a launcher (tools/iowhy.sh.in) that runs the package and its Python
# dependencies, installed with pip --target into PREFIX/lib/iowhy/python (the system
# Python's site-packages are left alone), and finds the recorder in PREFIX/libexec/iowhy.
# It locates both from its own path, so nothing of DESTDIR is written into the files.
# EXTRAS: the optional Python packages installed into the same tree, by the package's
# extras (setup.cfg): `export` (pyarrow, duckdb, perfetto: export, query) by default;
# `make install EXTRAS=` installs without them.
PREFIX ?= /usr/local
EXTRAS ?= export
DESTDIR ?=
IOWHY_LIB := $(PREFIX)/lib/iowhy
IOWHY_LIBEXEC := $(PREFIX)/libexec/iowhy
INSTALLED_FILES := $(PREFIX)/bin/iowhy $(IOWHY_LIBEXEC)/iowhy-record $(IOWHY_LIBEXEC)/emudisk \
	$(PREFIX)/share/man/man1/iowhy.1 $(PREFIX)/share/bash-completion/completions/iowhy \
	$(PREFIX)/share/zsh/site-functions/_iowhy

install: probes/iowhy-record lab/emudisk $(MAN_PAGE) $(BASH_COMPLETION) $(ZSH_COMPLETION) \
		$(VENV)/.installed
	@case "$(PREFIX)" in /*) ;; *) echo "make: PREFIX must be an absolute path" >&2; exit 1;; esac
	@set -e; umask 022; \
	echo "installing iowhy $(VERSION) into $(DESTDIR)$(PREFIX)$(if $(strip $(EXTRAS)), with $(strip $(EXTRAS)))"; \
	rm -rf "$(DESTDIR)$(IOWHY_LIB)"; \
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-compile --no-warn-script-location \
		--target "$(DESTDIR)$(IOWHY_LIB)/python" ".$(if $(strip $(EXTRAS)),[$(strip $(EXTRAS))])"; \
	rm -rf "$(DESTDIR)$(IOWHY_LIB)/python/bin"; \
	$(PYTHON) -m compileall -q -d "$(IOWHY_LIB)/python" "$(DESTDIR)$(IOWHY_LIB)/python" >/dev/null; \
	install -D -m 0755 probes/iowhy-record "$(DESTDIR)$(IOWHY_LIBEXEC)/iowhy-record"; \
	install -D -m 0755 lab/emudisk "$(DESTDIR)$(IOWHY_LIBEXEC)/emudisk"; \
	mkdir -p build; sed 's|@PYTHON@|$(PYTHON)|' tools/iowhy.sh.in > build/iowhy.sh; \
	install -D -m 0755 build/iowhy.sh "$(DESTDIR)$(PREFIX)/bin/iowhy"; \
	install -D -m 0644 $(MAN_PAGE) "$(DESTDIR)$(PREFIX)/share/man/man1/iowhy.1"; \
	install -D -m 0644 $(BASH_COMPLETION) \
		"$(DESTDIR)$(PREFIX)/share/bash-completion/completions/iowhy"; \
	install -D -m 0644 $(ZSH_COMPLETION) "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_iowhy"

uninstall:
	@case "$(PREFIX)" in /*) ;; *) echo "make: PREFIX must be an absolute path" >&2; exit 1;; esac
	rm -f $(addprefix "$(DESTDIR),$(addsuffix ",$(INSTALLED_FILES)))
	rm -rf "$(DESTDIR)$(IOWHY_LIB)"
	@if [ -d "$(DESTDIR)$(IOWHY_LIBEXEC)" ]; then rmdir "$(DESTDIR)$(IOWHY_LIBEXEC)"; fi
