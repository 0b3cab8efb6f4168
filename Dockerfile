# The worker binary on a small base. Build context: the repository root (see .dockerignore).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/worker ./cmd/worker

FROM debian:bookworm-slim
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
