# syntax=docker/dockerfile:1
# Tidemark: a static binary on a distroless base, run as a non-root user.
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) -t tidemark .
# Checked statically in CI (deploy/deploy_test.go): the machine has no
# Docker engine to build it.

# Base images pinned by digest (a tag moves; a digest is the image that was
# tested). Each release bumps them: `docker buildx imagetools inspect
# golang:1.26-bookworm` (and the distroless tag) prints the current digest.
# These were taken from public references of the tags (2026): the machine
# that pinned them reaches no container registry, so verify them there
# before the next release.
FROM golang:1.26-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
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

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
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
