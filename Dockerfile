# The worker binary on a small base. Build context: the repository root (see .dockerignore).
# Base images are pinned by digest (the tag says which version it is).
FROM golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The build context has no .git, so the binary cannot stamp its commit itself: pass it in
# (docker build --build-arg OMNIGRAPH_COMMIT=$(git rev-parse HEAD) …) for `worker version`
# and omnigraph_build_info; left empty, they say unknown.
ARG OMNIGRAPH_VERSION=
ARG OMNIGRAPH_COMMIT=
ARG OMNIGRAPH_BUILD_TIME=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/omnigraph/omnigraph-worker/internal/buildinfo.version=${OMNIGRAPH_VERSION} -X github.com/omnigraph/omnigraph-worker/internal/buildinfo.commit=${OMNIGRAPH_COMMIT} -X github.com/omnigraph/omnigraph-worker/internal/buildinfo.buildTime=${OMNIGRAPH_BUILD_TIME}" -o /out/worker ./cmd/worker

FROM debian:bookworm-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/worker /usr/local/bin/worker
COPY graph/pg/testdata/example.pg /etc/omnigraph/example.pg
# Not root: the worker needs no privileges; a local graph root or embedded NATS store must be a
# volume this user can write (/var/lib/omnigraph is one).
RUN mkdir -p /var/lib/omnigraph && chown 65532:65532 /var/lib/omnigraph
USER 65532:65532
WORKDIR /var/lib/omnigraph
EXPOSE 9464
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/worker", "health", "--http", "127.0.0.1:9464"]
ENTRYPOINT ["/usr/local/bin/worker"]
