# kvalloc: see README.md. Every target runs from a fresh clone with Go 1.26;
# modules come from the Go proxy on first use.

GO       ?= go
PKGS     ?= ./...

.PHONY: test vet unit

## test: go vet, then the whole suite with the race detector.
test: vet unit

vet:
	$(GO) vet $(PKGS)

unit:
	$(GO) test -race -count=1 $(PKGS)
