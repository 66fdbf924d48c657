# syntax=docker/dockerfile:1
# Tidemark: a static binary on a distroless base, run as a non-root user.
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) -t tidemark .
# Checked statically in CI (deploy/deploy_test.go): the machine has no
# Docker engine to build it.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}" \
      -o /out/tidemark ./cmd/tidemark

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tidemark /usr/local/bin/tidemark
COPY configs/ /etc/tidemark/examples/
# 65532 is distroless's "nonroot".
USER 65532:65532
EXPOSE 9464
# No shell or curl in the image: the binary asks its own /healthz.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/tidemark", "health", "--url", "http://127.0.0.1:9464/healthz"]
ENTRYPOINT ["/usr/local/bin/tidemark"]
CMD ["run", "--config", "/etc/tidemark/tidemark.yaml"]
