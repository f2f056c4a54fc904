# Oxios: an agent operating system built as a Unix toolkit.
# `make help` lists the targets. Every install path is under $(DESTDIR).

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
# oxiosd reads /etc/oxios/oxios.toml whatever the PREFIX.
SYSCONFDIR ?= /etc
SYSTEMDDIR ?= $(PREFIX)/lib/systemd/system
SYSTEMDUSERDIR ?= $(PREFIX)/lib/systemd/user
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d

GO ?= go
VERSION ?= $(shell git describe --tags --dirty 2>/dev/null || echo 0.1.0-dev)
# urfave_cli_no_docs leaves out urfave/cli's man page generator (and the
# Markdown parser under it), whose init costs each ox-* command ~2 ms.
GOBUILDFLAGS ?= -trimpath -tags urfave_cli_no_docs
LDFLAGS ?= -X main.version=$(VERSION)
# go-md2man at the version go.mod pins.
MD2MAN ?= $(GO) run github.com/cpuguy83/go-md2man/v2
FUZZTIME ?= 5m
BENCHFLAGS ?=
# The judged collection `make eval` uses (see its README.md).
CISI ?= $(CURDIR)/../shared/data/ir/cisi

# Every folder of cmd/ with a main.go is a binary.
BINARIES := $(patsubst cmd/%/main.go,%,$(wildcard cmd/*/main.go))
MANSRC := $(wildcard man/*.md)
# Every folder of share/programs/ is a shipped program (ox-program(1)).
PROGRAMS := $(notdir $(patsubst %/,%,$(wildcard share/programs/*/)))
MANPAGES := $(MANSRC:.md=)
# Every folder of tools/ is a WASM tool: share/tools/NAME.wasm beside its
# manifest share/tools/NAME.json.
TOOLS := $(patsubst tools/%/main.go,%,$(wildcard tools/*/main.go))
TOOLWASM := $(addprefix share/tools/,$(addsuffix .wasm,$(TOOLS)))
UNITS := $(wildcard contrib/systemd/*.service contrib/systemd/*.socket)
USERUNITS := $(wildcard contrib/systemd/user/*.service contrib/systemd/user/*.socket)
# Where the red-team suite writes its counts for `make test` to print.
REDTEAM_REPORT ?= $(CURDIR)/.redteam-report
# Where `make run` keeps its daemon's files.
RUNDIR ?= $(CURDIR)/.oxios
# Where `make test` builds the commands once for its tests.
TESTBIN ?= $(CURDIR)/.testbin

.DEFAULT_GOAL := build

.PHONY: build
build: tools ## build every cmd/* into bin/, the WASM tools and the completions
	@# Static binaries (no cgo): no dynamic loader and libc to set up at each
	@# start, about 2.5 ms of every ox-* command; os/user reads /etc/passwd.
	CGO_ENABLED=0 $(GO) build $(GOBUILDFLAGS) -ldflags "$(LDFLAGS)" -o bin/ $(addprefix ./cmd/,$(BINARIES)) ./cmd/oxiosd/oxios-sandbox-init
	@$(MAKE) --no-print-directory completions

.PHONY: completions
completions: ## write bin/completions/{bash,zsh,fish}: one script per command, from ox completion
	@# The scripts pass what is typed to each command's hidden --complete
	@# (pkg/cliutil/complete.go), which reads it against its own flags and
	@# subcommands and asks the daemon for agents, keys, runs and jobs.
	@set -e; for sh in bash zsh fish; do mkdir -p bin/completions/$$sh; \
		for c in $(BINARIES); do \
			case $$sh in zsh) f=_$$c ;; fish) f=$$c.fish ;; *) f=$$c ;; esac; \
			bin/ox completion $$sh $$c > bin/completions/$$sh/$$f; \
		done; done

.PHONY: tools
tools: $(TOOLWASM) ## build the WASM tools tools/* into share/tools/NAME.wasm

share/tools/%.wasm: tools/%/*.go go.mod
	GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -o $@ ./tools/$*

.PHONY: test
test: vet fmt-check ## vet, check formatting, run all tests with -race, then a short fuzz
	@rm -f $(REDTEAM_REPORT)
	@# The commands, built once for tests/docs and both runs of
	@# tests/integration below (OXIOS_TEST_BIN), not by each.
	@rm -rf $(TESTBIN)
	$(GO) build -tags urfave_cli_no_docs -o $(TESTBIN)/ ./cmd/...
	@# go test starts the packages' tests in the order named, as many at
	@# once as there are cores: the longest first, so that they do not
	@# start last and run alone at the end (./... names the rest).
	OXIOS_TEST_BIN=$(TESTBIN) OXIOS_REDTEAM_REPORT=$(REDTEAM_REPORT) $(GO) test -race -count=1 -timeout 20m -parallel 3 \
		./tests/integration ./pkg/state ./tests/docs ./pkg/kernel ./pkg/serve ./...
	@echo "== red-team report (tests/integration/redteam_test.go)"
	@cat $(REDTEAM_REPORT) 2>/dev/null || { echo "make test: no red-team report at $(REDTEAM_REPORT)"; exit 1; }
	@# Allocation counts mean nothing under -race (sync.Pool drops items):
	@# the client's are checked without it.
	$(GO) test -count=1 -timeout 2m -run='Allocs$$' ./pkg/client
	@# Memory, which the race detector's shadow memory hides: the bound on
	@# long request lines (issue 45), against binaries built without it.
	@# And the tests that skip themselves under -race (noRace in
	@# tests/integration): the flags of every command and the shipped
	@# programs, hundreds of starts of commands and runs each.
	OXIOS_TEST_BIN=$(TESTBIN) $(GO) test -count=1 -timeout 8m -run='^(TestUnterminatedLoadLines|TestFlagsBeforeCommand|TestProgram.*|TestReplay.*)$$' ./tests/integration
	@# go test -fuzz passes quietly when nothing matches: make that loud.
	@grep -qs '^func FuzzDecodeRequest(' pkg/server/*_test.go || \
		{ echo "make test: FuzzDecodeRequest not found in pkg/server"; exit 1; }
	@# A count, not a duration: go1.26's fuzzing coordinator can fail a
	@# duration's end as "context deadline exceeded" (golang/go#75804).
	@# 50,000 runs take about 8 s on 2 cores.
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeRequest$$' -fuzztime=50000x ./pkg/server

.PHONY: vet
vet: ## go vet
	$(GO) vet ./...

.PHONY: fmt
fmt: ## gofmt every Go file in place
	gofmt -w .

.PHONY: fmt-check
fmt-check: ## fail if a Go file is not gofmt-formatted
	@files=$$(gofmt -l .); if [ -n "$$files" ]; then \
		echo "gofmt would change (run make fmt):"; echo "$$files"; exit 1; fi

.PHONY: deps
deps: ## install fuse3 (fusermount3, for the mount as a user) with apt-get or dnf, if missing
	@if command -v fusermount3 >/dev/null; then echo "fuse3: present"; \
	elif command -v apt-get >/dev/null; then apt-get install -y fuse3; \
	elif command -v dnf >/dev/null; then dnf install -y fuse3; \
	else echo "make deps: install the fuse3 package with your package manager"; exit 1; fi

.PHONY: bench
bench: build ## run the benchmarks against bin/ (pass BENCHFLAGS=...); the FTS5 anchor needs a C compiler
	cd tests/bench/fts5 && $(GO) build -tags sqlite_fts5 -o $(CURDIR)/bin/.bench/fts5 .
	$(GO) run ./tests/bench -bin $(CURDIR)/bin -cisi $(CISI) -fts5 $(CURDIR)/bin/.bench/fts5 $(BENCHFLAGS)

.PHONY: torture
torture: ## long runs: the crash storm, STORM_ROUNDS kill -9 rounds (default 40); on a real mount (as root): fsx, 20,000 ops per seed, the eviction repro, a 256 MiB file
	OXIOS_TORTURE=1 OXIOS_FSX_OPS=$(or $(FSX_OPS),20000) OXIOS_STORM_ROUNDS=$(or $(STORM_ROUNDS),40) \
		$(GO) test -race -count=1 -timeout 60m \
		-run '^(TestCrashStorm|TestFUSEFsx|TestFUSEEvictionKeepsWrites|TestFUSEStaleRead|TestFUSELargeFile)$$' -v ./tests/integration

.PHONY: eval
eval: build ## recall quality on CISI through a real oxiosd: MAP and nDCG@10 vs BM25
	$(GO) run ./tests/eval -bin $(CURDIR)/bin -cisi $(CISI)

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 5m)
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		pkg=./$$(dirname $${f#./}); \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== $$pkg $$name ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg; \
		done; \
	done

.PHONY: run
run: build ## run oxiosd in the foreground on .oxios/ (no config file; MOUNT=DIR to mount, else no mount)
	@mkdir -p $(RUNDIR)
	@echo "oxiosd: data $(RUNDIR)/data, socket $(RUNDIR)/oxiosd.sock; Ctrl-C stops it."
	@echo "In another terminal, try:"
	@echo "  export OXIOS_SOCKET=$(RUNDIR)/oxiosd.sock PATH=$(CURDIR)/bin:\$$PATH"
	@echo "  ox-state save -a demo greeting hello"
	@echo "  date | ox-state save -a demo notes/today"
	@echo "  ox-state ls -a demo"
	@echo "  ox-state load -a demo greeting"
	@echo
	exec bin/oxiosd --config '' --data $(RUNDIR)/data --socket $(RUNDIR)/oxiosd.sock $(if $(MOUNT),--mount $(MOUNT),--no-mount)

.PHONY: demo
demo: build ## a scripted tour: start a private oxiosd, use every command, stop it
	@# The demo's model endpoint: a scripted stand-in (tests/fakellm).
	CGO_ENABLED=0 $(GO) build $(GOBUILDFLAGS) -o bin/fakellm ./tests/fakellm
	contrib/demo.sh $(CURDIR)/bin

.PHONY: man
man: ## regenerate man/*.[1-8] from man/*.md
	@set -e; for f in $(MANSRC); do echo "go-md2man $$f"; $(MD2MAN) -in $$f -out $${f%.md}; done

.PHONY: install
install: build ## install binaries, man pages, completions, systemd units, default config
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(addprefix bin/,$(BINARIES)) bin/oxios-sandbox-init $(DESTDIR)$(BINDIR)/
	@set -e; for p in $(MANPAGES); do s=$${p##*.}; \
		install -d $(DESTDIR)$(MANDIR)/man$$s; \
		echo "install -m 0644 $$p $(DESTDIR)$(MANDIR)/man$$s/"; \
		install -m 0644 $$p $(DESTDIR)$(MANDIR)/man$$s/; done
	install -d $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0644 $(addprefix bin/completions/bash/,$(BINARIES)) $(DESTDIR)$(BASHCOMPDIR)/
	install -m 0644 $(addprefix bin/completions/zsh/_,$(BINARIES)) $(DESTDIR)$(ZSHCOMPDIR)/
	install -m 0644 $(addprefix bin/completions/fish/,$(addsuffix .fish,$(BINARIES))) $(DESTDIR)$(FISHCOMPDIR)/
	install -d $(DESTDIR)$(SYSTEMDDIR) $(DESTDIR)$(SYSTEMDUSERDIR)
	@set -e; for u in $(UNITS); do \
		echo "install $$u -> $(DESTDIR)$(SYSTEMDDIR)/"; \
		sed 's|@BINDIR@|$(BINDIR)|g' $$u > $(DESTDIR)$(SYSTEMDDIR)/$${u##*/}; \
		chmod 0644 $(DESTDIR)$(SYSTEMDDIR)/$${u##*/}; done
	@set -e; for u in $(USERUNITS); do \
		echo "install $$u -> $(DESTDIR)$(SYSTEMDUSERDIR)/"; \
		sed 's|@BINDIR@|$(BINDIR)|g' $$u > $(DESTDIR)$(SYSTEMDUSERDIR)/$${u##*/}; \
		chmod 0644 $(DESTDIR)$(SYSTEMDUSERDIR)/$${u##*/}; done
	install -d $(DESTDIR)$(DATADIR)/oxios
	install -m 0644 share/oxios.toml $(DESTDIR)$(DATADIR)/oxios/oxios.toml
	install -d $(DESTDIR)$(DATADIR)/oxios/policies
	install -m 0644 $(wildcard share/policies/*.toml) $(DESTDIR)$(DATADIR)/oxios/policies/
	@# The shipped personas are built into ox-agent; installed to be read
	@# and copied (an agent's own go in its state under personas/NAME).
	install -d $(DESTDIR)$(DATADIR)/oxios/personas
	install -m 0644 $(wildcard share/personas/*.toml) $(DESTDIR)$(DATADIR)/oxios/personas/
	@# The shipped programs are built into ox-program; installed to be
	@# read and copied (ox-program install takes a folder too).
	@set -e; for p in $(PROGRAMS); do \
		install -d $(DESTDIR)$(DATADIR)/oxios/programs/$$p; \
		for f in share/programs/$$p/*; do m=0644; [ -x $$f ] && m=0755; \
			echo "install -m $$m $$f $(DESTDIR)$(DATADIR)/oxios/programs/$$p/"; \
			install -m $$m $$f $(DESTDIR)$(DATADIR)/oxios/programs/$$p/; done; done
	install -d $(DESTDIR)$(DATADIR)/oxios/tools
	install -m 0644 $(TOOLWASM) $(addprefix share/tools/,$(addsuffix .json,$(TOOLS))) $(DESTDIR)$(DATADIR)/oxios/tools/
	@# The shipped defaults as a starting point, never over an existing file.
	@if [ ! -e $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml ]; then \
		echo "install -m 0644 share/oxios.toml $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml"; \
		install -d $(DESTDIR)$(SYSCONFDIR)/oxios; \
		install -m 0644 share/oxios.toml $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml; \
	else echo "keeping $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml"; fi

.PHONY: uninstall
uninstall: ## remove what install installed (an edited /etc/oxios/oxios.toml stays)
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(BINARIES)) $(DESTDIR)$(BINDIR)/oxios-sandbox-init
	@set -e; for p in $(MANPAGES); do s=$${p##*.}; \
		echo "rm -f $(DESTDIR)$(MANDIR)/man$$s/$${p##*/}"; \
		rm -f $(DESTDIR)$(MANDIR)/man$$s/$${p##*/}; done
	rm -f $(addprefix $(DESTDIR)$(BASHCOMPDIR)/,$(BINARIES))
	rm -f $(addprefix $(DESTDIR)$(ZSHCOMPDIR)/_,$(BINARIES))
	rm -f $(addprefix $(DESTDIR)$(FISHCOMPDIR)/,$(addsuffix .fish,$(BINARIES)))
	rm -f $(addprefix $(DESTDIR)$(SYSTEMDDIR)/,$(notdir $(UNITS)))
	rm -f $(addprefix $(DESTDIR)$(SYSTEMDUSERDIR)/,$(notdir $(USERUNITS)))
	rm -f $(DESTDIR)$(DATADIR)/oxios/oxios.toml
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/oxios/tools/,$(addsuffix .wasm,$(TOOLS)) $(addsuffix .json,$(TOOLS)))
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/oxios/policies/,$(notdir $(wildcard share/policies/*.toml)))
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/oxios/personas/,$(notdir $(wildcard share/personas/*.toml)))
	@set -e; for p in $(PROGRAMS); do for f in share/programs/$$p/*; do \
		rm -f $(DESTDIR)$(DATADIR)/oxios/programs/$$p/$${f##*/}; done; \
		rmdir $(DESTDIR)$(DATADIR)/oxios/programs/$$p 2>/dev/null || true; done
	@rmdir $(DESTDIR)$(DATADIR)/oxios/programs 2>/dev/null || true
	@rmdir $(DESTDIR)$(DATADIR)/oxios/personas 2>/dev/null || true
	@rmdir $(DESTDIR)$(DATADIR)/oxios/policies 2>/dev/null || true
	@rmdir $(DESTDIR)$(DATADIR)/oxios/tools 2>/dev/null || true
	@rmdir $(DESTDIR)$(DATADIR)/oxios 2>/dev/null || true
	@if cmp -s share/oxios.toml $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml; then \
		echo "rm -f $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml"; \
		rm -f $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml; \
		rmdir $(DESTDIR)$(SYSCONFDIR)/oxios 2>/dev/null || true; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml ]; then \
		echo "keeping the edited $(DESTDIR)$(SYSCONFDIR)/oxios/oxios.toml"; fi

.PHONY: clean
clean: ## remove bin/, the files of make run and the commands make test built
	rm -rf bin $(RUNDIR) $(TESTBIN) $(TOOLWASM)

.PHONY: help
help: ## list the targets
	@echo "usage: make [TARGET] [VAR=value ...]"
	@echo
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo "Variables: PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) BINDIR=$(BINDIR) MANDIR=$(MANDIR)"
	@echo "  DATADIR=$(DATADIR) SYSCONFDIR=$(SYSCONFDIR) SYSTEMDDIR=$(SYSTEMDDIR)"
	@echo "  VERSION=$(VERSION) FUZZTIME=$(FUZZTIME) BENCHFLAGS=$(BENCHFLAGS)"
