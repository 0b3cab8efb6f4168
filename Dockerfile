# The worker binary on a small base. Build context: the repository root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/worker ./cmd/worker

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/worker /usr/local/bin/worker
COPY graph/pg/testdata/example.pg /etc/omnigraph/example.pg
ENTRYPOINT ["/usr/local/bin/worker"]
